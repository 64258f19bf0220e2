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

// applyEnqueues decides every job of the given enqueue ops against the
// stored dedup records and each other, in submission order
// (storerule.Group), then writes what the group decided: the new jobs and
// their index entries, the records and their expiry entries, the hit
// counts, and the stored jobs that replacing hits changed. An atomic op
// that fails contributes nothing, and neither does an op older than the
// dedup horizon (storerule.Stale): a sweep this writer applied before it
// may have deleted a record it would have found.
func (s *Store) applyEnqueues(t *tx, ops []*writeOp) error {
	g := storerule.NewGroup()
	g.Horizon = t.horizon
	stored, err := s.readRecords(t, g, ops)
	if err != nil {
		return err
	}
	originals, err := readOriginals(t, g, ops)
	if err != nil {
		return err
	}
	for _, wop := range ops {
		op := wop.enqueue
		if err := g.Decide(op.atomic, op.now, op.jobs, op.results); err != nil {
			wop.err = err
		}
	}
	if err := writeJobs(t, g, originals); err != nil {
		return err
	}
	return s.writeRecords(t, g, stored)
}

// readRecords reads into g the stored dedup record of every key of ops
// that the filter does not rule out, and returns them as stored.
func (s *Store) readRecords(t *tx, g *storerule.Group, ops []*writeOp) (map[storerule.Key]*dedupRecord, error) {
	stored := map[storerule.Key]*dedupRecord{}
	seen := map[storerule.Key]bool{}
	filter := s.filter.Load()
	var err error
	for _, wop := range ops {
		storerule.Keys(wop.enqueue.jobs, wop.enqueue.now, seen, func(k storerule.Key, _ storerule.Record) {
			if err != nil || !filter.mayContain(dedupName(k.Queue, k.Key)) {
				return // certainly new: no record to read
			}
			var d *dedupRecord
			if d, err = getDedup(t.b, k.Queue, k.Key); err == nil && d != nil {
				stored[k] = d
				g.Records[k] = &storerule.Entry{Record: d.Record, Slots: d.Slots, Stored: true}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return stored, nil
}

// readOriginals reads the job of every stored record whose hit by ops needs
// it (storerule.Originals: to replace or follow it) into its entry, and
// returns them by id.
func readOriginals(t *tx, g *storerule.Group, ops []*writeOp) (map[store.JobID]*record, error) {
	var originals map[store.JobID]*record
	var err error
	for _, wop := range ops {
		storerule.Originals(wop.enqueue.jobs, func(k storerule.Key) {
			e := g.Records[k]
			if err != nil || e == nil || e.Original != nil {
				return
			}
			var r *record
			if r, err = getJob(t.b, e.JobID); errors.Is(err, store.ErrJobNotFound) {
				err = nil // deleted by retention: nothing waits
				return
			}
			if err == nil {
				if originals == nil {
					originals = map[store.JobID]*record{}
				}
				originals[r.ID] = r
				e.Original = &storerule.Job{ID: r.ID, Queue: r.Queue, State: r.State, RunAt: r.RunAt, Follows: r.FollowsJobID}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return originals, nil
}

// writeJobs writes the jobs g decided: the stored ones that hits replaced,
// then the new ones, each with its index entry (a follow-up has none, and
// its original names it).
func writeJobs(t *tx, g *storerule.Group, originals map[store.JobID]*record) error {
	for _, o := range g.Replaced {
		r := originals[o.ID]
		if err := t.unindex(r); err != nil {
			return err
		}
		r.Payload, r.Headers, r.Priority, r.RunAt, r.State = o.Payload, o.Headers, o.Priority, o.RunAt, o.State
		if err := t.putJob(r); err != nil {
			return err
		}
		// The index its state says: available means due by the clock of
		// the hit that replaced it.
		due := r.RunAt - 1
		if r.State == store.JobStateAvailable {
			due = r.RunAt
		}
		if err := t.index(r, due); err != nil {
			return err
		}
	}
	for _, j := range g.New {
		r := &record{Job: store.Job{ID: j.ID, Queue: j.Queue, JobType: j.JobType, Payload: j.Payload,
			Priority: j.Priority, MaxAttempts: j.MaxAttempts, State: j.State},
			Headers: j.Headers, RunAt: j.RunAt, CreatedAt: j.CreatedAt, ReleaseKeyOn: j.ReleaseKeyOn, Conc: j.Concurrency, Rate: j.Rate}
		if j.Keyed {
			key := j.Key
			r.IdempotencyKey = &key
		}
		if j.Follows != (store.JobID{}) {
			r.FollowsJobID = j.Follows
			o := originals[j.Follows]
			o.Follower = j.ID
			if err := t.putJob(o); err != nil {
				return err
			}
		}
		if err := t.putJob(r); err != nil {
			return err
		}
		if err := t.index(r, j.CreatedAt); err != nil {
			return err
		}
	}
	return nil
}

// writeRecords writes the dedup records g decided: the created ones over
// the expired ones they replace, with their expiry entries, and the hit
// counts and fingerprints of the stored ones it hit.
func (s *Store) writeRecords(t *tx, g *storerule.Group, stored map[storerule.Key]*dedupRecord) error {
	for _, k := range g.Expired {
		if old := stored[k]; old != nil {
			if err := t.del(dedupExpKey(old.ExpiresAt, k.Queue, k.Key)); err != nil {
				return err
			}
		}
	}
	for _, k := range g.Created {
		e := g.Records[k]
		d := dedupRecord{Record: e.Record, Hits: e.Hits, Slots: e.Slots}
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
