package server

import (
	"context"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

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

// Sweep deletes every expired dedup record, every job past its retention and
// every completed effect past its TTL, and releases expired leases, in calls
// of at most sweepBatch rows of each kind, until a call finds less than a
// full batch of every kind. It returns the totals.
func (s *Server) Sweep(ctx context.Context) (store.SweepResult, error) {
	var total store.SweepResult
	for {
		res, err := s.store.Sweep(ctx, &store.SweepParams{
			Now:                s.now(),
			Limit:              s.sweepBatch,
			CompletedRetention: s.cfg.Storage.CompletedRetention(),
			DeadRetention:      s.cfg.Storage.DeadRetention(),
		})
		if err != nil {
			return total, err
		}
		total.DedupRecords += res.DedupRecords
		total.Jobs += res.Jobs
		total.Effects += res.Effects
		total.LeasesExpired += res.LeasesExpired
		s.metrics.sweepDeleted.WithLabelValues("dedup_record").Add(float64(res.DedupRecords))
		s.metrics.sweepDeleted.WithLabelValues("job").Add(float64(res.Jobs))
		s.metrics.sweepDeleted.WithLabelValues("effect").Add(float64(res.Effects))
		s.metrics.leaseExpired.Add(float64(res.LeasesExpired))
		if res.LeasesExpired > 0 {
			// Their jobs are deliverable again, on queues the result does
			// not name.
			s.wake.NotifyPrefix("")
		}
		if max(res.DedupRecords, res.Jobs, res.Effects) < s.sweepBatch {
			if total.DedupRecords+total.Jobs+total.Effects > 0 {
				s.log.Info("sweep", "dedup_records_deleted", total.DedupRecords, "jobs_deleted", total.Jobs,
					"effects_deleted", total.Effects)
			}
			return total, nil
		}
	}
}
