package pebble

import (
	"context"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// ListQueues implements store.Admin. It scans the jobs and the dedup
// records once each: an operator's call, not a hot path.
func (s *Store) ListQueues(ctx context.Context, p *store.ListQueuesParams) ([]store.QueueStats, error) {
	var out []store.QueueStats
	err := s.read(func(db *pebble.DB) (err error) {
		out, err = queueStats(db, p.Now.UnixMicro())
		return err
	})
	return out, err
}

// queueStats counts the jobs and live dedup records of r by queue at now:
// the live database's (ListQueues) or a backup's (backup.go).
func queueStats(db pebble.Reader, now int64) ([]store.QueueStats, error) {
	byName := map[string]*store.QueueStats{}
	stats := func(name string) *store.QueueStats {
		q := byName[name]
		if q == nil {
			q = &store.QueueStats{Name: name, Counts: map[store.JobState]int64{}, Held: map[store.Hold]int64{}}
			byName[name] = q
		}
		return q
	}
	err := func() error {
		if err := scan(db, []byte{kindJob}, func(k, v []byte) error {
			var id store.JobID
			copy(id[:], k[1:])
			r, err := decodeJob(id, v)
			if err != nil {
				return err
			}
			q := stats(r.Queue)
			q.Counts[storerule.VisibleState(r.State, r.RunAt, now, r.waits())]++
			if h := r.hold(); h != store.HoldNone {
				q.Held[h]++
			}
			return nil
		}); err != nil {
			return err
		}
		if err := scan(db, []byte{kindDedup}, func(k, v []byte) error {
			queue, _, ok := splitName(k[1:])
			if !ok {
				return errCorrupt
			}
			d, err := decodeDedup(v)
			if err != nil {
				return err
			}
			if d.Live(now) && !storerule.IsRuleQueue(queue) {
				stats(queue).DedupRecords++
			}
			return nil
		}); err != nil {
			return err
		}
		return scan(db, []byte{kindPaused}, func(k, v []byte) error {
			stats(string(k[1:])).Paused = isPaused(v)
			return nil
		})
	}()
	if err != nil {
		return nil, err
	}
	out := make([]store.QueueStats, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	return out, nil
}

// scan calls fn for every key with prefix, in order, from start (nil: the
// prefix's first key).
func scan(r pebble.Reader, prefix []byte, fn func(k, v []byte) error) error {
	return scanFrom(r, prefix, prefix, fn)
}

func scanFrom(r pebble.Reader, prefix, start []byte, fn func(k, v []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			err = fn(it.Key(), v)
		}
		if err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// errStop ends a scan early without an error.
type errStop struct{}

func (errStop) Error() string { return "stop" }

// ListJobs implements store.Admin: jobs by id, which is enqueue order.
func (s *Store) ListJobs(ctx context.Context, p *store.ListJobsParams) ([]*store.Job, error) {
	now := p.Now.UnixMicro()
	var out []*store.Job
	err := s.read(func(db *pebble.DB) error {
		start := append(jobKey(p.After), 0)
		err := scanFrom(db, []byte{kindJob}, start, func(k, v []byte) error {
			if len(out) >= p.Limit {
				return errStop{}
			}
			var id store.JobID
			copy(id[:], k[1:])
			r, err := decodeJob(id, v)
			if err != nil {
				return err
			}
			if p.Queue != "" && r.Queue != p.Queue {
				return nil
			}
			if p.State != 0 && storerule.VisibleState(r.State, r.RunAt, now, r.waits()) != p.State {
				return nil
			}
			j, err := r.job()
			if err != nil {
				return err
			}
			out = append(out, j)
			return nil
		})
		if _, ok := err.(errStop); ok {
			return nil
		}
		return err
	})
	return out, err
}

// deadJobs calls fn for each dead job p selects, and returns the ids of
// p.IDs that name no dead job (of p.Queue).
func deadJobs(t *tx, p *store.DeadJobsParams, fn func(r *record) error) ([]store.JobID, error) {
	if len(p.IDs) > 0 {
		done := map[store.JobID]bool{}
		for _, id := range p.IDs {
			r, err := getJob(t.b, id)
			if err == store.ErrJobNotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
			if r.State == store.JobStateDead && (p.Queue == "" || r.Queue == p.Queue) {
				if err := fn(r); err != nil {
					return nil, err
				}
				done[id] = true
			}
		}
		return storerule.NotDead(p.IDs, done), nil
	}
	prefix := finalizedPrefix(store.JobStateDead)
	var picked []*record
	err := scan(t.b, prefix, func(k, _ []byte) error {
		var id store.JobID
		copy(id[:], k[len(prefix)+8:])
		r, err := getJob(t.b, id)
		if err != nil {
			return err
		}
		if p.Queue == "" || r.Queue == p.Queue {
			picked = append(picked, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, r := range picked {
		if err := fn(r); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// RequeueDead implements store.Admin.
func (s *Store) RequeueDead(ctx context.Context, p *store.DeadJobsParams) (store.DeadJobsResult, error) {
	now := p.Now.UnixMicro()
	var res store.DeadJobsResult
	err := s.submit(ctx, func(t *tx) (err error) {
		res = store.DeadJobsResult{}
		res.NotDead, err = deadJobs(t, p, func(r *record) error {
			if err := t.unindex(r); err != nil {
				return err
			}
			r.State, r.Attempts, r.RunAt, r.FinalizedAt = store.JobStateAvailable, 0, now, 0
			r.HasToken, r.LeaseExpires, r.WorkerID = false, 0, ""
			if err := t.index(r, now); err != nil {
				return err
			}
			res.N++
			return t.putJob(r)
		})
		return err
	})
	return res, err
}

// PurgeDead implements store.Admin.
func (s *Store) PurgeDead(ctx context.Context, p *store.DeadJobsParams) (store.DeadJobsResult, error) {
	var res store.DeadJobsResult
	err := s.submit(ctx, func(t *tx) (err error) {
		res = store.DeadJobsResult{}
		res.NotDead, err = deadJobs(t, p, func(r *record) error {
			if err := t.unindex(r); err != nil {
				return err
			}
			res.N++
			return t.del(jobKey(r.ID))
		})
		return err
	})
	return res, err
}

// SetQueuePaused implements store.Admin.
func (s *Store) SetQueuePaused(ctx context.Context, p *store.SetQueuePausedParams) error {
	// A resumed queue keeps its key, as SQLite keeps its row: ListQueues
	// lists a queue once paused, even without jobs.
	v := []byte{0}
	if p.Paused {
		v[0] = 1
	}
	return s.submit(ctx, func(t *tx) error { return t.set(pausedKey(p.Queue), v) })
}

func isPaused(v []byte) bool { return len(v) == 1 && v[0] == 1 }
