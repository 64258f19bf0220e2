package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/worker"
)

// concRow is W3 on a queue without, and with, [queues.concurrency] limit 1
// over 10,000 accounts, and the delivery of other keys' jobs beside one hot
// key holding 90% of the jobs.
type concRow struct {
	system string
	// W3 jobs/s: no concurrency table, and limit 1 over 10,000 keys.
	base, keyed float64
	// The cold keys' jobs/s: processed alone, and beside the hot key.
	coldAlone, coldBesideHot float64
	err                      string
}

// concConfig bounds each account to one job at a time.
const concConfig = `
[[queues]]
name = "bench"

[queues.concurrency]
key_fields = ["/account"]
limit = 1
`

// runConcurrency runs, on fresh servers: W3 (50,000 jobs, 32 workers)
// with 256-byte JSON payloads spread over 10,000 accounts, without and with
// concConfig; then, with concConfig, 5,000 jobs of 5,000 other accounts
// alone (beside 45,000 jobs of a queue no worker reads, so that the store
// holds as many jobs), and the same 5,000 beside 45,000 jobs of one hot
// account, timing how long the 5,000 take to complete.
func runConcurrency(ctx context.Context, backend string) (concRow, error) {
	var r concRow
	N := n(50_000)
	spread := make([]string, N)
	for i := range spread {
		spread[i] = fmt.Sprintf("acc-%d", i%10_000)
	}
	for _, conf := range []string{"", concConfig} {
		el, _, err := concRun(ctx, backend, conf, spread)
		if err != nil {
			return r, err
		}
		if conf == "" {
			r.base = float64(N) / el.Seconds()
		} else {
			r.keyed = float64(N) / el.Seconds()
		}
	}
	cold := make([]string, N/10)
	for i := range cold {
		cold[i] = fmt.Sprintf("cold-%d", i)
	}
	// Alone, beside 45,000 jobs of a queue no worker reads, so that the
	// store holds as much as beside the hot account.
	alone := append(slices.Repeat([]string{idle}, N-len(cold)), cold...)
	_, coldEl, err := concRun(ctx, backend, concConfig, alone)
	if err != nil {
		return r, err
	}
	r.coldAlone = float64(len(cold)) / coldEl.Seconds()
	// One job in ten is another account's, spread through the hot ones.
	mixed := make([]string, N)
	for i := range mixed {
		mixed[i] = "hot"
		if i%10 == 9 {
			mixed[i] = cold[i/10]
		}
	}
	_, coldEl, err = concRun(ctx, backend, concConfig, mixed)
	if err != nil {
		return r, err
	}
	r.coldBesideHot = float64(len(cold)) / coldEl.Seconds()
	return r, nil
}

// idle names, in concRun's accounts, a job enqueued on a queue no worker
// reads.
const idle = "\x00idle"

// concRun enqueues one job per account of accounts (in batches of 1,000,
// in that order) on a fresh server with conf, then processes them with 32
// workers, and returns how long all took and how long the jobs of accounts
// other than "hot" took. An idle entry is a job of another queue, stored
// and never processed.
func concRun(ctx context.Context, backend, conf string, accounts []string) (all, cold time.Duration, err error) {
	inst, err := startSepp(ctx, backend, conf)
	if err != nil {
		return 0, 0, err
	}
	defer inst.close()
	coldN, total := 0, 0
	for i := 0; i < len(accounts); i += 1000 {
		var reqs []sepp.EnqueueRequest
		for _, a := range accounts[i:min(i+1000, len(accounts))] {
			queue := inst.queue
			switch a {
			case idle:
				queue = "idle"
			case "hot":
				total++
			default:
				coldN++
				total++
			}
			p := fmt.Appendf(nil, `{"account":%q,"pad":"`, a)
			for len(p) < 254 {
				p = append(p, 'x')
			}
			reqs = append(reqs, sepp.EnqueueRequest{Queue: queue, JobType: "bench", Payload: append(p, '"', '}')})
		}
		res, err := inst.client.EnqueueBatch(ctx, reqs, sepp.BatchOptions{Atomic: true})
		if err != nil {
			return 0, 0, err
		}
		for _, r := range res {
			if r.Err != nil {
				return 0, 0, r.Err
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done, coldDone atomic.Int64
	var coldAt atomic.Int64
	start := time.Now()
	w := worker.New(inst.client, worker.Config{Queues: []string{inst.queue}, Concurrency: 32, Wait: time.Second, Logger: quietLogger})
	w.HandleAll(func(_ context.Context, j *worker.Job) ([]byte, error) {
		var p struct{ Account string }
		if err := json.Unmarshal(j.Payload, &p); err == nil && p.Account != "hot" {
			if coldDone.Add(1) == int64(coldN) {
				coldAt.Store(int64(time.Since(start)))
			}
		}
		if done.Add(1) == int64(total) {
			cancel()
		}
		return nil, nil
	})
	err = w.Run(ctx)
	all = time.Since(start)
	if done.Load() < int64(total) {
		return all, 0, fmt.Errorf("handled %d of %d: %v", done.Load(), total, err)
	}
	return all, time.Duration(coldAt.Load()), nil
}
