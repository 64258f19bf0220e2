package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// writeOp is one write submitted to the writer goroutine: an enqueue batch
// (enqueue set), which the writer decides together with the other enqueues
// of its group, or any other write (apply set). Both must be re-runnable: if
// an operation of a group fails with a storage error the group's batch is
// dropped and every operation runs again in a batch of its own, so one bad
// operation cannot fail its neighbours.
type writeOp struct {
	apply   func(t *tx) error
	enqueue *enqueueOp
	err     error
	done    chan struct{}
	// hits, if set, are the pending hit counts this operation commits
	// (hits.go); they are settled when its batch commits, or dropped.
	hits map[pendingHit]int64
}

func (op *writeOp) jobs() int {
	if op.enqueue == nil {
		return 0
	}
	return len(op.enqueue.jobs)
}

// logicalError wraps an error an operation decided on before writing
// anything (a lost lease, a missing record). It fails that operation alone
// and leaves the group's batch intact.
type logicalError struct{ err error }

func (e logicalError) Error() string { return e.err.Error() }

func (e logicalError) Unwrap() error { return e.err }

// submit hands an operation to the writer and waits until it is committed
// (synced) or failed. If ctx ends first submit returns ctx.Err(); the
// operation may still be committed after that, which is safe for keyed
// enqueues: the caller retries with the same key.
func (s *Store) submit(ctx context.Context, apply func(t *tx) error) error {
	return s.submitOp(ctx, &writeOp{apply: apply, done: make(chan struct{})})
}

func (s *Store) submitOp(ctx context.Context, op *writeOp) error {
	select {
	case <-s.stop:
		return store.ErrClosed
	default:
	}
	if s.commitNow(op) {
		return op.err
	}
	select {
	case s.ops <- op:
	case <-s.stop:
		return store.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitNow commits op on the caller's goroutine when no group is being
// applied and none waits: it applies op as a group of its own, waits for
// the WAL sync and answers, so the answer leaves one sync after the call,
// without the hand-offs to the writer goroutine and the syncer and back
// (on one producer's keyed enqueues, about a quarter of the call). It
// returns false, having done nothing, when the writer is busy: op then
// joins the writer's next group, so concurrent writes still share a sync.
func (s *Store) commitNow(op *writeOp) bool {
	if len(s.ops) > 0 || !s.writeMu.TryLock() {
		return false
	}
	if len(s.ops) > 0 {
		s.writeMu.Unlock()
		return false
	}
	// Close waits for this (s.mu) before it closes the database.
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.writeMu.Unlock()
		op.err = store.ErrClosed
		return true
	}
	fs := s.commit([]*writeOp{op})
	s.afterCommit()
	s.writeMu.Unlock()
	for _, f := range fs {
		s.answer(f)
	}
	return true
}

// writer applies the groups of operations that arrive while another write
// is being applied (commitNow commits on the caller's goroutine otherwise).
// It is started by Open and stops when Close closes s.stop, after
// committing every operation already queued. It applies each group and
// hands it to the syncer without waiting for the group's WAL sync, so the
// next group is decided while the disk syncs the last one (Pebble's log
// writer folds the syncs queued meanwhile into one); the syncer answers the
// groups in order, each once its sync has returned.
func (s *Store) writer() {
	defer close(s.inflightCh)
	for {
		var first *writeOp
		select {
		case first = <-s.ops:
		case <-s.stop:
			for {
				select {
				case op := <-s.ops:
					s.writeMu.Lock()
					fs := s.commit([]*writeOp{op})
					s.writeMu.Unlock()
					for _, f := range fs {
						s.inflightCh <- f
					}
				default:
					return
				}
			}
		}
		group := make([]*writeOp, 1, 8) // the syncer answers it: not reused
		group[0] = first
	drain:
		for len(group) < s.opts.MaxGroupOps {
			select {
			case op := <-s.ops:
				group = append(group, op)
			default:
				break drain
			}
		}
		s.writeMu.Lock()
		fs := s.commit(group)
		s.afterCommit()
		s.writeMu.Unlock()
		for _, f := range fs {
			s.inflightCh <- f
		}
	}
}

// afterCommit replaces a key filter that a commit filled. The caller holds
// writeMu.
func (s *Store) afterCommit() {
	if s.filter.Load().full() {
		s.rebuildFilter()
	}
}

// rebuildFilter replaces a key filter that has taken in all it was sized
// for. The scan stalls the writer once per that many new keys; if it fails
// the store goes on without a filter, reading every key.
func (s *Store) rebuildFilter() {
	f, err := buildKeyFilter(s.db)
	if err != nil {
		f = nil
	}
	s.filter.Store(f)
}

// inflight is a group applied and on its way to its answers.
type inflight struct {
	group []*writeOp
	// b is the group's batch, applied without waiting for its sync; nil
	// when the group wrote nothing (or failed before its commit).
	b      *pebble.Batch
	commit uint64   // the commit's number (b != nil)
	count  ackCount // the acknowledged count once it has synced
	start  time.Time
	// released counts, by queue, the dedup records the group's batch
	// deleted (releaseKey); nil when it deleted none.
	released map[string]int
	// ready names the queues in which it made waiting jobs deliverable.
	ready map[string]bool
}

// commit applies group in one batch and returns it in flight, to be
// answered (answer) in the order returned. If the group fails with a
// storage error its batch is dropped and each operation runs again in a
// batch of its own, so one bad operation cannot fail its neighbours. The
// caller holds writeMu.
func (s *Store) commit(group []*writeOp) []inflight {
	start := time.Now()
	if err := s.failure(); err != nil {
		for _, op := range group {
			op.err = err
		}
		return []inflight{{group: group, count: s.acked, start: start}}
	}
	f, err := s.runGroup(group)
	if err == nil {
		f.start = start
		return []inflight{f}
	}
	if len(group) == 1 {
		if group[0].err == nil {
			group[0].err = err
		}
		return []inflight{{group: group, count: s.acked, start: start}}
	}
	fs := make([]inflight, 0, len(group))
	for _, op := range group {
		f, err := s.runGroup([]*writeOp{op})
		if err != nil {
			op.err = err
			f = inflight{group: []*writeOp{op}, count: s.acked}
		}
		f.start = start
		fs = append(fs, f)
	}
	return fs
}

// syncer answers the groups the writer applied, in order. It exits once
// the writer has stopped and every group is answered, and then closes
// s.stopped.
func (s *Store) syncer() {
	defer close(s.stopped)
	for f := range s.inflightCh {
		s.answer(f)
	}
}

// answer waits for f's WAL sync, records it in the acknowledgement mark
// (ackmark.go), and answers every operation of f. The syncer and commitNow
// answer groups concurrently: a group whose sync has returned is durable
// with every group committed before it (one log, synced in order), and the
// mark only moves forward.
func (s *Store) answer(f inflight) {
	var err error
	if f.b != nil {
		if serr := f.b.SyncWait(); serr != nil {
			s.fail(serr)
		}
		f.b.Close()
	} else if s.synced.Load() < f.count.commits {
		// A group that wrote nothing may have read what the commits before
		// it wrote: it is answered once they are on disk.
		err = s.awaitSynced(context.Background(), f.count.commits)
	}
	s.answerMu.Lock()
	if f.b != nil {
		s.markSynced(f.commit)
	}
	// After a failed sync no group is answered as done, with a batch or
	// without: one that wrote nothing may have read what the failed commit
	// wrote (a dedup hit on the job it created), which is in memory and
	// will not be on disk.
	if ferr := s.failure(); ferr != nil {
		err = ferr
	}
	if err == nil && f.count.commits > s.marked.commits {
		// Every operation of the group is answered only once the mark
		// holds its commit.
		if err = s.ack.write(f.count); err != nil {
			err = fmt.Errorf("pebble: record the acknowledgement in %s: %w; the write may be committed: retry it with its idempotency key", AckMarkFile, err)
		} else {
			s.marked = f.count
		}
	}
	s.answerMu.Unlock()
	jobs := 0
	for _, op := range f.group {
		if op.err == nil {
			op.err = err
		}
		jobs += op.jobs()
	}
	if s.opts.OnCommit != nil {
		s.opts.OnCommit(len(f.group), jobs, time.Since(f.start))
	}
	if err == nil && f.b != nil && s.opts.OnKeyReleased != nil {
		for queue, n := range f.released {
			s.opts.OnKeyReleased(queue, n)
		}
	}
	if err == nil && f.b != nil && len(f.ready) > 0 {
		if onJobs := s.onJobs.Load(); onJobs != nil {
			for queue := range f.ready {
				(*onJobs)(queue)
			}
		}
	}
	for _, op := range f.group {
		if op.hits != nil { // not committed: dropped
			s.pendingMu.Lock()
			s.settleHits(op)
			s.pendingMu.Unlock()
		}
		close(op.done)
	}
}

// fail stops the store after a commit could not be made durable.
func (s *Store) fail(cause error) {
	err := fmt.Errorf("%w: the embedded store could not make a commit durable (%v) and stopped: nothing acknowledged was lost; free disk space or fix the disk, then restart sepp", store.ErrUnavailable, cause)
	if s.failed.CompareAndSwap(nil, &err) && s.opts.OnFailed != nil {
		s.opts.OnFailed(err)
	}
}

// failure is the error the store stopped with, or nil.
func (s *Store) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// runGroup applies ops to one indexed batch, so each sees the writes of
// those before it, and applies it to the database with a sync requested,
// without waiting for the sync. It returns the group in flight, or the
// first storage error (after dropping the batch).
func (s *Store) runGroup(ops []*writeOp) (inflight, error) {
	t := &tx{s: s, b: s.db.NewIndexedBatch(), raised: map[string][]byte{}, horizon: s.horizon}
	keep := false
	defer func() {
		if !keep {
			t.b.Close()
		}
	}()
	for i := 0; i < len(ops); {
		op := ops[i]
		op.err = nil
		if op.enqueue != nil {
			j := i + 1
			for j < len(ops) && ops[j].enqueue != nil {
				ops[j].err = nil
				j++
			}
			if err := s.applyEnqueues(t, ops[i:j]); err != nil {
				return inflight{}, err
			}
			i = j
			continue
		}
		i++
		if err := op.apply(t); err != nil {
			var le logicalError
			if errors.As(err, &le) {
				op.err = le.err
				continue
			}
			return inflight{}, err
		}
	}
	f := inflight{group: ops}
	if !t.b.Empty() {
		next := s.acked
		next.commits++
		n := uint64(created(ops))
		next.jobs += n
		if err := t.b.Set(ackKey, encodeAckValue(next, n), nil); err != nil {
			return inflight{}, err
		}
		// A lookup reads a record and its pending hits under pendingMu;
		// the hits this batch commits leave pending as it becomes visible.
		withHits := slices.ContainsFunc(ops, func(op *writeOp) bool { return op.hits != nil })
		if withHits {
			s.pendingMu.Lock()
		}
		s.unsynced.add(next.commits, t.created)
		err := s.db.ApplyNoSyncWait(t.b, pebble.Sync)
		if withHits {
			if err == nil {
				for _, op := range ops {
					s.settleHits(op)
				}
			}
			s.pendingMu.Unlock()
		}
		if err != nil {
			s.markSynced(next.commits)
			return inflight{}, fmt.Errorf("pebble: commit: %w", err)
		}
		s.recent.put(t.cached)
		s.acked = next
		f.b, f.commit, keep = t.b, next.commits, true
		f.released, f.ready = t.released, t.ready
	}
	f.count = s.acked
	for prefix, k := range t.raised {
		if k == nil {
			delete(s.cursors, prefix) // dropCursor
			continue
		}
		s.cursors[prefix] = k
	}
	s.horizon = t.horizon
	return f, nil
}

// created counts the jobs the enqueues of ops created.
func created(ops []*writeOp) int {
	n := 0
	for _, op := range ops {
		if op.enqueue == nil || op.err != nil {
			continue
		}
		for _, r := range op.enqueue.results {
			if r.Err == nil && !r.Deduplicated {
				n++
			}
		}
	}
	return n
}

// cursors holds, for each index read from its head, a key before which the
// index has no live entry: the walk starts there instead of stepping over
// the tombstones of the entries taken before. Touched under writeMu only.
type cursors map[string][]byte

// tx is one group's batch as the operations see it.
type tx struct {
	s *Store
	b *pebble.Batch
	// raised holds the cursors this group moves forward; they take effect
	// only once the batch is committed.
	raised map[string][]byte
	// released counts, by queue, the dedup records releaseKey deleted in
	// the batch; nil until it deletes one.
	released map[string]int
	// ready names the queues in which the batch made waiting jobs
	// deliverable (a follow-up whose original ended); nil until it does.
	ready map[string]bool
	// created names the dedup records the batch creates (unsynced).
	created []storerule.Key
	// cached holds the dedup records the batch writes, for the cache of
	// recent records once the batch is applied (dedupCache).
	cached map[storerule.Key]storerule.Record
	// horizon is the dedup horizon as this group's operations see it: the
	// store's, raised by a sweep of the group; it becomes the store's once
	// the group is applied.
	horizon int64
}

func (t *tx) set(key, value []byte) error { return t.b.Set(key, value, nil) }

func (t *tx) del(key []byte) error { return t.b.Delete(key, nil) }

// putDedup writes the dedup record of k; the cache of recent records takes
// it once the batch is applied.
func (t *tx) putDedup(k storerule.Key, d *dedupRecord) error {
	if t.cached == nil {
		t.cached = map[storerule.Key]storerule.Record{}
	}
	t.cached[k] = d.Record
	return t.set(dedupKey(k.Queue, k.Key), encodeDedup(d))
}

// delDedup deletes the dedup record of k, and drops it from the cache of
// recent records at once: until the batch is applied a hit read from disk
// still finds it, and is answered as before the deletion.
func (t *tx) delDedup(k storerule.Key) error {
	delete(t.cached, k)
	t.s.recent.drop(k)
	return t.del(dedupKey(k.Queue, k.Key))
}

// setIndex adds an entry to the index whose cursor is named prefix, moving
// the cursor back if the entry lies before it.
func (t *tx) setIndex(prefix, key, value []byte) error {
	p := string(prefix)
	if c, ok := t.s.cursors[p]; ok && bytes.Compare(key, c) < 0 {
		t.s.cursors[p] = append([]byte(nil), key...)
	}
	if c, ok := t.raised[p]; ok && bytes.Compare(key, c) < 0 {
		t.raised[p] = append([]byte(nil), key...)
	}
	return t.b.Set(key, value, nil)
}

// walk visits, in order, the entries of the index named prefix that lie
// before upper, from the index's cursor, until fn returns false. fn gets
// the key and value, valid only during the call. With takesAll set, the
// caller deletes every entry it visits; a walk that then reaches upper
// leaves nothing live before it, so the cursor moves to upper, past the
// tombstones of entries deleted out of order (a lease ended by Complete, a
// record released) as well as those it took itself.
func (t *tx) walk(prefix, upper []byte, takesAll bool, fn func(k, v []byte) (bool, error)) error {
	lower := prefix
	if c, ok := t.raised[string(prefix)]; ok {
		if c != nil {
			lower = c
		}
	} else if c, ok := t.s.cursors[string(prefix)]; ok {
		lower = c
	}
	if bytes.Compare(lower, upper) >= 0 {
		// The cursor is past the bound: a clock that went back.
		return nil
	}
	it, err := t.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	exhausted := true
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		more, err := fn(it.Key(), v)
		if err != nil {
			it.Close()
			return err
		}
		if !more {
			exhausted = false
			break
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if takesAll && exhausted {
		t.raised[string(prefix)] = append([]byte(nil), upper...)
	}
	return nil
}

// dropCursor forgets the cursor of the index named prefix once the group
// is committed: for the many small indexes (a concurrency key's waiting
// list) that empty, so that their cursors do not pile up.
func (t *tx) dropCursor(prefix []byte) { t.raised[string(prefix)] = nil }

// taken records that every entry of the index named prefix up to and
// including key has been deleted by this group.
func (t *tx) taken(prefix, key []byte) {
	t.raised[string(prefix)] = append(append([]byte(nil), key...), 0)
}

func (t *tx) putJob(r *record) error { return t.set(jobKey(r.ID), encodeJob(r)) }

// index puts a job that can run (available or scheduled) into the ready or
// the scheduled index, as its run-at says.
func (t *tx) index(r *record, now int64) error {
	if r.waits() {
		return nil // a follow-up waits off the indexes until its original ends
	}
	if r.Conc != nil && !r.Slot && storerule.ArrivesAt(r.Conc, r.RunAt, now) {
		// Admitted when it arrives, or it waits.
		if admitted, err := t.arrive(r); err != nil || !admitted {
			return err
		}
	}
	if r.RunAt <= now {
		return t.setIndex(readyPrefix(r.Queue), readyKey(r.Queue, r.Priority, r.RunAt, r.ID), nil)
	}
	v := appendString(nil, r.Queue)
	v = appendInt64(v, int64(r.Priority))
	return t.setIndex([]byte{kindScheduled}, scheduledKey(r.RunAt, r.ID), v)
}

// unindex removes a job from the index its state puts it in.
func (t *tx) unindex(r *record) error {
	if r.Waiting {
		return t.leaveWaiting(r)
	}
	if r.RateWaiting {
		return t.leaveRateWaiting(r)
	}
	switch r.State {
	case store.JobStateAvailable, store.JobStateScheduled:
		// A job's entry is in the ready index once its run-at has come and
		// in the scheduled one before: delete both, one is absent.
		if err := t.del(readyKey(r.Queue, r.Priority, r.RunAt, r.ID)); err != nil {
			return err
		}
		return t.del(scheduledKey(r.RunAt, r.ID))
	case store.JobStateReserved:
		if r.LeaseExpires != 0 {
			return t.del(leaseKey(r.LeaseExpires, r.ID))
		}
	case store.JobStateCompleted, store.JobStateDead, store.JobStateCancelled:
		return t.del(finalizedKey(r.State, r.FinalizedAt, r.ID))
	}
	return nil
}

// finalize records r, already in a final state at r.FinalizedAt, in the
// retention index, and releases its dedup record when its release_key_on
// names that state (releaseKey). Every path by which a job reaches a final
// state calls it once, in the write that takes it there.
func (t *tx) finalize(r *record) error {
	if err := releaseKey(t, r); err != nil {
		return err
	}
	if err := t.releaseFollower(r); err != nil {
		return err
	}
	if r.Slot {
		if err := t.releaseSlot(r, r.FinalizedAt); err != nil {
			return err
		}
	}
	return t.setIndex(finalizedPrefix(r.State), finalizedKey(r.State, r.FinalizedAt, r.ID), nil)
}
