package pebble

import (
	"context"
	"errors"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// GetJob implements store.Store.
func (s *Store) GetJob(ctx context.Context, p *store.GetJobParams) (*store.Job, error) {
	var j *store.Job
	err := s.read(func(db *pebble.DB) error {
		r, err := getJob(db, p.ID)
		if err != nil {
			return err
		}
		j, err = r.job()
		return err
	})
	return j, err
}

// CancelJob implements store.Store.
func (s *Store) CancelJob(ctx context.Context, p *store.CancelJobParams) (*store.Job, error) {
	var job *store.Job
	err := s.submit(ctx, func(t *tx) error {
		r, err := getJob(t.b, p.ID)
		if errors.Is(err, store.ErrJobNotFound) {
			return logicalError{err}
		}
		if err != nil {
			return err
		}
		if !r.State.Finalized() {
			if err := t.unindex(r); err != nil {
				return err
			}
			r.State, r.FinalizedAt = store.JobStateCancelled, p.Now.UnixMicro()
			r.HasToken, r.LeaseExpires = false, 0
			if err := t.putJob(r); err != nil {
				return err
			}
			if err := t.finalize(r); err != nil {
				return err
			}
		}
		job, err = r.job()
		return err
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// LookupDedup implements store.Store.
func (s *Store) LookupDedup(ctx context.Context, p *store.LookupDedupParams) (*store.DedupLookup, error) {
	now := p.Now.UnixMicro()
	var l *store.DedupLookup
	err := s.read(func(db *pebble.DB) error {
		var d *dedupRecord
		pending, err := s.lookupPending(func() (*pendingHit, error) {
			var err error
			if d, err = getDedup(db, p.Queue, p.Key); err != nil || d == nil {
				return nil, err
			}
			return &pendingHit{p.Queue, p.Key, d.JobID}, nil
		})
		if err != nil {
			return err
		}
		if d == nil || !d.Live(now) {
			return store.ErrDedupNotFound
		}
		l = &store.DedupLookup{Record: dedupOut(p.Queue, p.Key, d), JobState: store.JobStateDeleted}
		l.Record.Hits += pending
		r, err := getJob(db, d.JobID)
		switch {
		case errors.Is(err, store.ErrJobNotFound):
		case err != nil:
			return err
		default:
			l.JobState = storerule.VisibleState(r.State, r.RunAt, now, r.waits())
			l.Result = r.Result
		}
		return nil
	})
	return l, err
}

func dedupOut(queue, key string, d *dedupRecord) store.DedupRecord {
	return store.DedupRecord{Queue: queue, Key: key, JobID: d.JobID, Fingerprint: d.Fingerprint, Hits: d.Hits,
		FirstEnqueuedAt: storerule.FromMicros(d.FirstEnqueuedAt), ExpiresAt: storerule.FromMicros(d.ExpiresAt)}
}

// ReleaseDedup implements store.Store.
func (s *Store) ReleaseDedup(ctx context.Context, p *store.ReleaseDedupParams) (*store.DedupRecord, error) {
	var rec store.DedupRecord
	err := s.submit(ctx, func(t *tx) error {
		d, err := getDedup(t.b, p.Queue, p.Key)
		if err != nil {
			return err
		}
		if d == nil {
			return logicalError{store.ErrDedupNotFound}
		}
		if err := t.delDedup(storerule.Key{Queue: p.Queue, Key: p.Key}); err != nil {
			return err
		}
		if err := t.del(dedupExpKey(d.ExpiresAt, p.Queue, p.Key)); err != nil {
			return err
		}
		// An expired record is deleted too (the sweeper would have), but it
		// was not live, so it is reported as not found; the deletion is
		// committed with the group all the same.
		if !d.Live(p.Now.UnixMicro()) {
			return logicalError{store.ErrDedupNotFound}
		}
		rec = dedupOut(p.Queue, p.Key, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// Sweep implements store.Store: each kind is walked from the head of its
// index, in bounded batches.
func (s *Store) Sweep(ctx context.Context, p *store.SweepParams) (*store.SweepResult, error) {
	res := &store.SweepResult{}
	now := p.Now.UnixMicro()
	err := s.submit(ctx, func(t *tx) error {
		*res = store.SweepResult{}
		var err error
		if res.DedupRecords, err = sweepDedup(t, now, p.Limit); err != nil {
			return err
		}
		if res.LeasesExpired, err = expireLeases(t, now); err != nil {
			return err
		}
		if res.Effects, err = sweepEffects(t, now, p.Limit); err != nil {
			return err
		}
		budget := p.Limit
		for _, c := range storerule.Retentions(p) {
			if budget == 0 {
				break
			}
			n, err := sweepJobs(t, c, budget)
			if err != nil {
				return err
			}
			budget -= n
			res.Jobs += n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// sweepDedup deletes up to limit dedup records that expired at or before
// the cut of a sweep at now (storerule.SweepCut), after raising the group's
// dedup horizon to the cut: an enqueue the writer applies after this sweep,
// in this group or a later one, then sees the cut.
func sweepDedup(t *tx, now int64, limit int) (int, error) {
	cut := storerule.SweepCut(now)
	t.horizon = max(t.horizon, cut)
	prefix := []byte{kindDedupExp}
	n := 0
	err := t.walk(prefix, upTo(prefix, cut), true, func(k, _ []byte) (bool, error) {
		if n == limit {
			return false, nil
		}
		queue, key, ok := splitName(k[9:])
		if !ok {
			return false, errCorrupt
		}
		d, err := getDedup(t.b, queue, key)
		if err != nil {
			return false, err
		}
		// The expiry entry of a record that was replaced or released is
		// deleted with it; check anyway, and delete only what expired.
		if d != nil && !d.Live(cut) {
			if err := t.delDedup(storerule.Key{Queue: queue, Key: key}); err != nil {
				return false, err
			}
			n++
		}
		if err := t.del(k); err != nil {
			return false, err
		}
		t.taken(prefix, k)
		return true, nil
	})
	return n, err
}

func sweepJobs(t *tx, c storerule.Retention, limit int) (int, error) {
	prefix := finalizedPrefix(c.State)
	n := 0
	err := t.walk(prefix, upTo(prefix, c.Before), true, func(k, _ []byte) (bool, error) {
		if n == limit {
			return false, nil
		}
		var id store.JobID
		copy(id[:], k[len(prefix)+8:])
		if err := t.del(jobKey(id)); err != nil {
			return false, err
		}
		if err := t.del(k); err != nil {
			return false, err
		}
		t.taken(prefix, k)
		n++
		return true, nil
	})
	return n, err
}
