// Package sweep is the server's sweeper: at every sweep interval it deletes
// the dedup records whose window ended, the finished jobs past their
// retention and the completed effects past their TTL, and releases expired
// leases, in store calls of a bounded size, so that one sweep never holds
// the store's writer for long.
package sweep

import (
	"context"
	"log/slog"
	"time"

	"github.com/sepp-dev/sepp/internal/clock"
	"github.com/sepp-dev/sepp/internal/store"
)

// Options configure a Sweeper. Store, Now, Interval and Logger are required.
type Options struct {
	Store store.Store
	// Now is the server's clock.
	Now func() time.Time
	// Interval is the time between two sweeps (storage.sweep_interval_ms).
	Interval time.Duration
	// Local is the clock Run waits Interval on. Default clock.System; a
	// test passes a clocktest.Fake. (The pauses of Share are real time,
	// for they share the store's real time.)
	Local clock.Local
	// Batch bounds the rows of each kind one store call deletes; a sweep
	// calls again while a call finds a full batch. Zero: 1,000.
	Batch int
	// CompletedRetention and DeadRetention are how long finished jobs are
	// kept (storage.completed_retention_ms, storage.dead_retention_ms).
	CompletedRetention, DeadRetention time.Duration
	Logger                            *slog.Logger
	// Observe, if set, is called with the result of each store call (the
	// server counts it in its metrics).
	Observe func(store.SweepResult)
	// LeasesReleased, if set, is called after a store call released expired
	// leases: their jobs are deliverable again, on queues the result does
	// not name.
	LeasesReleased func()
	// Share bounds the part of the time a long sweep keeps the store busy:
	// after each full batch it pauses for as long as the call took, times
	// (1-Share)/Share, so the writes of producers and workers keep the
	// rest. An expired record is treated as absent whether it is swept yet
	// or not, so a slower sweep changes no answer. Zero: 0.25; 1: no pause.
	Share float64
}

// Sweeper runs the sweeps.
type Sweeper struct{ o Options }

// New returns a Sweeper; it does nothing until Run or Sweep is called.
func New(o Options) *Sweeper {
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.Share <= 0 || o.Share > 1 {
		o.Share = 0.25
	}
	if o.Local == nil {
		o.Local = clock.System
	}
	return &Sweeper{o: o}
}

// Run sweeps every Interval until stop is closed; a sweep in progress when
// stop closes is cancelled. A failed sweep is logged and tried again at the
// next interval.
func (w *Sweeper) Run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := w.o.Local.NewTimer(w.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if _, err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
				w.o.Logger.Warn("sweep failed; will retry at the next interval", "err", err)
			}
			t.Reset(w.o.Interval)
		}
	}
}

// Sweep runs one sweep: store calls of at most Batch rows of each kind,
// until a call finds less than a full batch of every kind. It returns the
// totals.
func (w *Sweeper) Sweep(ctx context.Context) (store.SweepResult, error) {
	var total store.SweepResult
	for {
		start := time.Now()
		res, err := w.o.Store.Sweep(ctx, &store.SweepParams{
			Now:                w.o.Now(),
			Limit:              w.o.Batch,
			CompletedRetention: w.o.CompletedRetention,
			DeadRetention:      w.o.DeadRetention,
		})
		if err != nil {
			return total, err
		}
		total.DedupRecords += res.DedupRecords
		total.Jobs += res.Jobs
		total.Effects += res.Effects
		total.LeasesExpired += res.LeasesExpired
		if w.o.Observe != nil {
			w.o.Observe(*res)
		}
		if res.LeasesExpired > 0 && w.o.LeasesReleased != nil {
			w.o.LeasesReleased()
		}
		if max(res.DedupRecords, res.Jobs, res.Effects) < w.o.Batch {
			if total.DedupRecords+total.Jobs+total.Effects > 0 {
				w.o.Logger.Info("sweep", "dedup_records_deleted", total.DedupRecords, "jobs_deleted", total.Jobs,
					"effects_deleted", total.Effects)
			}
			return total, nil
		}
		if w.o.Share < 1 {
			pause := time.Duration(float64(time.Since(start)) * (1 - w.o.Share) / w.o.Share)
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return total, ctx.Err()
			}
		}
	}
}
