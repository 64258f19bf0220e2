package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/sepp-dev/sepp/internal/store"
)

func rejecting(queue, key string) store.EnqueueJob {
	j := job(queue, key)
	j.RejectDuplicate = true
	return j
}

// wantDuplicate checks that err is a *store.DuplicateJobError naming the
// original job.
func wantDuplicate(t *testing.T, err error, original store.JobID) {
	t.Helper()
	var de *store.DuplicateJobError
	if !errors.Is(err, store.ErrDuplicateJob) || !errors.As(err, &de) || de.JobID != original || de.ExpiresAt.IsZero() {
		t.Fatalf("got %v, want a DuplicateJobError naming %v", err, original)
	}
}

// testRejectDuplicate: on a queue that rejects duplicates a hit fails with
// the original's id and is not counted; the original is untouched; once the
// record expires the key makes a new job.
func testRejectDuplicate(t *testing.T, s store.Store) {
	first := enqueueOne(t, s, t0, rejecting("payments", "pay-1"))
	res := enqueue(t, s, t0.Add(1), rejecting("payments", "pay-1"))
	wantDuplicate(t, res[0].Err, first.JobID)
	if res[0].Deduplicated || res[0].JobID != (store.JobID{}) {
		t.Fatalf("a rejected enqueue reports %+v", res[0])
	}
	l, err := lookup(t, s, t0.Add(2), "payments", "pay-1")
	if err != nil || l.Record.JobID != first.JobID || l.Record.Hits != 0 {
		t.Fatalf("lookup after a rejected duplicate: %+v %v (want the original, 0 hits)", l, err)
	}
	// The record still decides when the queue's policy is not reject.
	if r := enqueueOne(t, s, t0.Add(3), job("payments", "pay-1")); !r.Deduplicated || r.JobID != first.JobID {
		t.Fatalf("return_original after reject: %+v", r)
	}
	// After the window the key is free again.
	later := enqueueOne(t, s, t0.Add(day+1), rejecting("payments", "pay-1"))
	if later.Deduplicated || later.JobID == first.JobID {
		t.Fatalf("after the window: %+v, want a new job", later)
	}
}

// testRejectDuplicateInBatches: in a non-atomic batch a rejected duplicate
// fails alone, including the same key twice in the batch (the first creates,
// the second is rejected); in an atomic batch it fails the whole batch,
// naming its index, and nothing is written.
func testRejectDuplicateInBatches(t *testing.T, s store.Store) {
	first := enqueueOne(t, s, t0, rejecting("payments", "a"))
	res := enqueue(t, s, t0.Add(1), rejecting("payments", "b"), rejecting("payments", "a"), rejecting("payments", "c"), rejecting("payments", "c"))
	if res[0].Err != nil || res[0].Deduplicated || res[2].Err != nil || res[2].Deduplicated {
		t.Fatalf("new keys in a batch with duplicates: %+v", res)
	}
	wantDuplicate(t, res[1].Err, first.JobID)
	wantDuplicate(t, res[3].Err, res[2].JobID)

	_, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Atomic: true, Now: t0.Add(2),
		Jobs: []store.EnqueueJob{rejecting("payments", "d"), rejecting("payments", "b")}})
	var je *store.JobError
	if !errors.As(err, &je) || je.Index != 1 {
		t.Fatalf("atomic batch with a duplicate: %v, want a JobError at index 1", err)
	}
	wantDuplicate(t, je.Err, res[0].JobID)
	if de := new(store.DuplicateJobError); errors.As(je.Err, &de) && de.InBatch {
		t.Fatalf("a stored original named as an item of the batch: %+v", de)
	}
	if _, err := lookup(t, s, t0.Add(3), "payments", "d"); !errors.Is(err, store.ErrDedupNotFound) {
		t.Fatalf("the failed atomic batch wrote key d: %v", err)
	}
	_, err = s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Atomic: true, Now: t0.Add(4),
		Jobs: []store.EnqueueJob{rejecting("payments", "e"), rejecting("payments", "e")}})
	if !errors.As(err, &je) || je.Index != 1 {
		t.Fatalf("atomic batch with one key twice: %v, want a JobError at index 1", err)
	}
	// The original is item 0, which the failed batch never wrote: the error
	// says so instead of naming its id alone.
	var de *store.DuplicateJobError
	if !errors.As(je.Err, &de) || !de.InBatch || de.Index != 0 {
		t.Fatalf("atomic batch with one key twice: %+v, want the original named as item 0 of the batch", je.Err)
	}
	if _, err := lookup(t, s, t0.Add(5), "payments", "e"); !errors.Is(err, store.ErrDedupNotFound) {
		t.Fatalf("the failed atomic batch wrote key e: %v", err)
	}
}
