package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

func recentKey(queue, key string) storerule.Key { return storerule.Key{Queue: queue, Key: key} }

// A retry answered from the cache of recent records never outlives the
// record: after a release, by the API or by the job's completion, the next
// enqueue of the key creates a new job.
func TestRecentRecordsFollowReleases(t *testing.T) {
	s, err := Open(context.Background(), Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	enqueue := func(key string) store.EnqueueResult {
		t.Helper()
		res, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Now: time.Now(), Jobs: []store.EnqueueJob{{
			Queue: "q", JobType: "t", IdempotencyKey: &key, DedupWindow: time.Hour, MaxAttempts: 1,
			ReleaseKeyOn: store.ReleaseOnCompleted}}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	first := enqueue("a")
	if hit := enqueue("a"); !hit.Deduplicated || hit.JobID != first.JobID {
		t.Fatalf("retry: %+v, want a hit on %v", hit, first.JobID)
	}
	if _, ok := s.recent.get(recentKey("q", "a")); !ok {
		t.Fatal("the record just written is not among the recent ones")
	}
	if _, err := s.ReleaseDedup(ctx, &store.ReleaseDedupParams{Queue: "q", Key: "a", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	second := enqueue("a")
	if second.Deduplicated || second.JobID == first.JobID {
		t.Fatalf("enqueue after release: %+v, want a new job", second)
	}
	// The second job completes, and its queue releases keys on completion.
	got, err := s.Reserve(ctx, &store.ReserveParams{Queues: []string{"q"}, WorkerID: "w", Max: 10, Lease: time.Minute, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var done []store.CompletedJob
	for _, r := range got {
		done = append(done, store.CompletedJob{ID: r.Job.ID, LeaseToken: r.LeaseToken})
	}
	if _, err := s.Complete(ctx, &store.CompleteParams{Jobs: done, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	third := enqueue("a")
	if third.Deduplicated || third.JobID == second.JobID {
		t.Fatalf("enqueue after the job completed and released its key: %+v, want a new job", third)
	}
	if hit := enqueue("a"); !hit.Deduplicated || hit.JobID != third.JobID {
		t.Fatalf("retry of the third: %+v, want a hit on %v", hit, third.JobID)
	}
}
