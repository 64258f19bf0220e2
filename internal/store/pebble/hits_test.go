package pebble_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

func hitJob(key string) store.EnqueueJob {
	return store.EnqueueJob{Queue: "q", JobType: "t", Payload: []byte("p"), IdempotencyKey: &key, MaxAttempts: 3, DedupWindow: time.Hour}
}

func lookupHits(t *testing.T, s store.Store, key string) int64 {
	t.Helper()
	l, err := s.LookupDedup(context.Background(), &store.LookupDedupParams{Queue: "q", Key: key, Now: recT0})
	if err != nil {
		t.Errorf("LookupDedup %s: %v", key, err)
		return -1
	}
	return l.Record.Hits
}

// TestHitCounts: dedup hits are answered without a commit of their own,
// and their counts go to the writer afterwards. A lookup counts every hit
// answered before it, at once and exactly once (never both committed and
// pending, nor neither: concurrent lookups see a count that never goes
// down), and the counts are on disk after Close.
func TestHitCounts(t *testing.T) {
	dir := t.TempDir()
	s, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Now: recT0, Jobs: []store.EnqueueJob{hitJob("k")}})
	if err != nil || first[0].Deduplicated {
		t.Fatalf("first enqueue: %+v %v", first, err)
	}
	for i := range 5 {
		res, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Now: recT0, Jobs: []store.EnqueueJob{hitJob("k")}})
		if err != nil || !res[0].Deduplicated || res[0].JobID != first[0].JobID {
			t.Fatalf("hit %d: %+v %v", i, res, err)
		}
		if got := lookupHits(t, s, "k"); got != int64(i+1) {
			t.Fatalf("after %d hits a lookup counts %d", i+1, got)
		}
	}

	const producers, each = 8, 50
	var wg sync.WaitGroup
	stop := make(chan struct{})
	looked := make(chan error, 1)
	go func() {
		last := int64(0)
		for {
			select {
			case <-stop:
				looked <- nil
				return
			default:
			}
			got := lookupHits(t, s, "k")
			if got < last || got > 5+producers*each {
				t.Errorf("a lookup counted %d hits after one counted %d (at most %d were made)", got, last, 5+producers*each)
			}
			last = got
		}
	}()
	for range producers {
		wg.Go(func() {
			for range each {
				if _, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Now: recT0, Jobs: []store.EnqueueJob{hitJob("k")}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-looked
	want := int64(5 + producers*each)
	if got := lookupHits(t, s, "k"); got != want {
		t.Fatalf("after every hit returned a lookup counts %d, want %d", got, want)
	}
	// A batch that mixes a hit with a new key goes through the writer.
	res, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Now: recT0, Jobs: []store.EnqueueJob{hitJob("k"), hitJob("new")}})
	if err != nil || !res[0].Deduplicated || res[1].Deduplicated {
		t.Fatalf("mixed batch: %+v %v", res, err)
	}
	want++
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := lookupHits(t, s, "k"); got != want {
		t.Fatalf("after Close and Open the record counts %d hits, want %d", got, want)
	}
}
