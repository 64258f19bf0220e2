package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/outboxsql"
	"github.com/sepp-dev/sepp/outbox"
	"github.com/sepp-dev/sepp/test/faults/history"
)

// keySet is every (queue, key) the producers enqueued and every effect key
// the handlers claimed: what the state section looks up at the end.
type keySet struct {
	mu      sync.Mutex
	keys    map[[2]string]bool
	effects map[string]bool
}

func newKeySet() *keySet {
	return &keySet{keys: map[[2]string]bool{}, effects: map[string]bool{}}
}

func (s *keySet) add(queue, key string) {
	s.mu.Lock()
	s.keys[[2]string{queue, key}] = true
	s.mu.Unlock()
}

func (s *keySet) addEffect(key string) {
	s.mu.Lock()
	s.effects[key] = true
	s.mu.Unlock()
}

// unsettled counts the jobs still to run (scheduled, available, reserved).
func unsettled(ctx context.Context, n nodeConn) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := n.admin.ListQueues(ctx, &seppv1.ListQueuesRequest{})
	if err != nil {
		return 0, err
	}
	var left int64
	for _, q := range res.GetQueues() {
		left += q.GetScheduled() + q.GetAvailable() + q.GetReserved()
	}
	return left, nil
}

// retry runs call until it succeeds or ctx ends: the state is read after the
// faults are healed, but a node may still be starting.
func retry(ctx context.Context, call func(ctx context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := call(cctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readState reads back from the store, through node n, every job, the dedup
// record of every key the run used and every effect it claimed.
func readState(ctx context.Context, n nodeConn, seen *keySet) (history.State, error) {
	st := history.State{ReadAt: history.At(time.Now()), Jobs: []history.Job{}, Dedup: []history.DedupRecord{}, Effects: []history.Effect{}}
	for _, q := range campaignQueues {
		p := q
		if p.DedupWindowMS == 0 {
			p.DedupWindowMS = defaultWindowMS
		}
		if p.OnDuplicate == "" {
			p.OnDuplicate = "return_original"
		}
		st.Queues = append(st.Queues, p)
		token := ""
		for {
			var res *seppv1.ListJobsResponse
			err := retry(ctx, func(ctx context.Context) error {
				var err error
				res, err = n.admin.ListJobs(ctx, &seppv1.ListJobsRequest{Queue: q.Queue, PageSize: 1000, PageToken: token})
				return err
			})
			if err != nil {
				return st, fmt.Errorf("list jobs of %s: %w", q.Queue, err)
			}
			for _, j := range res.GetJobs() {
				hj := history.Job{ID: j.GetJobId(), Queue: j.GetQueue(), Key: j.GetIdempotencyKey(),
					JobType: j.GetJobType(), State: stateName(j.GetState()), Attempts: int(j.GetAttempts()),
					Result: string(j.GetResult()), CreatedAt: history.At(j.GetCreatedAt().AsTime()),
					RuleKey: ruleKeyOf(j.GetQueue(), j.GetIdempotencyKey()), FollowsJobID: j.GetFollowsJobId(), HeldBy: holdName(j.GetHeldBy())}
				if j.GetFinalizedAt() != nil {
					hj.FinalizedAt = history.At(j.GetFinalizedAt().AsTime())
				}
				hj.ConcKey, hj.RateKey = flowKeysOf(j.GetQueue(), j.GetPayload())
				if j.GetQueue() == outboxQueue {
					hj.Payload = history.Fingerprint(j.GetPayload())
				}
				st.Jobs = append(st.Jobs, hj)
			}
			token = res.GetNextPageToken()
			if token == "" {
				break
			}
		}
	}
	seen.mu.Lock()
	keys := make([][2]string, 0, len(seen.keys))
	for k := range seen.keys {
		keys = append(keys, k)
	}
	effects := make([]string, 0, len(seen.effects))
	for k := range seen.effects {
		effects = append(effects, k)
	}
	seen.mu.Unlock()

	var mu sync.Mutex // st's lists
	err := lookupAll(ctx, len(keys), func(ctx context.Context, i int) (func(), error) {
		res, err := n.jobs.LookupIdempotencyKey(ctx, &seppv1.LookupIdempotencyKeyRequest{Queue: keys[i][0], IdempotencyKey: keys[i][1]})
		if err != nil || !res.GetFound() {
			return nil, err
		}
		return func() {
			st.Dedup = append(st.Dedup, history.DedupRecord{Queue: keys[i][0], Key: keys[i][1], JobID: res.GetJobId(),
				ExpiresAt: history.At(res.GetExpiresAt().AsTime())})
		}, nil
	}, &mu)
	if err != nil {
		return st, err
	}
	err = lookupAll(ctx, len(effects), func(ctx context.Context, i int) (func(), error) {
		res, err := n.effects.GetEffect(ctx, &seppv1.GetEffectRequest{Scope: effectScope, Key: effects[i]})
		if err != nil || !res.GetFound() {
			return nil, err
		}
		return func() {
			st.Effects = append(st.Effects, history.Effect{Scope: effectScope, Key: effects[i],
				State: strings.ToLower(strings.TrimPrefix(res.GetState().String(), "CLAIM_OUTCOME_")), Result: string(res.GetResult())})
		}, nil
	}, &mu)
	return st, err
}

// outboxLeft counts the rows still in the outbox table (none without an
// app database).
func outboxLeft(ctx context.Context, app *sql.DB) (int, error) {
	if app == nil {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var n int
	err := app.QueryRowContext(ctx, "SELECT count(*) FROM "+outbox.DefaultTable).Scan(&n)
	return n, err
}

// readOutbox reads the outbox table back: the ids of the rows left in it
// and the rows of its dead table.
func readOutbox(ctx context.Context, app *sql.DB) (*history.OutboxState, error) {
	st := &history.OutboxState{Table: outbox.DefaultTable}
	err := retry(ctx, func(ctx context.Context) error {
		st.Left, st.Dead = []string{}, []history.DeadRow{}
		rs, err := app.QueryContext(ctx, "SELECT id FROM "+outbox.DefaultTable+" ORDER BY id")
		if err != nil {
			return err
		}
		for rs.Next() {
			var id string
			if err := rs.Scan(&id); err != nil {
				rs.Close()
				return err
			}
			st.Left = append(st.Left, id)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
		rs, err = app.QueryContext(ctx, "SELECT id, queue, coalesce(idempotency_key, ''), reason FROM "+outboxsql.DeadTable(outbox.DefaultTable)+" ORDER BY id")
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var d history.DeadRow
			if err := rs.Scan(&d.ID, &d.Queue, &d.Key, &d.Reason); err != nil {
				return err
			}
			st.Dead = append(st.Dead, d)
		}
		return rs.Err()
	})
	return st, err
}

// lookupAll runs look for 0..n-1, 16 at a time, each retried until it
// answers, and applies what each returns (a nil func: nothing) under mu.
func lookupAll(ctx context.Context, n int, look func(ctx context.Context, i int) (func(), error), mu *sync.Mutex) error {
	var firstErr error
	parallel(n, func(i int) {
		var keep func()
		err := retry(ctx, func(ctx context.Context) error {
			var err error
			keep, err = look(ctx, i)
			return err
		})
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			firstErr = err
		case keep != nil:
			keep()
		}
	})
	return firstErr
}

// defaultWindowMS is the dedup window of a queue that sets none (24 h).
const defaultWindowMS = 86400000

// holdName is what holds a job back, as the history names it: follow_up,
// concurrency, rate, or "" for nothing.
func holdName(h seppv1.JobHold) string {
	if h == seppv1.JobHold_JOB_HOLD_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(h.String(), "JOB_HOLD_"))
}

func stateName(s seppv1.JobState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "JOB_STATE_"))
}

func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
