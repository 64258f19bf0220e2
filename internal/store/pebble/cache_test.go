package pebble

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// The block cache keeps what Reserve reads once the memtable has grown to
// its full size, which Pebble charges to the same cache.
func TestBlockCacheHoldsJobsBesideFullMemtable(t *testing.T) {
	s, err := Open(context.Background(), Options{Path: t.TempDir(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	payload := make([]byte, 256)
	var ids []store.JobID
	for i := 0; len(ids) < 10000; i++ {
		jobs := make([]store.EnqueueJob, 1000)
		for k := range jobs {
			key := fmt.Sprintf("k-%d-%d", i, k)
			jobs[k] = store.EnqueueJob{Queue: "q", JobType: "t", Payload: payload, IdempotencyKey: &key, DedupWindow: time.Hour, MaxAttempts: 1}
		}
		res, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: jobs, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.JobID)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	read := func() {
		for _, id := range ids {
			if _, err := getJob(s.db, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	read()
	before := s.db.Metrics().BlockCache
	read()
	after := s.db.Metrics().BlockCache
	// A compaction finishing meanwhile moves some jobs to a table not read
	// yet: most reads, not all, come from the cache.
	if hits, misses := after.Hits-before.Hits, after.Misses-before.Misses; hits < 10*misses || hits == 0 {
		t.Fatalf("reading %d jobs a second time: %d block cache hits, %d misses; want nearly every block from the cache (cache holds %d bytes)", len(ids), hits, misses, after.Size)
	}
}
