package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/sepp-dev/sepp/internal/store"
)

// testClosedStoreRefusesCalls checks the promise of Store.Close: every call
// after it fails with ErrClosed, reads and writes alike.
func testClosedStoreRefusesCalls(t *testing.T, s store.Store) {
	ctx := context.Background()
	res := enqueueOne(t, s, t0, job("q", "k"))
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping of an open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"EnqueueBatch", func() error {
			_, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: []store.EnqueueJob{job("q", "k2")}, Now: t0})
			return err
		}},
		{"GetJob", func() error { _, err := s.GetJob(ctx, &store.GetJobParams{ID: res.JobID}); return err }},
		{"CancelJob", func() error { _, err := s.CancelJob(ctx, &store.CancelJobParams{ID: res.JobID, Now: t0}); return err }},
		{"LookupDedup", func() error {
			_, err := s.LookupDedup(ctx, &store.LookupDedupParams{Queue: "q", Key: "k", Now: t0})
			return err
		}},
		{"ReleaseDedup", func() error {
			_, err := s.ReleaseDedup(ctx, &store.ReleaseDedupParams{Queue: "q", Key: "k", Now: t0})
			return err
		}},
		{"Sweep", func() error {
			_, err := s.Sweep(ctx, &store.SweepParams{Now: t0, Limit: 10, CompletedRetention: day, DeadRetention: day})
			return err
		}},
		{"Reserve", func() error {
			_, err := s.Reserve(ctx, &store.ReserveParams{Queues: []string{"q"}, WorkerID: "w", Max: 1, Lease: day, Now: t0})
			return err
		}},
		{"Complete", func() error {
			_, err := s.Complete(ctx, &store.CompleteParams{Jobs: []store.CompletedJob{{ID: res.JobID}}, Now: t0})
			return err
		}},
		{"Fail", func() error {
			_, err := s.Fail(ctx, &store.FailParams{ID: res.JobID, Error: "x", RetryAt: at(t0), Now: t0})
			return err
		}},
		{"ExtendLease", func() error {
			_, err := s.ExtendLease(ctx, &store.ExtendLeaseParams{ID: res.JobID, Lease: day, Now: t0})
			return err
		}},
		{"ListQueues", func() error { _, err := s.ListQueues(ctx, &store.ListQueuesParams{Now: t0}); return err }},
		{"StartSchedule", func() error {
			_, err := s.StartSchedule(ctx, &store.StartScheduleParams{Name: "s", Now: t0})
			return err
		}},
		{"GetSchedule", func() error { _, err := s.GetSchedule(ctx, &store.GetScheduleParams{Name: "s"}); return err }},
		{"AdvanceSchedule", func() error {
			_, err := s.AdvanceSchedule(ctx, &store.AdvanceScheduleParams{Name: "s", Tick: t0})
			return err
		}},
		{"ListJobs", func() error { _, err := s.ListJobs(ctx, &store.ListJobsParams{Limit: 10, Now: t0}); return err }},
		{"RequeueDead", func() error { _, err := s.RequeueDead(ctx, &store.DeadJobsParams{Now: t0}); return err }},
		{"PurgeDead", func() error { _, err := s.PurgeDead(ctx, &store.DeadJobsParams{Now: t0}); return err }},
		{"SetQueuePaused", func() error {
			return s.SetQueuePaused(ctx, &store.SetQueuePausedParams{Queue: "q", Paused: true})
		}},
		{"ClaimEffect", func() error {
			_, err := s.ClaimEffect(ctx, &store.ClaimEffectParams{Scope: "s", Key: "k", TTL: day, Lease: day, Now: t0})
			return err
		}},
		{"CompleteEffect", func() error {
			_, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Now: t0})
			return err
		}},
		{"ReleaseEffect", func() error { return s.ReleaseEffect(ctx, &store.ReleaseEffectParams{Now: t0}) }},
		{"ExtendEffectLease", func() error {
			_, err := s.ExtendEffectLease(ctx, &store.ExtendEffectLeaseParams{Lease: day, Now: t0})
			return err
		}},
		{"Ping", func() error { return s.Ping(ctx) }},
		{"GetEffect", func() error {
			_, err := s.GetEffect(ctx, &store.GetEffectParams{Scope: "s", Key: "k", Now: t0})
			return err
		}},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", c.name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v, want nil", err)
	}
}

// testPingOpenStore checks that Ping succeeds on a new, empty store and on
// one that holds data, and after a cancelled context fails.
func testPingOpenStore(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping of an empty store: %v", err)
	}
	enqueueOne(t, s, t0, job("q", "k"))
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping of a store with a job: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Ping(cctx); err == nil {
		t.Errorf("Ping with a cancelled context: nil, want an error")
	}
}
