package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/worker"
)

const benchE2ELong = `Enqueues -n keyed jobs from -p producers and processes them with -c worker
goroutines running a no-op handler; reports enqueue throughput, processing
throughput and enqueue-to-start latency. Without --addr it starts a server
in this process on a fresh data directory.`

// runBenchE2E enqueues N keyed jobs and processes them with C worker
// goroutines running a no-op handler, and reports enqueue throughput,
// processing throughput and enqueue-to-start latency.
func runBenchE2E(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp bench e2e", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf benchFlags
	bf.register(fs)
	n := fs.Int("n", 20000, "jobs to enqueue and process")
	producers := fs.Int("p", 32, "concurrent producers")
	c := fs.Int("c", 64, "worker goroutines")
	payloadSize := fs.Int("payload", 256, "payload size in bytes")
	rate := fs.Int("rate", 0, "enqueue at most this many jobs per second (0: as fast as the producers go); a low rate measures the start lag of an idle server")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *n < 1 || *producers < 1 || *c < 1 || *payloadSize < 0 || *rate < 0 {
		return usagef("want -n, -p and -c >= 1, -payload and -rate >= 0")
	}
	target, stop, err := bf.start(stdout)
	if err != nil {
		return err
	}
	defer stop()
	ctx := context.Background()
	cfg := sepp.Config{FailFast: true}
	if err := bf.conn.apply(&cfg, target); err != nil {
		return err
	}
	client, err := sepp.NewClient(ctx, target, cfg)
	if err != nil {
		return err
	}
	defer client.Close()

	queue := "e2e-" + randomHex(4)
	payload := make([]byte, *payloadSize)
	var (
		mu      sync.Mutex
		lat     = make([]time.Duration, 0, *n)
		started atomic.Int64
	)
	w := worker.New(client, worker.Config{Queues: []string{queue}, Concurrency: *c, Wait: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	w.Handle("noop", func(ctx context.Context, j *worker.Job) ([]byte, error) {
		d := time.Since(j.CreatedAt)
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		started.Add(1)
		return nil, nil
	})
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(wctx) }()
	defer func() {
		stopWorker()
		<-workerDone
	}()

	// pace hands out one enqueue per tick when -rate is set.
	var pace <-chan time.Time
	if *rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(*rate))
		defer t.Stop()
		pace = t.C
	}
	begin := time.Now()
	var next atomic.Int64
	stopProgress := liveProgress(stderr, bf.progress, func() string {
		return fmt.Sprintf("bench e2e: %d/%d enqueued, %d handled, %.0f handled/s", min(next.Load(), int64(*n)), *n,
			started.Load(), float64(started.Load())/time.Since(begin).Seconds())
	})
	defer stopProgress()
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range *producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(*n) {
					return
				}
				if pace != nil {
					<-pace
				}
				if _, err := client.Enqueue(ctx, sepp.EnqueueRequest{Queue: queue, JobType: "noop", Payload: payload,
					IdempotencyKey: sepp.Key(fmt.Sprint(queue, "-", i))}); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	enqueued := time.Since(begin)
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d enqueues failed", f)
	}
	// Processing ends when every job is durably COMPLETED.
	deadline := time.Now().Add(10 * time.Minute)
	for {
		qs, err := client.ListQueues(ctx)
		if err != nil {
			return err
		}
		done := int64(0)
		for _, q := range qs {
			if q.Name == queue {
				done = q.Completed
			}
		}
		if done == int64(*n) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d jobs completed after 10 minutes", done, *n)
		}
		time.Sleep(100 * time.Millisecond) // ListQueues scans the jobs: look rarely
	}
	processed := time.Since(begin)

	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	fmt.Fprintf(stdout, "jobs:       %d keyed, %d-byte payloads, %d producers, %d worker goroutines, no-op handler\n", *n, *payloadSize, *producers, *c)
	fmt.Fprintf(stdout, "enqueue:    %.0f jobs/s (%v)\n", float64(*n)/enqueued.Seconds(), enqueued.Round(time.Millisecond))
	fmt.Fprintf(stdout, "processed:  %.0f jobs/s end to end, every completion durable (%v from the first enqueue to the last completion)\n",
		float64(*n)/processed.Seconds(), processed.Round(time.Millisecond))
	if bf.addr == "" {
		fmt.Fprintf(stdout, "store:      %v\n", &benchCommits)
	}
	fmt.Fprintf(stdout, "start lag:  enqueue to handler start p50 %v  p99 %v  max %v (handler ran %d times)\n",
		pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), started.Load())
	return nil
}
