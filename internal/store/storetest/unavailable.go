package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// Database is the control of a store's database server that the outage
// cases need: they cut it off and bring it back while the store is open.
type Database struct {
	// Down makes the database unreachable from the store: its open
	// connections break and new ones are refused, until Up.
	Down func(t *testing.T)
	// Up makes the database reachable again after Down.
	Up func(t *testing.T)
	// Kill ends every connection the store has, from the database's side,
	// as a restart does; the database stays reachable. It fails t when it
	// ended none.
	Kill func(t *testing.T)
}

// Outage is what RunUnavailable needs of a backend whose database can be
// unreachable (PostgreSQL).
type Outage struct {
	// Open returns a fresh, empty store and the control of its database.
	Open func(t *testing.T) (store.Store, Database)
	// OpenUnreachable opens a store at an address where no database
	// answers.
	OpenUnreachable func(ctx context.Context) (store.Store, error)
}

// outageWait bounds each call made while the database is down, and the
// wait for the store to work again once it is back. A limit that a hung
// call runs into, not a speed requirement.
const outageWait = 20 * time.Second

// RunUnavailable runs the cases of store.ErrUnavailable: a database that
// cannot be reached makes calls fail with an error that says so and says
// to retry, and once it is back the same store works again, without being
// reopened.
func RunUnavailable(t *testing.T, o Outage) {
	t.Run("OpenUnreachable", func(t *testing.T) {
		t.Parallel()
		testOpenUnreachable(t, o)
	})
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, db Database)
	}{
		{"CallsDuringOutage", testCallsDuringOutage},
		{"ConnectionsKilled", testConnectionsKilled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, db := o.Open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tt.fn(t, s, db)
		})
	}
}

// checkUnavailable fails t unless err is ErrUnavailable and tells the
// caller to retry.
func checkUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: nil error, want ErrUnavailable", what)
	case !errors.Is(err, store.ErrUnavailable):
		t.Errorf("%s: %v, want an error that is ErrUnavailable", what, err)
	case !strings.Contains(strings.ToLower(err.Error()), "retry"):
		t.Errorf("%s: %q does not tell the caller to retry", what, err)
	}
}

func testOpenUnreachable(t *testing.T, o Outage) {
	ctx, cancel := context.WithTimeout(context.Background(), outageWait)
	defer cancel()
	s, err := o.OpenUnreachable(ctx)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded with no database at the address")
	}
	if ctx.Err() != nil {
		t.Fatalf("Open blocked until its context ended (%v): %v", outageWait, err)
	}
	checkUnavailable(t, "Open", err)
}

// call is one store call made during an outage.
type call struct {
	name string
	do   func(ctx context.Context) error
}

// outageCalls are reads and writes of every part of the store, on a job
// reserved under token and an effect claimed under effect.
func outageCalls(s store.Store, id store.JobID, token, effect store.LeaseToken) []call {
	now := t0.Add(time.Second)
	return []call{
		{"EnqueueBatch", func(ctx context.Context) error {
			_, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: []store.EnqueueJob{job("q", "k2")}, Now: now})
			return err
		}},
		{"EnqueueBatch atomic", func(ctx context.Context) error {
			_, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: []store.EnqueueJob{job("q", "k3"), job("q", "")}, Atomic: true, Now: now})
			return err
		}},
		{"GetJob", func(ctx context.Context) error { _, err := s.GetJob(ctx, &store.GetJobParams{ID: id}); return err }},
		{"LookupDedup", func(ctx context.Context) error {
			_, err := s.LookupDedup(ctx, &store.LookupDedupParams{Queue: "q", Key: "k", Now: now})
			return err
		}},
		{"Reserve", func(ctx context.Context) error {
			_, err := s.Reserve(ctx, &store.ReserveParams{Queues: []string{"q"}, WorkerID: "w", Max: 1, Lease: lease, Now: now})
			return err
		}},
		{"ExtendLease", func(ctx context.Context) error {
			_, err := s.ExtendLease(ctx, &store.ExtendLeaseParams{ID: id, LeaseToken: token, Lease: lease, Now: now})
			return err
		}},
		{"Complete", func(ctx context.Context) error {
			_, err := s.Complete(ctx, &store.CompleteParams{Jobs: []store.CompletedJob{{ID: id, LeaseToken: token}}, Now: now})
			return err
		}},
		{"Fail", func(ctx context.Context) error {
			_, err := s.Fail(ctx, &store.FailParams{ID: id, LeaseToken: token, Error: "x", RetryAt: at(now), Now: now})
			return err
		}},
		{"Sweep", func(ctx context.Context) error {
			_, err := s.Sweep(ctx, &store.SweepParams{Now: now, Limit: 10, CompletedRetention: day, DeadRetention: day})
			return err
		}},
		{"ListQueues", func(ctx context.Context) error {
			_, err := s.ListQueues(ctx, &store.ListQueuesParams{Now: now})
			return err
		}},
		{"SetQueuePaused", func(ctx context.Context) error {
			return s.SetQueuePaused(ctx, &store.SetQueuePausedParams{Queue: "q", Paused: false})
		}},
		{"ClaimEffect", func(ctx context.Context) error {
			_, err := s.ClaimEffect(ctx, &store.ClaimEffectParams{Scope: "s", Key: "k2", TTL: day, Lease: lease, Now: now})
			return err
		}},
		{"CompleteEffect", func(ctx context.Context) error {
			_, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Token: effect, Now: now})
			return err
		}},
		{"Ping", func(ctx context.Context) error { return s.Ping(ctx) }},
	}
}

// held enqueues a keyed job, reserves it and claims an effect: the state
// the outage cases cut the database under.
func held(t *testing.T, s store.Store) (store.JobID, store.LeaseToken, store.LeaseToken) {
	t.Helper()
	res := enqueueOne(t, s, t0, job("q", "k"))
	r := reserve(t, s, t0, 1, "q")
	if len(r) != 1 || r[0].Job.ID != res.JobID {
		t.Fatalf("reserve: %d jobs, want the enqueued one", len(r))
	}
	c, err := s.ClaimEffect(context.Background(), &store.ClaimEffectParams{Scope: "s", Key: "k", TTL: day, Lease: lease, Now: t0})
	if err != nil || c.State != store.EffectAcquired {
		t.Fatalf("ClaimEffect: %+v, %v", c, err)
	}
	return res.JobID, r[0].LeaseToken, c.Token
}

// recovered waits until the store answers again, without reopening it:
// every call that fails in the meantime must fail with ErrUnavailable.
func recovered(t *testing.T, s store.Store) {
	t.Helper()
	deadline := time.Now().Add(outageWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), outageWait)
		err := s.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		checkUnavailable(t, "Ping while the database comes back", err)
		if t.Failed() {
			t.FailNow()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not work again within %v of the database coming back: %v", outageWait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// worksAfter checks that the store kept its data across the outage and
// that the job and the effect held before it can be finished.
func worksAfter(t *testing.T, s store.Store, id store.JobID, token, effect store.LeaseToken) {
	t.Helper()
	ctx := context.Background()
	now := t0.Add(2 * time.Second)
	if j := getJob(t, s, id); j.State != store.JobStateReserved {
		t.Fatalf("the job held across the outage: %+v", j)
	}
	if err := complete(s, id, token, []byte("ok"), now); err != nil {
		t.Fatalf("Complete after the outage: %v", err)
	}
	if r := enqueueOne(t, s, now, job("q", "k")); !r.Deduplicated || r.JobID != id {
		t.Fatalf("enqueue of the same key after the outage: %+v, want a hit on the job", r)
	}
	if _, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Token: effect, Result: []byte("r"), Now: now}); err != nil {
		t.Fatalf("CompleteEffect after the outage: %v", err)
	}
	enqueueOne(t, s, now, job("after", ""))
	if got := reserve(t, s, now, 1, "after"); len(got) != 1 {
		t.Fatalf("reserve after the outage: %d jobs, want 1", len(got))
	}
}

// testCallsDuringOutage: with the database down, every call fails with
// ErrUnavailable (none hangs, none reports another error the caller would
// take as final); once it is up, the same store works.
func testCallsDuringOutage(t *testing.T, s store.Store, db Database) {
	id, token, effect := held(t, s)
	db.Down(t)
	for _, c := range outageCalls(s, id, token, effect) {
		ctx, cancel := context.WithTimeout(context.Background(), outageWait)
		err := c.do(ctx)
		if ctx.Err() != nil {
			t.Errorf("%s with the database down blocked until its context ended (%v): %v", c.name, outageWait, err)
		} else {
			checkUnavailable(t, c.name+" with the database down", err)
		}
		cancel()
	}
	db.Up(t)
	recovered(t, s)
	worksAfter(t, s, id, token, effect)
}

// testConnectionsKilled: the database ends the store's connections (a
// restart, an operator's pg_terminate_backend); the next calls either work
// on a new connection or fail with ErrUnavailable, and the store works
// again without being reopened.
func testConnectionsKilled(t *testing.T, s store.Store, db Database) {
	id, token, effect := held(t, s)
	unavailable := 0
	for round := range 3 {
		db.Kill(t)
		// At once, before the pool's idle check would notice: the calls
		// meet the connections the database ended.
		for _, c := range outageCalls(s, id, token, effect) {
			if c.name == "Complete" || c.name == "Fail" || c.name == "CompleteEffect" {
				continue // they would finish what worksAfter finishes
			}
			ctx, cancel := context.WithTimeout(context.Background(), outageWait)
			err := c.do(ctx)
			cancel()
			if err != nil && !errors.Is(err, store.ErrLeaseLost) {
				checkUnavailable(t, c.name+" after the connections were ended", err)
				unavailable++
			}
		}
		if t.Failed() {
			t.Fatalf("round %d: calls on ended connections failed with other errors than ErrUnavailable", round)
		}
		recovered(t, s)
	}
	t.Logf("%d calls met an ended connection and reported ErrUnavailable", unavailable)
	worksAfter(t, s, id, token, effect)
}
