package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// The storage micro-benchmarks, the same for every backend, so their figures
// compare engines and nothing else. Each reports jobs/s; each call is
// durable on return. A backend's test file wraps them in Benchmark*
// functions: go test -run '^$' -bench . ./internal/store/pebble ./internal/store/postgres

func benchJobs(n int, payload []byte) []store.EnqueueJob {
	jobs := make([]store.EnqueueJob, n)
	for k := range jobs {
		// Random keys: the dedup index's worst case.
		key := fmt.Sprintf("bench-%d-%d", rand.Uint64(), k)
		jobs[k] = store.EnqueueJob{Queue: "bench", JobType: "bench", Payload: payload, IdempotencyKey: &key,
			DedupWindow: time.Hour, MaxAttempts: 25}
	}
	return jobs
}

// BenchmarkEnqueue enqueues batches of size keyed jobs with 256-byte
// payloads from one caller.
func BenchmarkEnqueue(b *testing.B, s store.Store, size int) {
	payload := make([]byte, 256)
	b.ResetTimer()
	for range b.N {
		if _, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Jobs: benchJobs(size, payload), Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEnqueueHits enqueues, from one caller, batches of size keyed
// jobs whose keys are all live: retries, each a hit that creates nothing.
func BenchmarkEnqueueHits(b *testing.B, s store.Store, size int) {
	jobs := benchJobs(size, make([]byte, 256))
	if _, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Jobs: jobs, Now: time.Now()}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Jobs: jobs, Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEnqueueConcurrent enqueues one keyed job per call from producers
// goroutines, as many producers behind one server do: what the store's
// group commit makes of them.
func BenchmarkEnqueueConcurrent(b *testing.B, s store.Store, producers int) {
	payload := make([]byte, 256)
	var wg sync.WaitGroup
	b.ResetTimer()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < b.N; i += producers {
				if _, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Jobs: benchJobs(1, payload), Now: time.Now()}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkReserve measures reserve and complete, 100 jobs a call, on a
// queue that has already processed processed jobs: a store whose reserve
// slows down as taken entries pile up at the head of a queue shows it here.
func BenchmarkReserve(b *testing.B, s store.Store, processed int) {
	ctx := context.Background()
	const batch = 100
	payload := make([]byte, 256)
	now := time.Now()
	enqueueAll := func(n int) {
		for n > 0 {
			k := min(n, 1000)
			jobs := benchJobs(k, payload)
			for i := range jobs {
				jobs[i].IdempotencyKey = nil
			}
			if _, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: jobs, Now: now}); err != nil {
				b.Fatal(err)
			}
			n -= k
		}
	}
	work := func(n int) {
		for n > 0 {
			got, err := s.Reserve(ctx, &store.ReserveParams{Queues: []string{"bench"}, WorkerID: "w", Max: min(n, 1000), Lease: time.Hour, Now: now})
			if err != nil {
				b.Fatal(err)
			}
			if len(got) == 0 {
				b.Fatal("no job to reserve")
			}
			done := make([]store.CompletedJob, len(got))
			for i, r := range got {
				done[i] = store.CompletedJob{ID: r.Job.ID, LeaseToken: r.LeaseToken}
			}
			if _, err := s.Complete(ctx, &store.CompleteParams{Jobs: done, Now: now}); err != nil {
				b.Fatal(err)
			}
			n -= len(got)
		}
	}
	enqueueAll(processed)
	work(processed)
	enqueueAll(b.N * batch)
	b.ResetTimer()
	for range b.N {
		work(batch)
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}
