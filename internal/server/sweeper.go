package server

import (
	"context"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// sweepBatch bounds the rows one Sweep call deletes of each kind, so the
// sweeper never holds the writer for long.
const sweepBatch = 1000

// sweepLoop runs Sweep every sweep_interval_ms until Shutdown.
func (s *Server) sweepLoop() {
	t := time.NewTicker(s.cfg.Storage.SweepInterval())
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-s.stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("sweep failed; will retry at the next interval", "err", err)
			}
			cancel()
		}
	}
}

// Sweep deletes every expired dedup record and every job past its retention,
// in batches of sweepBatch, and returns the totals.
func (s *Server) Sweep(ctx context.Context) (store.SweepResult, error) {
	var total store.SweepResult
	for {
		res, err := s.store.Sweep(ctx, &store.SweepParams{
			Now:                s.now(),
			Limit:              sweepBatch,
			CompletedRetention: s.cfg.Storage.CompletedRetention(),
			DeadRetention:      s.cfg.Storage.DeadRetention(),
		})
		if err != nil {
			return total, err
		}
		total.DedupRecords += res.DedupRecords
		total.Jobs += res.Jobs
		s.metrics.sweepDeleted.WithLabelValues("dedup_record").Add(float64(res.DedupRecords))
		s.metrics.sweepDeleted.WithLabelValues("job").Add(float64(res.Jobs))
		s.metrics.leaseExpired.Add(float64(res.LeasesExpired))
		total.LeasesExpired += res.LeasesExpired
		if res.DedupRecords < sweepBatch && res.Jobs < sweepBatch {
			if total.DedupRecords+total.Jobs > 0 {
				s.log.Info("sweep", "dedup_records_deleted", total.DedupRecords, "jobs_deleted", total.Jobs)
			}
			return total, nil
		}
	}
}
