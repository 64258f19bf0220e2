package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func enqueueN(t *testing.T, s *Store, now time.Time, n int, priority int32) []store.JobID {
	t.Helper()
	jobs := make([]store.EnqueueJob, n)
	for i := range jobs {
		jobs[i] = store.EnqueueJob{Queue: "q", JobType: "t", MaxAttempts: 3, Priority: priority}
	}
	res, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Jobs: jobs, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]store.JobID, n)
	for i, r := range res {
		ids[i] = r.JobID
	}
	return ids
}

func reserveN(t *testing.T, s *Store, now time.Time, n int) []store.ReservedJob {
	t.Helper()
	got, err := s.Reserve(context.Background(), &store.ReserveParams{Queues: []string{"q"}, WorkerID: "w", Max: n, Lease: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCursorSeesEntriesBeforeIt: once Reserve has moved a queue's cursor
// past the entries it took, entries written before the cursor (a higher
// priority, a job whose lease expired) are still found.
func TestCursorSeesEntriesBeforeIt(t *testing.T) {
	s, err := Open(context.Background(), Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	enqueueN(t, s, t0, 10, 0)
	if got := reserveN(t, s, t0, 5); len(got) != 5 {
		t.Fatalf("reserved %d, want 5", len(got))
	}
	urgent := enqueueN(t, s, t0, 1, 5)[0]
	if got := reserveN(t, s, t0, 1); len(got) != 1 || got[0].Job.ID != urgent {
		t.Fatalf("reserve after a higher-priority enqueue: %+v, want the urgent job", got)
	}
	// The six leases expire and their jobs come back with run-at = now:
	// the urgent one first (its priority), then the five never reserved
	// (earlier run-at), then the rest.
	later := t0.Add(2 * time.Minute)
	got := reserveN(t, s, later, 100)
	if len(got) != 11 {
		t.Fatalf("reserved %d after the leases expired, want 11", len(got))
	}
	for i, r := range got {
		if want := int32(1); i >= 1 && i <= 5 && r.Job.Attempts != want {
			t.Fatalf("job %d: attempt %d; the never-reserved jobs come first", i, r.Job.Attempts)
		}
	}
	if got := reserveN(t, s, later, 100); len(got) != 0 {
		t.Fatalf("reserved %d more, want none", len(got))
	}
}

// TestCursorSurvivesClockGoingBack: entries promoted at a later time are not
// delivered to a reserve whose clock is earlier, and are not lost either.
func TestCursorSurvivesClockGoingBack(t *testing.T) {
	s, err := Open(context.Background(), Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	enqueueN(t, s, t0.Add(time.Hour), 2, 0)
	enqueueN(t, s, t0, 1, 0)
	if got := reserveN(t, s, t0.Add(-time.Second), 10); len(got) != 0 {
		t.Fatalf("reserved %d jobs whose run-at is after now", len(got))
	}
	if got := reserveN(t, s, t0, 10); len(got) != 1 {
		t.Fatalf("reserved %d, want 1", len(got))
	}
	// The two, and the first again: its lease has expired.
	if got := reserveN(t, s, t0.Add(time.Hour), 10); len(got) != 3 {
		t.Fatalf("reserved %d, want 3", len(got))
	}
}
