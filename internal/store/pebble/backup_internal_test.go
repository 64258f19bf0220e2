package pebble

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// BenchmarkBackup measures what a backup of a store holding 100,000 keyed
// jobs (128-byte payloads, enqueued in batches of 500, all still in the
// write-ahead log and the memtable) costs: held-ms is how long the writer is
// held for the checkpoint, so how long writes wait (checkpoint); backup-ms
// is the whole Backup, the read-only open that counts the copy and the
// SHA-256 of every file included. Results: docs/benchmarks.md.
func BenchmarkBackup(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Path: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for batch := range 200 {
		jobs := make([]store.EnqueueJob, 500)
		for i := range jobs {
			k := "k" + strconv.Itoa(batch*500+i)
			jobs[i] = store.EnqueueJob{Queue: "q", JobType: "t", IdempotencyKey: &k, MaxAttempts: 3, DedupWindow: time.Hour, Payload: make([]byte, 128)}
		}
		if _, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: jobs, Now: now}); err != nil {
			b.Fatal(err)
		}
	}
	var held, whole time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		if _, err := s.checkpoint(s.BackupRoot() + "/held-" + strconv.Itoa(n)); err != nil {
			b.Fatal(err)
		}
		held += time.Since(start)
		start = time.Now()
		if _, err := s.Backup(ctx, &store.BackupParams{ID: "b" + strconv.Itoa(n), Now: now}); err != nil {
			b.Fatal(err)
		}
		whole += time.Since(start)
		n++
	}
	b.ReportMetric(float64(held.Microseconds())/1000/float64(n), "held-ms")
	b.ReportMetric(float64(whole.Microseconds())/1000/float64(n), "backup-ms")
}
