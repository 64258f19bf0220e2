package sweep_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/clock/clocktest"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
	"github.com/sepp-dev/sepp/internal/sweep"
)

func open(t *testing.T) store.Store {
	t.Helper()
	st, err := pebble.Open(context.Background(), pebble.Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestSweepBatches: a backlog larger than one batch is deleted by repeated
// store calls within one Sweep, each observed; an expired lease is released
// and announced.
func TestSweepBatches(t *testing.T) {
	st := open(t)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Microsecond)
	jobs := make([]store.EnqueueJob, 25)
	for i := range jobs {
		k := fmt.Sprintf("k-%d", i)
		jobs[i] = store.EnqueueJob{Queue: "q", JobType: "t", IdempotencyKey: &k, MaxAttempts: 3, DedupWindow: time.Minute}
	}
	if _, err := st.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: jobs, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, &store.ReserveParams{Queues: []string{"q"}, WorkerID: "w", Max: 1, Lease: time.Second, Now: t0}); err != nil {
		t.Fatal(err)
	}

	now := t0.Add(2 * time.Minute) // past every window and the lease
	var calls, released atomic.Int64
	w := sweep.New(sweep.Options{
		Store: st, Now: func() time.Time { return now }, Interval: time.Hour, Batch: 10,
		CompletedRetention: time.Hour, DeadRetention: time.Hour,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observe:        func(store.SweepResult) { calls.Add(1) },
		LeasesReleased: func() { released.Add(1) },
	})
	res, err := w.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.DedupRecords != 25 || res.LeasesExpired != 1 {
		t.Fatalf("sweep: %+v, want 25 dedup records and 1 lease", res)
	}
	if calls.Load() < 3 {
		t.Fatalf("%d store calls for 25 records in batches of 10, want at least 3", calls.Load())
	}
	if released.Load() == 0 {
		t.Fatal("the released lease was not announced")
	}
	if res, err := w.Sweep(ctx); err != nil || res != (store.SweepResult{}) {
		t.Fatalf("second sweep: %+v %v, want nothing left", res, err)
	}
}

// TestRunStops: Run sweeps at its interval, on its Local clock, and
// returns once stop closes.
func TestRunStops(t *testing.T) {
	st := open(t)
	f := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	swept := make(chan struct{}, 10)
	w := sweep.New(sweep.Options{
		Store: st, Now: f.Now, Local: f, Interval: time.Minute,
		CompletedRetention: time.Hour, DeadRetention: time.Hour,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observe: func(store.SweepResult) { swept <- struct{}{} },
	})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { w.Run(stop); close(done) }()
	for i := range 2 {
		f.BlockUntil(t, 1)
		f.Advance(time.Minute - time.Nanosecond)
		f.BlockUntil(t, 1)
		if len(swept) != 0 {
			t.Fatalf("sweep %d before its interval", i+1)
		}
		f.Advance(time.Nanosecond)
		select {
		case <-swept:
		case <-time.After(clocktest.HangGuard):
			t.Fatalf("no sweep %d at its interval", i+1)
		}
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(clocktest.HangGuard):
		t.Fatal("Run did not return after stop closed")
	}
}
