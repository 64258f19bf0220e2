package pebble

import (
	"context"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// Dedup hits without a commit. An enqueue whose every job is a hit on a
// stored, live dedup record creates nothing: its answer depends only on
// records that are already committed. Such an enqueue is decided outside
// the writer, by the same rules (storerule.Group), and answered without a
// commit of its own, as Redis answers a task id it already holds. Pebble
// makes a batch visible before its sync returns, so the answer waits until
// the commit the writer was in when the records were read has returned
// (awaitSynced): at most the rest of one sync, never a group of its own. What it changes, the records' hit
// counts, goes to the writer afterwards and is committed with the next
// group; until then a lookup adds it from pending. A crash before that
// commit loses those increments: the hit count is a statistic, and every
// job and record the hit answered with is on disk.

// pendingHit names the record a pending hit count belongs to.
type pendingHit struct {
	queue, key string
	job        store.JobID
}

// enqueueHits decides op outside the writer when every job of it may be a
// hit (each key is keyed and in the filter), by reading the stored records.
// It returns false, having changed nothing, when any job would create or
// replace a record: the writer decides those, and refuses them when they are
// older than the dedup horizon (storerule.Stale). A hit needs no such check,
// whatever op.now: it creates nothing, and answers with records that are
// stored and live at op.now, so no sweep can have deleted what it judged by
// (the writer refuses a stale op even then, as it checks before deciding).
func (s *Store) enqueueHits(ctx context.Context, op *enqueueOp) (bool, error) {
	f := s.filter.Load()
	for i := range op.jobs {
		j := &op.jobs[i]
		if !j.Keyed || j.Replace || !f.mayContain(dedupName(j.Queue, j.Key)) {
			return false, nil
		}
	}
	g := storerule.NewGroup()
	err := s.read(func(db *pebble.DB) error {
		var err error
		storerule.Keys(op.jobs, map[storerule.Key]bool{}, func(k storerule.Key) {
			if err != nil {
				return
			}
			var d *dedupRecord
			if d, err = getDedup(db, k.Queue, k.Key); err == nil && d != nil {
				g.Records[k] = &storerule.Entry{Record: d.Record, Stored: true}
			}
		})
		return err
	})
	if err != nil {
		return false, err
	}
	// What the read saw was published by this commit or an earlier one.
	seen := s.committing.Load()
	results := make([]store.EnqueueResult, len(op.jobs))
	derr := g.Decide(op.atomic, op.now, op.jobs, results)
	if len(g.New) > 0 || len(g.Created) > 0 || len(g.Replaced) > 0 {
		return false, nil
	}
	if err := s.awaitSynced(ctx, seen); err != nil {
		return false, err
	}
	op.results = results
	for k, e := range g.Records {
		if e.Hits > 0 {
			s.addHits(pendingHit{k.Queue, k.Key, e.JobID}, e.Hits)
		}
	}
	return true, derr
}

// markSynced records that commit n has returned (synced, or failed: a
// failed commit leaves the store to fail its callers) and wakes awaitSynced.
func (s *Store) markSynced(n uint64) {
	s.synced.Store(n)
	next := make(chan struct{})
	close(*s.syncedCh.Swap(&next))
}

// awaitSynced returns once commit n has returned: nil when it synced, the
// store's failure when it (or an earlier commit) could not.
func (s *Store) awaitSynced(ctx context.Context, n uint64) error {
	for {
		ch := s.syncedCh.Load()
		if s.synced.Load() >= n {
			return s.failure() // the syncer records a failure before it moves synced
		}
		select {
		case <-*ch:
		case <-s.stopped:
			return store.ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pendingCount is a hit count on its way to the writer.
type pendingCount struct {
	h pendingHit
	n int64
}

// addHits counts n hits on a record as pending and hands the increment to
// the writer, without waiting for its commit.
func (s *Store) addHits(h pendingHit, n int64) {
	s.pendingMu.Lock()
	s.pending[h] += n
	s.pendingMu.Unlock()
	op := &writeOp{done: make(chan struct{}), hits: &pendingCount{h, n}, apply: func(t *tx) error {
		d, err := getDedup(t.b, h.queue, h.key)
		if err != nil || d == nil || d.JobID != h.job {
			return err // released, swept or replaced since: nothing to count
		}
		d.Hits += n
		return t.set(dedupKey(h.queue, h.key), encodeDedup(d))
	}}
	select {
	case s.ops <- op:
	case <-s.stop:
		s.pendingMu.Lock()
		s.settleHits(op) // closing: the count is dropped
		s.pendingMu.Unlock()
	}
}

// settleHits removes op's count, if any, from pending: it was committed or
// dropped. The caller holds pendingMu.
func (s *Store) settleHits(op *writeOp) {
	c := op.hits
	if c == nil {
		return
	}
	op.hits = nil
	if s.pending[c.h] -= c.n; s.pending[c.h] <= 0 {
		delete(s.pending, c.h)
	}
}

// lookupPending runs read, which reads a record, and adds the hits pending
// on it, under pendingMu, so that a count is never both committed and
// pending, nor neither.
func (s *Store) lookupPending(read func() (*pendingHit, error)) (int64, error) {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	h, err := read()
	if err != nil || h == nil {
		return 0, err
	}
	return s.pending[*h], nil
}
