package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

func replacing(key, payload string, priority int32) store.EnqueueJob {
	j := job("digest", key)
	j.Payload, j.Priority, j.Replace = []byte(payload), priority, true
	j.Headers = map[string]string{"v": payload}
	return j
}

// testReplaceWaitingJob: a hit on a queue that replaces gives the original,
// while it waits, the request's payload, headers, priority and run-at, and
// says so; the record takes the new fingerprint (the same payload again is
// no mismatch); once the original is reserved a hit returns it unchanged.
func testReplaceWaitingJob(t *testing.T, s store.Store) {
	first := enqueueOne(t, s, t0, replacing("d-1", `{"n":1}`, 0))
	later := replacing("d-1", `{"n":2}`, 5)
	later.RunAt = t0.Add(time.Hour)
	r := enqueueOne(t, s, t0.Add(time.Second), later)
	if !r.Deduplicated || !r.Replaced || r.JobID != first.JobID || !r.RunAt.Equal(t0.Add(time.Hour)) || !r.PayloadMismatch {
		t.Fatalf("replacing hit: %+v", r)
	}
	j := getJob(t, s, first.JobID)
	if !bytes.Equal(j.Payload, []byte(`{"n":2}`)) || j.Priority != 5 || j.Headers["v"] != `{"n":2}` ||
		!j.RunAt.Equal(t0.Add(time.Hour)) || j.State != store.JobStateScheduled {
		t.Fatalf("the original after the replace: %+v", j)
	}
	again := replacing("d-1", `{"n":2}`, 5)
	if r := enqueueOne(t, s, t0.Add(2*time.Second), again); !r.Replaced || r.PayloadMismatch {
		t.Fatalf("the same payload again: %+v, want replaced without a mismatch", r)
	}
	// Reserved: no longer replaced.
	now := t0.Add(time.Hour)
	if got := reserve(t, s, now, 1, "digest"); len(got) != 1 || got[0].Job.ID != first.JobID {
		t.Fatalf("reserve: %+v", got)
	}
	r = enqueueOne(t, s, now.Add(time.Second), replacing("d-1", `{"n":3}`, 0))
	if !r.Deduplicated || r.Replaced || r.JobID != first.JobID {
		t.Fatalf("hit on a reserved original: %+v, want it returned unchanged", r)
	}
	if j := getJob(t, s, first.JobID); !bytes.Equal(j.Payload, []byte(`{"n":2}`)) {
		t.Fatalf("a reserved original was changed: %s", j.Payload)
	}
}

// testReplaceInBatch: a later job of a batch replaces an earlier one of the
// same batch and key.
func testReplaceInBatch(t *testing.T, s store.Store) {
	res := enqueue(t, s, t0, replacing("d-2", `{"n":1}`, 0), replacing("d-2", `{"n":2}`, 0))
	if res[0].Deduplicated || !res[1].Deduplicated || !res[1].Replaced || res[1].JobID != res[0].JobID {
		t.Fatalf("batch: %+v", res)
	}
	if j := getJob(t, s, res[0].JobID); !bytes.Equal(j.Payload, []byte(`{"n":2}`)) {
		t.Fatalf("the job after the batch: %s", j.Payload)
	}
}

// testReplaceTwiceInBatch: jobs of a batch are decided in order, so a
// second replacing hit in one batch is judged against the payload the first
// gave the job: the same payload again is no mismatch.
func testReplaceTwiceInBatch(t *testing.T, s store.Store) {
	first := enqueueOne(t, s, t0, replacing("d-7", `{"n":1}`, 0))
	res := enqueue(t, s, t0.Add(time.Second), replacing("d-7", `{"n":2}`, 0), replacing("d-7", `{"n":2}`, 0))
	for i, r := range res {
		if !r.Replaced || r.JobID != first.JobID || r.PayloadMismatch != (i == 0) {
			t.Fatalf("hit %d: %+v, want replaced, a mismatch only for the first", i, r)
		}
	}
	if j := getJob(t, s, first.JobID); !bytes.Equal(j.Payload, []byte(`{"n":2}`)) {
		t.Fatalf("the job after the batch: %s", j.Payload)
	}
	if l, err := lookup(t, s, t0.Add(time.Second), "digest", "d-7"); err != nil || l.Record.Hits != 2 ||
		l.Record.Fingerprint != store.NewFingerprint("receipt", []byte(`{"n":2}`)) {
		t.Fatalf("the record %+v, %v; want 2 hits and the fingerprint of the new payload", l, err)
	}
}

// testDebounce: each hit on a debouncing queue moves the waiting original's
// run-at to now + the delay, never past its first enqueue + the longest
// wait, and never back; a job due now stays due.
func testDebounce(t *testing.T, s store.Store) {
	deb := func(payload string) store.EnqueueJob {
		j := replacing("d-3", payload, 0)
		j.Debounce, j.DebounceMaxWait = 10*time.Second, 25*time.Second
		return j
	}
	first := enqueueOne(t, s, t0, deb(`{"n":1}`))
	// The first request waits debounce_ms too.
	if j := getJob(t, s, first.JobID); !j.RunAt.Equal(t0.Add(10*time.Second)) || j.State != store.JobStateScheduled {
		t.Fatalf("a new debounced job: %+v, want scheduled at +10s", j)
	}
	if got := reserve(t, s, t0.Add(9*time.Second), 1, "digest"); len(got) != 0 {
		t.Fatalf("a new debounced job was reserved before debounce_ms: %+v", got)
	}
	for i, at := range []time.Duration{5 * time.Second, 12 * time.Second, 20 * time.Second} {
		r := enqueueOne(t, s, t0.Add(at), deb(`{"n":2}`))
		want := t0.Add(min(at+10*time.Second, 25*time.Second))
		if !r.Replaced || !r.RunAt.Equal(want) {
			t.Fatalf("hit %d at +%v: %+v, want run-at %v", i, at, r, want)
		}
		if j := getJob(t, s, first.JobID); !j.RunAt.Equal(want) || j.State != store.JobStateScheduled {
			t.Fatalf("hit %d: job %+v, want scheduled at %v", i, j, want)
		}
	}
	// A request that arrived before the last one but decided after it (its
	// now older than the run-at set) leaves the run-at where it is.
	if r := enqueueOne(t, s, t0.Add(3*time.Second), deb(`{"n":2}`)); !r.Replaced || !r.RunAt.Equal(t0.Add(25*time.Second)) {
		t.Fatalf("a hit with an older now: %+v, want the run-at +25s kept", r)
	}
	if got := reserve(t, s, t0.Add(24*time.Second), 1, "digest"); len(got) != 0 {
		t.Fatalf("reserved before its run-at: %+v", got)
	}
	if got := reserve(t, s, t0.Add(25*time.Second), 1, "digest"); len(got) != 1 || !bytes.Equal(got[0].Job.Payload, []byte(`{"n":2}`)) {
		t.Fatalf("at the longest wait: %+v", got)
	}
}

// testReplaceInAtomicBatch: an atomic batch whose hit replaces a waiting
// job writes the replacement with the rest; one that fails writes neither.
func testReplaceInAtomicBatch(t *testing.T, s store.Store) {
	first := enqueueOne(t, s, t0, replacing("d-4", `{"n":1}`, 0))
	res, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Atomic: true, Now: t0.Add(time.Second),
		Jobs: []store.EnqueueJob{replacing("d-4", `{"n":2}`, 0), replacing("d-5", `{"n":1}`, 0)}})
	if err != nil || !res[0].Replaced || res[0].JobID != first.JobID || res[1].Deduplicated {
		t.Fatalf("atomic batch with a replacing hit: %+v %v", res, err)
	}
	if j := getJob(t, s, first.JobID); !bytes.Equal(j.Payload, []byte(`{"n":2}`)) {
		t.Fatalf("after the atomic batch: %s", j.Payload)
	}
	bad := rejecting("digest", "d-6")
	enqueueOne(t, s, t0.Add(2*time.Second), bad)
	_, err = s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Atomic: true, Now: t0.Add(3 * time.Second),
		Jobs: []store.EnqueueJob{replacing("d-4", `{"n":3}`, 0), bad}})
	var je *store.JobError
	if !errors.As(err, &je) || je.Index != 1 {
		t.Fatalf("failing atomic batch: %v, want a JobError at index 1", err)
	}
	if j := getJob(t, s, first.JobID); !bytes.Equal(j.Payload, []byte(`{"n":2}`)) {
		t.Fatalf("a failed atomic batch replaced the job: %s", j.Payload)
	}
}
