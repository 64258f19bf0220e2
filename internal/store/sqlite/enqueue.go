package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sepp-dev/sepp/internal/store"
)

// maxRowsPerStatement bounds multi-row statements; chunks() splits larger
// batches into power-of-two pieces so each shape is prepared once.
const maxRowsPerStatement = 256

const insertJobsPrefix = `INSERT INTO jobs (id, queue, job_type, payload, idempotency_key, priority, run_at, max_attempts, headers, state, created_at) VALUES `

const jobInsertCols = 11

// Expired records being replaced are deleted first, so this is a plain
// insert (cheaper than an upsert).
const insertDedupPrefix = `INSERT INTO dedup (queue, key, job_id, first_enqueued_at, expires_at, fingerprint, hits) VALUES `

const dedupInsertCols = 7

const addHitsSQL = `UPDATE dedup SET hits = hits + ? WHERE queue = ? AND key = ?`

func insertJobsSQL(rows int) string { return insertJobsPrefix + placeholders(rows, jobInsertCols) }

func insertDedupSQL(rows int) string { return insertDedupPrefix + placeholders(rows, dedupInsertCols) }

func selectDedupSQL(keys int) string {
	return `SELECT key, job_id, first_enqueued_at, expires_at, fingerprint FROM dedup WHERE queue = ? AND key IN (` +
		strings.TrimSuffix(strings.Repeat("?, ", keys), ", ") + `)`
}

// hotQueries are prepared once at Open: every shape the enqueue path uses.
func hotQueries() []string {
	qs := []string{addHitsSQL, completeSQL}
	for n := maxRowsPerStatement; n >= 1; n /= 2 {
		qs = append(qs, insertJobsSQL(n), insertDedupSQL(n), selectDedupSQL(n), reserveJobsSQL(n))
	}
	return qs
}

// preparedJob is an EnqueueJob with everything that needs no stored state
// computed in the caller's goroutine, off the single writer.
type preparedJob struct {
	id      store.JobID
	queue   string
	key     string
	keyed   bool
	fp      store.Fingerprint
	window  int64 // microseconds
	reject  bool
	runAt   int64
	insArgs []any // the job row, in insertJobsPrefix order
}

// enqueueOp is one EnqueueBatch call as the writer sees it.
type enqueueOp struct {
	atomic  bool
	now     int64
	jobs    []preparedJob
	results []store.EnqueueResult
}

// EnqueueBatch implements store.Store.
func (s *Store) EnqueueBatch(ctx context.Context, p *store.EnqueueBatchParams) ([]store.EnqueueResult, error) {
	now := p.Now.UnixMicro()
	op := &enqueueOp{atomic: p.Atomic, now: now, jobs: make([]preparedJob, len(p.Jobs)), results: make([]store.EnqueueResult, len(p.Jobs))}
	for i := range p.Jobs {
		if err := prepareJob(&op.jobs[i], &p.Jobs[i], now); err != nil {
			return nil, &store.JobError{Index: i, Err: err}
		}
	}
	if err := s.submitOp(ctx, &writeOp{enqueue: op, done: make(chan struct{})}); err != nil {
		return nil, err
	}
	return op.results, nil
}

func prepareJob(pj *preparedJob, j *store.EnqueueJob, now int64) error {
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("generate job id: %w", err)
	}
	pj.id = store.JobID(id)
	pj.queue = j.Queue
	pj.window = j.DedupWindow.Microseconds()
	pj.reject = j.RejectMismatch
	pj.runAt = now
	if !j.RunAt.IsZero() && j.RunAt.UnixMicro() > now {
		pj.runAt = j.RunAt.UnixMicro()
	}
	state := store.JobStateAvailable
	if pj.runAt > now {
		state = store.JobStateScheduled
	}
	var key any // NULL when unkeyed
	if j.IdempotencyKey != nil {
		if pj.window <= 0 {
			return fmt.Errorf("dedup window must be positive, got %v", j.DedupWindow)
		}
		pj.keyed = true
		pj.key = *j.IdempotencyKey
		pj.fp = store.NewFingerprint(j.JobType, j.Payload)
		key = []byte(pj.key)
	}
	var headers any
	if len(j.Headers) > 0 {
		b, err := json.Marshal(j.Headers)
		if err != nil {
			return fmt.Errorf("encode headers: %w", err)
		}
		headers = b
	}
	payload := j.Payload
	if payload == nil {
		payload = []byte{}
	}
	pj.insArgs = []any{pj.id[:], j.Queue, j.JobType, payload, key, j.Priority, pj.runAt, j.MaxAttempts, headers, int(state), now}
	return nil
}

type dedupKey struct{ queue, key string }

// dedupState is a dedup record as this transaction sees it.
type dedupState struct {
	jobID   store.JobID
	first   int64
	expires int64
	fp      store.Fingerprint
	stored  bool  // the record is in the database (read by loadDedup)
	created bool  // this group writes the record (new, or replacing an expired one)
	newHits int64 // hits this group adds
}

// groupWrites collects what a group of enqueue ops writes.
type groupWrites struct {
	jobs     []*preparedJob // new jobs, in order
	created  []dedupKey     // records to insert, in order
	replaced []dedupKey     // expired stored records to delete before inserting
}

// applyEnqueues decides every job of the given enqueue ops against the stored
// dedup records and each other, in submission order, then writes the new jobs
// and records of all of them with multi-row statements. An atomic op that
// fails contributes nothing: its decisions are staged and dropped.
func (s *Store) applyEnqueues(ctx context.Context, tx *sql.Tx, ops []*writeOp) error {
	records, err := s.loadDedup(ctx, tx, ops)
	if err != nil {
		return err
	}
	var w groupWrites
	for _, wop := range ops {
		decideOp(wop, records, &w)
	}
	if err := s.insertJobs(ctx, tx, w.jobs); err != nil {
		return err
	}
	for _, k := range w.replaced {
		if _, err := tx.ExecContext(ctx, `DELETE FROM dedup WHERE queue = ? AND key = ?`, k.queue, []byte(k.key)); err != nil {
			return err
		}
	}
	if err := s.insertDedup(ctx, tx, records, w.created); err != nil {
		return err
	}
	for k, rec := range records {
		if rec.created || rec.newHits == 0 {
			continue
		}
		st, err := s.stmts.get(ctx, tx, addHitsSQL)
		if err != nil {
			return err
		}
		if _, err := st.ExecContext(ctx, rec.newHits, k.queue, []byte(k.key)); err != nil {
			return err
		}
	}
	return nil
}

// decideOp decides the jobs of one op. What the op would write (new jobs,
// new records, hits) is staged, and merged into records and w only if the op
// succeeds, so a failed atomic op leaves no trace.
func decideOp(wop *writeOp, records map[dedupKey]*dedupState, w *groupWrites) {
	op := wop.enqueue
	staged := map[dedupKey]*dedupState{}
	var (
		stagedKeys []dedupKey // in job order
		hits       []*dedupState
		fresh      []*preparedJob
		replaced   []dedupKey
	)
	for i := range op.jobs {
		j := &op.jobs[i]
		r := &op.results[i]
		*r = store.EnqueueResult{JobID: j.id}
		if !j.keyed {
			fresh = append(fresh, j)
			continue
		}
		k := dedupKey{j.queue, j.key}
		rec := staged[k]
		if rec == nil {
			rec = records[k]
		}
		if rec != nil && op.now < rec.expires {
			mismatch := rec.fp != j.fp
			if mismatch && j.reject {
				if op.atomic {
					wop.err = &store.JobError{Index: i, Err: store.ErrIdempotencyKeyConflict}
					clear(op.results)
					return
				}
				r.Err = store.ErrIdempotencyKeyConflict
				continue
			}
			hits = append(hits, rec)
			*r = store.EnqueueResult{
				JobID:              rec.jobID,
				Deduplicated:       true,
				PayloadMismatch:    mismatch,
				OriginalEnqueuedAt: time.UnixMicro(rec.first).UTC(),
				ExpiresAt:          time.UnixMicro(rec.expires).UTC(),
			}
			continue
		}
		if rec != nil && rec.stored && !rec.created {
			replaced = append(replaced, k) // an expired stored record
		}
		staged[k] = &dedupState{jobID: j.id, first: op.now, expires: op.now + j.window, fp: j.fp, created: true}
		stagedKeys = append(stagedKeys, k)
		fresh = append(fresh, j)
		r.OriginalEnqueuedAt = time.UnixMicro(op.now).UTC()
		r.ExpiresAt = time.UnixMicro(op.now + j.window).UTC()
	}
	for _, rec := range hits {
		rec.newHits++
	}
	for _, k := range stagedKeys {
		rec := staged[k]
		if old := records[k]; old != nil && old.created {
			// An earlier op of this group created this record and it has
			// expired by this op's clock (a window shorter than the time
			// between the two): the one insert writes the newer record.
			*old = *rec
			continue
		}
		records[k] = rec
		w.created = append(w.created, k)
	}
	w.jobs = append(w.jobs, fresh...)
	w.replaced = append(w.replaced, replaced...)
}

// loadDedup reads the stored records of every key of ops, one multi-key
// SELECT per queue and chunk.
func (s *Store) loadDedup(ctx context.Context, tx *sql.Tx, ops []*writeOp) (map[dedupKey]*dedupState, error) {
	byQueue := make(map[string][]string)
	seen := make(map[dedupKey]bool)
	for _, wop := range ops {
		for i := range wop.enqueue.jobs {
			j := &wop.enqueue.jobs[i]
			if !j.keyed {
				continue
			}
			k := dedupKey{j.queue, j.key}
			if seen[k] {
				continue
			}
			seen[k] = true
			byQueue[j.queue] = append(byQueue[j.queue], j.key)
		}
	}
	records := make(map[dedupKey]*dedupState, len(seen))
	for queue, keys := range byQueue {
		for _, n := range chunks(len(keys), maxRowsPerStatement) {
			st, err := s.stmts.get(ctx, tx, selectDedupSQL(n))
			if err != nil {
				return nil, err
			}
			args := make([]any, 0, n+1)
			args = append(args, queue)
			for _, k := range keys[:n] {
				args = append(args, []byte(k))
			}
			keys = keys[n:]
			if err := scanDedup(ctx, st, args, queue, records); err != nil {
				return nil, err
			}
		}
	}
	return records, nil
}

func scanDedup(ctx context.Context, st *sql.Stmt, args []any, queue string, into map[dedupKey]*dedupState) error {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, id, fp []byte
		rec := &dedupState{stored: true}
		if err := rows.Scan(&key, &id, &rec.first, &rec.expires, &fp); err != nil {
			return err
		}
		copy(rec.jobID[:], id)
		copy(rec.fp[:], fp)
		into[dedupKey{queue, string(key)}] = rec
	}
	return rows.Err()
}

func (s *Store) insertJobs(ctx context.Context, tx *sql.Tx, jobs []*preparedJob) error {
	for _, n := range chunks(len(jobs), maxRowsPerStatement) {
		st, err := s.stmts.get(ctx, tx, insertJobsSQL(n))
		if err != nil {
			return err
		}
		args := make([]any, 0, n*jobInsertCols)
		for _, j := range jobs[:n] {
			args = append(args, j.insArgs...)
		}
		jobs = jobs[n:]
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) insertDedup(ctx context.Context, tx *sql.Tx, records map[dedupKey]*dedupState, keys []dedupKey) error {
	for _, n := range chunks(len(keys), maxRowsPerStatement) {
		st, err := s.stmts.get(ctx, tx, insertDedupSQL(n))
		if err != nil {
			return err
		}
		args := make([]any, 0, n*dedupInsertCols)
		for _, k := range keys[:n] {
			rec := records[k]
			args = append(args, k.queue, []byte(k.key), rec.jobID[:], rec.first, rec.expires, rec.fp[:], rec.newHits)
		}
		keys = keys[n:]
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}
