package pebble

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// Dedup hits without a commit. An enqueue whose every job is a hit on a
// stored, live dedup record creates nothing: its answer depends only on
// records that are already committed. Such an enqueue is decided outside
// the writer, by the same rules (storerule.Group), and answered without a
// commit of its own, as Redis answers a task id it already holds. Pebble
// makes a batch visible before its sync returns, so an answer that read a
// record created by a commit whose sync has not returned yet waits for that
// sync (unsynced, awaitSynced); a record that is durable is answered at
// once, however busy the writer. What it changes, the records' hit
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
		if !j.Keyed || j.Replace || j.RunAgain || !f.mayContain(dedupName(j.Queue, j.Key)) {
			return false, nil
		}
	}
	g := storerule.NewGroup()
	err := s.read(func(db *pebble.DB) error {
		var err error
		storerule.Keys(op.jobs, op.now, map[storerule.Key]bool{}, func(k storerule.Key, _ storerule.Record) {
			if err != nil {
				return
			}
			if r, ok := s.recent.get(k); ok {
				g.Records[k] = &storerule.Entry{Record: r, Stored: true}
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
	results := make([]store.EnqueueResult, len(op.jobs))
	// On a copy: a job decided as created is decided again by the writer.
	derr := g.Decide(op.atomic, op.now, slices.Clone(op.jobs), results)
	if len(g.New) > 0 || len(g.Created) > 0 || len(g.Expired) > 0 || len(g.Replaced) > 0 {
		return false, nil
	}
	// The records read were created by commits that have synced, unless
	// unsynced names one: the answer waits for that commit alone, not for
	// whatever else the writer is committing meanwhile.
	if err := s.awaitSynced(ctx, s.unsynced.latest(g.Records)); err != nil {
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
	s.unsynced.synced(n)
	for {
		// Groups are answered concurrently (commitNow): synced only moves
		// forward.
		old := s.synced.Load()
		if old >= n {
			return
		}
		if s.synced.CompareAndSwap(old, n) {
			break
		}
	}
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

// addHits counts n hits on a record as pending and, unless a flush is
// already on its way, schedules one (flushHits): one write per record hit
// since the last flush, not one per hit, and none of it on the path of the
// hit's answer.
func (s *Store) addHits(h pendingHit, n int64) {
	s.pendingMu.Lock()
	s.pending[h] += n
	s.pendingMu.Unlock()
	if s.hitFlushQueued.Swap(true) {
		return // the queued flush takes this count too
	}
	// A little later: a flush is a commit, and a WAL sync, of its own when
	// it finds the writer idle; retries answered without a commit would
	// otherwise queue one flush each.
	time.AfterFunc(hitFlushDelay, s.flushHits)
}

// hitFlushDelay is how long hit counts wait in pending before a flush
// commits them: at most one flush per this long, and a crash loses at most
// the counts of this long (the counts are statistics; every job and record
// a hit answered with is on disk).
const hitFlushDelay = 100 * time.Millisecond

// flushHits hands the writer an operation that commits every count pending
// when it runs.
func (s *Store) flushHits() {
	op := s.hitFlush()
	select {
	case s.ops <- op:
	case <-s.stop:
		s.pendingMu.Lock()
		clear(s.pending) // closed: Close flushed what was pending then
		s.pendingMu.Unlock()
	}
}

// hitFlush is an operation that commits every hit count pending when it
// runs.
func (s *Store) hitFlush() *writeOp {
	op := &writeOp{done: make(chan struct{})}
	op.apply = func(t *tx) error {
		// A hit from now on queues the next flush. That flush joins a later
		// group than this one (the writer forms a group before applying
		// it), so it never adds this one's counts a second time: it takes
		// what is pending after this one's commit settled them.
		s.hitFlushQueued.Store(false)
		s.pendingMu.Lock()
		op.hits = maps.Clone(s.pending)
		s.pendingMu.Unlock()
		for h, n := range op.hits {
			d, err := getDedup(t.b, h.queue, h.key)
			if err != nil {
				return err
			}
			if d == nil || d.JobID != h.job {
				continue // released, swept or replaced since: nothing to count
			}
			d.Hits += n
			if err := t.putDedup(storerule.Key{Queue: h.queue, Key: h.key}, d); err != nil {
				return err
			}
		}
		return nil
	}
	return op
}

// settleHits removes the counts op committed, if any, from pending: they
// were committed or dropped. The caller holds pendingMu.
func (s *Store) settleHits(op *writeOp) {
	for h, n := range op.hits {
		if s.pending[h] -= n; s.pending[h] <= 0 {
			delete(s.pending, h)
		}
	}
	op.hits = nil
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

// unsyncedRecords names the dedup records created by commits whose sync has
// not returned, each with the latest such commit, so that a hit on a record
// waits for the commit that created it and a hit on a durable record does
// not wait at all. A commit notes its records before it makes them visible
// (runGroup); markSynced forgets them once it has synced. A reader that has
// read a record and then finds no commit named here knows the record's
// commit has synced.
type unsyncedRecords struct {
	mu      sync.Mutex
	by      map[storerule.Key]uint64
	commits []unsyncedCommit // oldest first
}

type unsyncedCommit struct {
	commit uint64
	keys   []storerule.Key
}

// add notes the records commit created; commits are added in order.
func (u *unsyncedRecords) add(commit uint64, keys []storerule.Key) {
	if len(keys) == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.by == nil {
		u.by = map[storerule.Key]uint64{}
	}
	for _, k := range keys {
		u.by[k] = commit
	}
	u.commits = append(u.commits, unsyncedCommit{commit, keys})
}

// synced forgets the records of the commits up to n.
func (u *unsyncedRecords) synced(n uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	i := 0
	for ; i < len(u.commits) && u.commits[i].commit <= n; i++ {
		c := u.commits[i]
		for _, k := range c.keys {
			if u.by[k] == c.commit {
				delete(u.by, k)
			}
		}
		u.commits[i] = unsyncedCommit{}
	}
	u.commits = u.commits[i:]
}

// latest is the latest commit not known synced that created one of the
// records read, or 0.
func (u *unsyncedRecords) latest(read map[storerule.Key]*storerule.Entry) uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	var n uint64
	for k := range read {
		n = max(n, u.by[k])
	}
	return n
}
