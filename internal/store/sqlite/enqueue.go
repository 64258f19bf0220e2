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

const upsertDedupPrefix = `INSERT INTO dedup (queue, key, job_id, first_enqueued_at, expires_at, fingerprint, hits) VALUES `

// An expired record is replaced in place by the fresh one.
const upsertDedupSuffix = ` ON CONFLICT (queue, key) DO UPDATE SET job_id = excluded.job_id,
 first_enqueued_at = excluded.first_enqueued_at, expires_at = excluded.expires_at,
 fingerprint = excluded.fingerprint, hits = excluded.hits`

const dedupUpsertCols = 7

const addHitsSQL = `UPDATE dedup SET hits = hits + ? WHERE queue = ? AND key = ?`

func insertJobsSQL(rows int) string { return insertJobsPrefix + placeholders(rows, jobInsertCols) }

func upsertDedupSQL(rows int) string {
	return upsertDedupPrefix + placeholders(rows, dedupUpsertCols) + upsertDedupSuffix
}

func selectDedupSQL(keys int) string {
	return `SELECT key, job_id, first_enqueued_at, expires_at, fingerprint FROM dedup WHERE queue = ? AND key IN (` +
		strings.TrimSuffix(strings.Repeat("?, ", keys), ", ") + `)`
}

// hotQueries are prepared once at Open: every shape the enqueue path uses.
func hotQueries() []string {
	qs := []string{addHitsSQL}
	for n := maxRowsPerStatement; n >= 1; n /= 2 {
		qs = append(qs, insertJobsSQL(n), upsertDedupSQL(n), selectDedupSQL(n))
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

// EnqueueBatch implements store.Store.
func (s *Store) EnqueueBatch(ctx context.Context, p *store.EnqueueBatchParams) ([]store.EnqueueResult, error) {
	now := p.Now.UnixMicro()
	jobs := make([]preparedJob, len(p.Jobs))
	for i := range p.Jobs {
		if err := prepareJob(&jobs[i], &p.Jobs[i], now); err != nil {
			return nil, &store.JobError{Index: i, Err: err}
		}
	}
	results := make([]store.EnqueueResult, len(jobs))
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return s.applyEnqueue(ctx, tx, p.Atomic, now, jobs, results)
	}, len(jobs))
	if err != nil {
		return nil, err
	}
	return results, nil
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
	created bool  // written by this batch (an upsert), not only read
	newHits int64 // hits this batch adds
}

// applyEnqueue decides every job of one batch against the stored dedup
// records, then writes the new jobs and records with multi-row statements.
// It writes nothing until every decision is made, so an atomic batch that
// fails leaves no trace.
func (s *Store) applyEnqueue(ctx context.Context, tx *sql.Tx, atomic bool, now int64, jobs []preparedJob, results []store.EnqueueResult) error {
	records, err := s.loadDedup(ctx, tx, jobs)
	if err != nil {
		return err
	}
	fresh := make([]int, 0, len(jobs)) // indices of jobs to insert
	var created []*dedupState          // records to upsert, in job order
	var createdKeys []dedupKey
	for i := range jobs {
		j := &jobs[i]
		r := &results[i]
		*r = store.EnqueueResult{JobID: j.id}
		if !j.keyed {
			fresh = append(fresh, i)
			continue
		}
		k := dedupKey{j.queue, j.key}
		if rec := records[k]; rec != nil && now < rec.expires {
			mismatch := rec.fp != j.fp
			if mismatch && j.reject {
				if atomic {
					return logicalError{&store.JobError{Index: i, Err: store.ErrIdempotencyKeyConflict}}
				}
				r.Err = store.ErrIdempotencyKeyConflict
				continue
			}
			rec.newHits++
			*r = store.EnqueueResult{
				JobID:              rec.jobID,
				Deduplicated:       true,
				PayloadMismatch:    mismatch,
				OriginalEnqueuedAt: time.UnixMicro(rec.first).UTC(),
				ExpiresAt:          time.UnixMicro(rec.expires).UTC(),
			}
			continue
		}
		rec := &dedupState{jobID: j.id, first: now, expires: now + j.window, fp: j.fp, created: true}
		records[k] = rec
		created = append(created, rec)
		createdKeys = append(createdKeys, k)
		fresh = append(fresh, i)
		r.OriginalEnqueuedAt = time.UnixMicro(now).UTC()
		r.ExpiresAt = time.UnixMicro(rec.expires).UTC()
	}

	if err := s.insertJobs(ctx, tx, jobs, fresh); err != nil {
		return err
	}
	if err := s.upsertDedup(ctx, tx, created, createdKeys); err != nil {
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

// loadDedup reads the stored records of every key in jobs, one multi-key
// SELECT per queue and chunk.
func (s *Store) loadDedup(ctx context.Context, tx *sql.Tx, jobs []preparedJob) (map[dedupKey]*dedupState, error) {
	byQueue := make(map[string][]string)
	seen := make(map[dedupKey]bool)
	for i := range jobs {
		j := &jobs[i]
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
		rec := &dedupState{}
		if err := rows.Scan(&key, &id, &rec.first, &rec.expires, &fp); err != nil {
			return err
		}
		copy(rec.jobID[:], id)
		copy(rec.fp[:], fp)
		into[dedupKey{queue, string(key)}] = rec
	}
	return rows.Err()
}

func (s *Store) insertJobs(ctx context.Context, tx *sql.Tx, jobs []preparedJob, fresh []int) error {
	for _, n := range chunks(len(fresh), maxRowsPerStatement) {
		st, err := s.stmts.get(ctx, tx, insertJobsSQL(n))
		if err != nil {
			return err
		}
		args := make([]any, 0, n*jobInsertCols)
		for _, i := range fresh[:n] {
			args = append(args, jobs[i].insArgs...)
		}
		fresh = fresh[n:]
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) upsertDedup(ctx context.Context, tx *sql.Tx, recs []*dedupState, keys []dedupKey) error {
	for _, n := range chunks(len(recs), maxRowsPerStatement) {
		st, err := s.stmts.get(ctx, tx, upsertDedupSQL(n))
		if err != nil {
			return err
		}
		args := make([]any, 0, n*dedupUpsertCols)
		for i, rec := range recs[:n] {
			k := keys[i]
			args = append(args, k.queue, []byte(k.key), rec.jobID[:], rec.first, rec.expires, rec.fp[:], rec.newHits)
		}
		recs, keys = recs[n:], keys[n:]
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}
