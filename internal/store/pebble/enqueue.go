package pebble

import (
	"context"
	"errors"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// enqueueOp is one EnqueueBatch call as the writer sees it.
type enqueueOp struct {
	atomic  bool
	now     int64
	jobs    []storerule.Job
	results []store.EnqueueResult
}

// EnqueueBatch implements store.Store.
func (s *Store) EnqueueBatch(ctx context.Context, p *store.EnqueueBatchParams) ([]store.EnqueueResult, error) {
	now := p.Now.UnixMicro()
	jobs, err := storerule.PrepareBatch(p.Jobs, now)
	if err != nil {
		return nil, err
	}
	op := &enqueueOp{atomic: p.Atomic, now: now, jobs: jobs}
	if hit, err := s.enqueueHits(ctx, op); err != nil || hit {
		if err != nil {
			return nil, err
		}
		return op.results, nil
	}
	op.results = make([]store.EnqueueResult, len(jobs))
	if err := s.submitOp(ctx, &writeOp{enqueue: op, done: make(chan struct{})}); err != nil {
		storerule.NameBatchOriginal(err, jobs)
		return nil, err
	}
	return op.results, nil
}

// replaceHits gives each original job that a hit of op replaces (a queue
// with on_duplicate = "replace" or "debounce") the request's payload,
// headers, priority and run-at, while it still waits (storerule.Replacement):
// a job stored before this group, or one an earlier enqueue of the group
// created. The record takes the request's fingerprint.
func (s *Store) replaceHits(t *tx, g *storerule.Group, op *enqueueOp) error {
	for i := range op.jobs {
		j, res := &op.jobs[i], &op.results[i]
		if !j.Replace || res.Err != nil || !res.Deduplicated {
			continue
		}
		e := g.Records[storerule.Key{Queue: j.Queue, Key: j.Key}]
		if e == nil {
			continue
		}
		if e.Created { // created by this group: not written yet
			for _, n := range g.New {
				if n.ID != e.JobID {
					continue
				}
				runAt, st, ok := storerule.Replacement(j, &e.Record, n.State, n.RunAt, op.now)
				if ok {
					n.Payload, n.Headers, n.Priority, n.RunAt, n.State = j.Payload, j.Headers, j.Priority, runAt, st
					e.Fingerprint = j.Fingerprint
					res.Replaced, res.RunAt = true, storerule.FromMicros(runAt)
				}
				break
			}
			continue
		}
		r, err := getJob(t.b, e.JobID)
		if errors.Is(err, store.ErrJobNotFound) {
			continue // deleted by retention: nothing waits
		}
		if err != nil {
			return err
		}
		runAt, st, ok := storerule.Replacement(j, &e.Record, storerule.VisibleState(r.State, r.RunAt, op.now), r.RunAt, op.now)
		if !ok {
			continue
		}
		if err := t.unindex(r); err != nil {
			return err
		}
		r.Payload, r.Headers, r.Priority, r.RunAt, r.State = j.Payload, j.Headers, j.Priority, runAt, st
		if err := t.putJob(r); err != nil {
			return err
		}
		if err := t.index(r, op.now); err != nil {
			return err
		}
		e.Fingerprint = j.Fingerprint
		res.Replaced, res.RunAt = true, storerule.FromMicros(runAt)
	}
	return nil
}

// applyEnqueues decides every job of the given enqueue ops against the
// stored dedup records and each other, in submission order
// (storerule.Group), then writes the new jobs, their index entries and the
// records. An atomic op that fails contributes nothing, and neither does an
// op older than the dedup horizon (storerule.Stale): a sweep this writer
// applied before it may have deleted a record it would have found.
func (s *Store) applyEnqueues(t *tx, ops []*writeOp) error {
	g := storerule.NewGroup()
	stored := map[storerule.Key]*dedupRecord{}
	seen := map[storerule.Key]bool{}
	var err error
	for _, wop := range ops {
		storerule.Keys(wop.enqueue.jobs, seen, func(k storerule.Key) {
			if err != nil {
				return
			}
			if !s.filter.Load().mayContain(dedupName(k.Queue, k.Key)) {
				return // certainly new: no record to read
			}
			var d *dedupRecord
			if d, err = getDedup(t.b, k.Queue, k.Key); err == nil && d != nil {
				stored[k] = d
				g.Records[k] = &storerule.Entry{Record: d.Record, Stored: true}
			}
		})
		if err != nil {
			return err
		}
	}
	for _, wop := range ops {
		op := wop.enqueue
		if storerule.ReadsRecords(op.jobs) {
			if err := storerule.Stale(op.now, t.horizon); err != nil {
				wop.err = err
				continue
			}
		}
		if err := g.Decide(op.atomic, op.now, op.jobs, op.results); err != nil {
			wop.err = err
		}
	}
	for _, wop := range ops {
		if wop.err == nil {
			if err := s.replaceHits(t, g, wop.enqueue); err != nil {
				return err
			}
		}
	}
	for _, j := range g.New {
		r := &record{Job: store.Job{ID: j.ID, Queue: j.Queue, JobType: j.JobType, Payload: j.Payload,
			Priority: j.Priority, MaxAttempts: j.MaxAttempts, State: j.State},
			Headers: j.Headers, RunAt: j.RunAt, CreatedAt: j.CreatedAt, ReleaseKeyOn: j.ReleaseKeyOn}
		if j.Keyed {
			key := j.Key
			r.IdempotencyKey = &key
		}
		if err := t.putJob(r); err != nil {
			return err
		}
		if err := t.index(r, j.CreatedAt); err != nil {
			return err
		}
	}
	for _, k := range g.Replaced {
		if old := stored[k]; old != nil {
			if err := t.del(dedupExpKey(old.ExpiresAt, k.Queue, k.Key)); err != nil {
				return err
			}
		}
	}
	for _, k := range g.Created {
		e := g.Records[k]
		d := dedupRecord{Record: e.Record, Hits: e.Hits}
		// Into the filter before the record is written: a filter may hold a
		// name that is not stored (a batch that failed), never the reverse.
		s.filter.Load().add(dedupName(k.Queue, k.Key))
		t.created = append(t.created, k)
		if err := t.putDedup(k, &d); err != nil {
			return err
		}
		if err := t.setIndex([]byte{kindDedupExp}, dedupExpKey(e.ExpiresAt, k.Queue, k.Key), nil); err != nil {
			return err
		}
	}
	for k, e := range g.Records {
		if e.Created || e.Hits == 0 {
			continue
		}
		d := dedupRecord{Record: e.Record, Hits: stored[k].Hits + e.Hits}
		if err := t.putDedup(k, &d); err != nil {
			return err
		}
	}
	return nil
}
