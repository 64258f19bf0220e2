package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

func sweepAt(t *testing.T, s store.Store, now time.Time) *store.SweepResult {
	t.Helper()
	res, err := s.Sweep(context.Background(), &store.SweepParams{Now: now, Limit: 100, CompletedRetention: day, DeadRetention: day})
	if err != nil {
		t.Fatalf("Sweep at %v: %v", now, err)
	}
	return res
}

// testSweepHorizon: an enqueue decided late, after a sweep whose Now is past
// its own (a request that waited on a slow database or a busy writer), is
// never a second job inside the first one's window. A sweep deletes a record
// only DedupSweepGrace after its expiry, so such an enqueue still finds it;
// one that is older still (its Now at or before the horizon the sweep
// raised) fails whole with ErrUnavailable and creates nothing.
func testSweepHorizon(t *testing.T, s store.Store) {
	ctx := context.Background()
	j := job("q", "k")
	j.DedupWindow = 10 * time.Second
	first := enqueueOne(t, s, t0, j)

	// (1) The sweep runs with a later clock than the enqueue that reaches
	// the store after it: the record is kept, and the enqueue is a hit.
	if res := sweepAt(t, s, t0.Add(11*time.Second)); res.DedupRecords != 0 {
		t.Fatalf("sweep one second after the expiry deleted %d records, want 0 (kept for DedupSweepGrace)", res.DedupRecords)
	}
	if r := enqueueOne(t, s, t0.Add(9*time.Second), j); !r.Deduplicated || r.JobID != first.JobID {
		t.Fatalf("enqueue at t0+9s after a sweep at t0+11s: %+v, want a hit on %x", r, first.JobID)
	}

	// (2) Past the grace the record is deleted; an enqueue from inside its
	// window now fails whole and creates nothing.
	swept := t0.Add(10*time.Second + storerule.DedupSweepGrace + time.Second)
	if res := sweepAt(t, s, swept); res.DedupRecords != 1 {
		t.Fatalf("sweep past the expiry and the grace deleted %d records, want 1", res.DedupRecords)
	}
	stale := func(what string, atomic bool, jobs ...store.EnqueueJob) {
		t.Helper()
		res, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: jobs, Now: t0.Add(9 * time.Second), Atomic: atomic})
		if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, store.ErrStaleEnqueue) {
			t.Fatalf("%s: %+v, %v; want ErrStaleEnqueue, which is ErrUnavailable", what, res, err)
		}
	}
	stale("a keyed enqueue older than the sweep's horizon", false, j)
	other := job("q", "other")
	stale("an atomic batch with one stale keyed item", true, other, j)
	stale("a non-atomic batch with one stale keyed item", false, other, j)
	stale("an unkeyed job under a rule", false, ruled("q", "", `["acc-1"]`))
	for _, k := range []string{"k", "other"} {
		if l, err := lookup(t, s, t0.Add(9*time.Second), "q", k); !errors.Is(err, store.ErrDedupNotFound) {
			t.Fatalf("a refused enqueue wrote the record of %q: %+v %v", k, l, err)
		}
	}
	qs, err := s.ListQueues(ctx, &store.ListQueuesParams{Now: swept})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if n := q.Counts[store.JobStateAvailable]; q.Name == "q" && n != 1 {
			t.Fatalf("queue q holds %d available jobs, want 1: a refused enqueue created a job", n)
		}
	}
	// An unkeyed job reads no record: the horizon does not concern it.
	if r := enqueueOne(t, s, t0.Add(9*time.Second), job("q", "")); r.Deduplicated {
		t.Fatalf("unkeyed enqueue: %+v", r)
	}

	// (3) A request from after the horizon creates a new job.
	r := enqueueOne(t, s, t0.Add(10*time.Second+storerule.DedupSweepGrace+2*time.Second), j)
	if r.Deduplicated || r.JobID == first.JobID {
		t.Fatalf("enqueue after the horizon: %+v, want a new job", r)
	}
}
