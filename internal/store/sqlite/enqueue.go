package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
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

// enqueueOp is one EnqueueBatch call as the writer sees it. args holds each
// job's row, built in the caller's goroutine, off the single writer.
type enqueueOp struct {
	atomic  bool
	now     int64
	jobs    []storerule.Job
	args    [][]any // the job rows, in insertJobsPrefix order
	results []store.EnqueueResult
}

// EnqueueBatch implements store.Store.
func (s *Store) EnqueueBatch(ctx context.Context, p *store.EnqueueBatchParams) ([]store.EnqueueResult, error) {
	now := p.Now.UnixMicro()
	jobs, err := storerule.PrepareBatch(p.Jobs, now)
	if err != nil {
		return nil, err
	}
	op := &enqueueOp{atomic: p.Atomic, now: now, jobs: jobs, args: make([][]any, len(jobs)), results: make([]store.EnqueueResult, len(jobs))}
	for i := range jobs {
		op.args[i] = jobRow(&jobs[i])
	}
	if err := s.submitOp(ctx, &writeOp{enqueue: op, done: make(chan struct{})}); err != nil {
		return nil, err
	}
	return op.results, nil
}

func jobRow(j *storerule.Job) []any {
	var key, headers any // NULL when unkeyed, or without headers
	if j.Keyed {
		key = []byte(j.Key)
	}
	if j.Headers != nil {
		headers = j.Headers
	}
	return []any{j.ID[:], j.Queue, j.JobType, j.Payload, key, j.Priority, j.RunAt, j.MaxAttempts, headers, int(j.State), j.CreatedAt}
}

// applyEnqueues decides every job of the given enqueue ops against the stored
// dedup records and each other, in submission order (storerule.Group), then
// writes the new jobs and records of all of them with multi-row statements.
// An atomic op that fails contributes nothing.
func (s *Store) applyEnqueues(ctx context.Context, tx *sql.Tx, ops []*writeOp) error {
	g := storerule.NewGroup()
	if err := s.loadDedup(ctx, tx, ops, g.Records); err != nil {
		return err
	}
	var rows [][]any
	for _, wop := range ops {
		op := wop.enqueue
		if err := g.Decide(op.atomic, op.now, op.jobs, op.results); err != nil {
			wop.err = err
			continue
		}
		for i, r := range op.results {
			if r.Err == nil && !r.Deduplicated {
				rows = append(rows, op.args[i])
			}
		}
	}
	if err := s.insertJobs(ctx, tx, rows); err != nil {
		return err
	}
	for _, k := range g.Replaced {
		if _, err := tx.ExecContext(ctx, `DELETE FROM dedup WHERE queue = ? AND key = ?`, k.Queue, []byte(k.Key)); err != nil {
			return err
		}
	}
	if err := s.insertDedup(ctx, tx, g.Records, g.Created); err != nil {
		return err
	}
	for k, e := range g.Records {
		if e.Created || e.Hits == 0 {
			continue
		}
		st, err := s.stmts.get(ctx, tx, addHitsSQL)
		if err != nil {
			return err
		}
		if _, err := st.ExecContext(ctx, e.Hits, k.Queue, []byte(k.Key)); err != nil {
			return err
		}
	}
	return nil
}

// loadDedup reads the stored records of every key of ops into records, one
// multi-key SELECT per queue and chunk.
func (s *Store) loadDedup(ctx context.Context, tx *sql.Tx, ops []*writeOp, records map[storerule.Key]*storerule.Entry) error {
	byQueue := make(map[string][]string)
	seen := make(map[storerule.Key]bool)
	for _, wop := range ops {
		storerule.Keys(wop.enqueue.jobs, seen, func(k storerule.Key) {
			byQueue[k.Queue] = append(byQueue[k.Queue], k.Key)
		})
	}
	for queue, keys := range byQueue {
		for _, n := range chunks(len(keys), maxRowsPerStatement) {
			st, err := s.stmts.get(ctx, tx, selectDedupSQL(n))
			if err != nil {
				return err
			}
			args := make([]any, 0, n+1)
			args = append(args, queue)
			for _, k := range keys[:n] {
				args = append(args, []byte(k))
			}
			keys = keys[n:]
			if err := scanDedup(ctx, st, args, queue, records); err != nil {
				return err
			}
		}
	}
	return nil
}

func scanDedup(ctx context.Context, st *sql.Stmt, args []any, queue string, into map[storerule.Key]*storerule.Entry) error {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, id, fp []byte
		e := &storerule.Entry{Stored: true}
		if err := rows.Scan(&key, &id, &e.FirstEnqueuedAt, &e.ExpiresAt, &fp); err != nil {
			return err
		}
		copy(e.JobID[:], id)
		copy(e.Fingerprint[:], fp)
		into[storerule.Key{Queue: queue, Key: string(key)}] = e
	}
	return rows.Err()
}

func (s *Store) insertJobs(ctx context.Context, tx *sql.Tx, rows [][]any) error {
	for _, n := range chunks(len(rows), maxRowsPerStatement) {
		st, err := s.stmts.get(ctx, tx, insertJobsSQL(n))
		if err != nil {
			return err
		}
		args := make([]any, 0, n*jobInsertCols)
		for _, row := range rows[:n] {
			args = append(args, row...)
		}
		rows = rows[n:]
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) insertDedup(ctx context.Context, tx *sql.Tx, records map[storerule.Key]*storerule.Entry, keys []storerule.Key) error {
	for _, n := range chunks(len(keys), maxRowsPerStatement) {
		st, err := s.stmts.get(ctx, tx, insertDedupSQL(n))
		if err != nil {
			return err
		}
		args := make([]any, 0, n*dedupInsertCols)
		for _, k := range keys[:n] {
			e := records[k]
			args = append(args, k.Queue, []byte(k.Key), e.JobID[:], e.FirstEnqueuedAt, e.ExpiresAt, e.Fingerprint[:], e.Hits)
		}
		keys = keys[n:]
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}
