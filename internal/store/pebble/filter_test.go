package pebble

import (
	"context"
	"fmt"
	"testing"

	"github.com/sepp-dev/sepp/internal/store"
)

func TestKeyFilter(t *testing.T) {
	f := newKeyFilter(0)
	for i := range 100_000 {
		f.add(dedupName("q", fmt.Sprint(i)))
	}
	for i := range 100_000 {
		if !f.mayContain(dedupName("q", fmt.Sprint(i))) {
			t.Fatalf("name %d added but not found: a false negative would make a duplicate job", i)
		}
	}
	fp := 0
	for i := range 100_000 {
		if f.mayContain(dedupName("other", fmt.Sprint(i))) {
			fp++
		}
	}
	// Sized for 1 Mi names at 10 bits each; with a tenth of that in it, false
	// positives are far below 1%.
	if fp > 1000 {
		t.Fatalf("%d false positives in 100000", fp)
	}
	var none *keyFilter
	if !none.mayContain([]byte("x")) {
		t.Fatal("a nil filter must say every name may be there")
	}
}

// TestKeyFilterRebuilt: a filter rebuilt from the stored records still knows
// every live key.
func TestKeyFilterRebuilt(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := func() []store.EnqueueJob {
		jobs := make([]store.EnqueueJob, 100)
		for i := range jobs {
			k := fmt.Sprint("key-", i)
			jobs[i] = store.EnqueueJob{Queue: "q", JobType: "t", IdempotencyKey: &k, DedupWindow: 1e12, MaxAttempts: 1}
		}
		return jobs
	}
	first, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: batch(), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	// On the writer: mark the filter full, so that it is rebuilt after this
	// commit.
	if err := s.submit(ctx, func(*tx) error { s.filter.Load().limit = s.filter.Load().added; return nil }); err != nil {
		t.Fatal(err)
	}
	again, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: batch(), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	for i := range again {
		if !again[i].Deduplicated || again[i].JobID != first[i].JobID {
			t.Fatalf("key %d after the rebuild: %+v, want a hit on %x", i, again[i], first[i].JobID)
		}
	}
}
