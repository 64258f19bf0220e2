package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sepp-dev/sepp/internal/store"
)

func pgID(id store.JobID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

const jobColumns = `id, queue, job_type, payload, idempotency_key, priority, run_at, max_attempts, attempts,
 headers, state, created_at, finalized_at, result, last_error`

func scanJob(row pgx.Row) (*store.Job, error) {
	var (
		j                    store.Job
		id                   pgtype.UUID
		key, headers, result []byte
		runAt, createdAt     int64
		finalizedAt          *int64
		lastError            *string
		state                int16
	)
	if err := row.Scan(&id, &j.Queue, &j.JobType, &j.Payload, &key, &j.Priority, &runAt, &j.MaxAttempts,
		&j.Attempts, &headers, &state, &createdAt, &finalizedAt, &result, &lastError); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrJobNotFound
		}
		return nil, err
	}
	j.ID = id.Bytes
	if key != nil {
		k := string(key)
		j.IdempotencyKey = &k
	}
	if len(headers) > 0 {
		if err := json.Unmarshal(headers, &j.Headers); err != nil {
			return nil, fmt.Errorf("postgres: job %x: corrupt headers: %w", j.ID, err)
		}
	}
	j.RunAt, j.CreatedAt = fromMicros(runAt), fromMicros(createdAt)
	if finalizedAt != nil {
		j.FinalizedAt = fromMicros(*finalizedAt)
	}
	j.State = store.JobState(state)
	j.Result = result
	if lastError != nil {
		j.LastError = *lastError
	}
	if j.Payload == nil {
		j.Payload = []byte{}
	}
	return &j, nil
}

// EnqueueBatch implements store.Store. The whole batch is one transaction
// of three pipelined rounds: each keyed job claims its (queue, key) with
// INSERT ... ON CONFLICT (which waits for a concurrent claim of the same key
// on any node and then sees it, so exactly one job is created per live key);
// the jobs whose key was live read the record; the new jobs are copied in.
func (s *Store) EnqueueBatch(ctx context.Context, p *store.EnqueueBatchParams) ([]store.EnqueueResult, error) {
	now := micros(p.Now)
	jobs := make([]pgJob, len(p.Jobs))
	for i := range p.Jobs {
		if err := jobs[i].prepare(&p.Jobs[i], now); err != nil {
			return nil, &store.JobError{Index: i, Err: err}
		}
	}
	results := make([]store.EnqueueResult, len(jobs))
	start := time.Now()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return enqueueInTx(ctx, tx, p.Atomic, now, jobs, results)
	})
	if err == nil && s.onCommit != nil {
		s.onCommit(1, len(jobs), time.Since(start))
	}
	if err != nil {
		var je *store.JobError
		if errors.As(err, &je) {
			return nil, je
		}
		return nil, translate(err)
	}
	return results, nil
}

// pgJob is an EnqueueJob with what needs no database computed.
type pgJob struct {
	j       *store.EnqueueJob
	id      store.JobID
	key     []byte // nil: unkeyed
	fp      store.Fingerprint
	expires int64
	runAt   int64
	state   store.JobState
	headers []byte
}

func (pj *pgJob) prepare(j *store.EnqueueJob, now int64) error {
	u, err := uuid.NewV7()
	if err != nil {
		return err
	}
	pj.j, pj.id = j, store.JobID(u)
	pj.runAt = now
	if !j.RunAt.IsZero() && micros(j.RunAt) > now {
		pj.runAt = micros(j.RunAt)
	}
	pj.state = store.JobStateAvailable
	if pj.runAt > now {
		pj.state = store.JobStateScheduled
	}
	if j.IdempotencyKey != nil {
		if j.DedupWindow <= 0 {
			return fmt.Errorf("dedup window must be positive, got %v", j.DedupWindow)
		}
		pj.key = []byte(*j.IdempotencyKey)
		pj.fp = store.NewFingerprint(j.JobType, j.Payload)
		pj.expires = now + j.DedupWindow.Microseconds()
	}
	if len(j.Headers) > 0 {
		if pj.headers, err = json.Marshal(j.Headers); err != nil {
			return err
		}
	}
	return nil
}

const claimKeySQL = `INSERT INTO sepp_dedup (queue, key, job_id, first_enqueued_at, expires_at, fingerprint, hits)
 VALUES ($1, $2, $3, $4, $5, $6, 0)
 ON CONFLICT (queue, key) DO UPDATE SET job_id = EXCLUDED.job_id, first_enqueued_at = EXCLUDED.first_enqueued_at,
   expires_at = EXCLUDED.expires_at, fingerprint = EXCLUDED.fingerprint, hits = 0
 WHERE sepp_dedup.expires_at <= $4
 RETURNING job_id`

func enqueueInTx(ctx context.Context, tx pgx.Tx, atomic bool, now int64, jobs []pgJob, results []store.EnqueueResult) error {
	// Round 1: claim every key, in job order (a key twice in the batch:
	// the second claim sees the first and returns no row).
	claims := &pgx.Batch{}
	for i := range jobs {
		if pj := &jobs[i]; pj.key != nil {
			claims.Queue(claimKeySQL, pj.j.Queue, pj.key, pgID(pj.id), now, pj.expires, pj.fp[:])
		}
	}
	live := make([]bool, len(jobs)) // the key was live: a hit or a conflict
	if claims.Len() > 0 {
		br := tx.SendBatch(ctx, claims)
		for i := range jobs {
			if jobs[i].key == nil {
				continue
			}
			var got pgtype.UUID
			err := br.QueryRow().Scan(&got)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				live[i] = true
			case err != nil:
				br.Close()
				return err
			}
		}
		if err := br.Close(); err != nil {
			return err
		}
	}
	// Round 2: read the live records, decide hits and conflicts.
	reads := &pgx.Batch{}
	for i := range jobs {
		if live[i] {
			reads.Queue(`SELECT job_id, first_enqueued_at, expires_at, fingerprint FROM sepp_dedup
 WHERE queue = $1 AND key = $2 FOR UPDATE`, jobs[i].j.Queue, jobs[i].key)
		}
	}
	hits := &pgx.Batch{}
	if reads.Len() > 0 {
		br := tx.SendBatch(ctx, reads)
		for i := range jobs {
			if !live[i] {
				continue
			}
			var id pgtype.UUID
			var first, expires int64
			var stored []byte
			if err := br.QueryRow().Scan(&id, &first, &expires, &stored); err != nil {
				br.Close()
				return err
			}
			mismatch := string(stored) != string(jobs[i].fp[:])
			if mismatch && jobs[i].j.RejectMismatch {
				if atomic {
					br.Close()
					return &store.JobError{Index: i, Err: store.ErrIdempotencyKeyConflict}
				}
				results[i] = store.EnqueueResult{Err: store.ErrIdempotencyKeyConflict}
				continue
			}
			results[i] = store.EnqueueResult{JobID: id.Bytes, Deduplicated: true, PayloadMismatch: mismatch,
				OriginalEnqueuedAt: fromMicros(first), ExpiresAt: fromMicros(expires)}
			hits.Queue(`UPDATE sepp_dedup SET hits = hits + 1 WHERE queue = $1 AND key = $2`, jobs[i].j.Queue, jobs[i].key)
		}
		if err := br.Close(); err != nil {
			return err
		}
	}
	// Round 3: count the hits and copy the new jobs in.
	var rows [][]any
	created := map[string]bool{}
	for i := range jobs {
		if live[i] {
			continue
		}
		pj := &jobs[i]
		results[i] = store.EnqueueResult{JobID: pj.id}
		if pj.key != nil {
			results[i].OriginalEnqueuedAt, results[i].ExpiresAt = fromMicros(now), fromMicros(pj.expires)
		}
		payload := pj.j.Payload
		if payload == nil {
			payload = []byte{}
		}
		rows = append(rows, []any{pgID(pj.id), pj.j.Queue, pj.j.JobType, payload, pj.key, pj.j.Priority, pj.runAt,
			pj.j.MaxAttempts, pj.headers, int16(pj.state), now})
		created[pj.j.Queue] = true
	}
	if hits.Len() > 0 {
		if err := tx.SendBatch(ctx, hits).Close(); err != nil {
			return err
		}
	}
	if len(rows) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"sepp_jobs"}, []string{"id", "queue", "job_type", "payload",
			"idempotency_key", "priority", "run_at", "max_attempts", "headers", "state", "created_at"},
			pgx.CopyFromRows(rows)); err != nil {
			return err
		}
	}
	for q := range created {
		if err := notifyJobs(ctx, tx, q); err != nil {
			return err
		}
	}
	return nil
}

// GetJob implements store.Store.
func (s *Store) GetJob(ctx context.Context, p *store.GetJobParams) (*store.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM sepp_jobs WHERE id = $1`, pgID(p.ID)))
	if err != nil && !errors.Is(err, store.ErrJobNotFound) {
		return nil, translate(err)
	}
	return j, err
}

// CancelJob implements store.Store.
func (s *Store) CancelJob(ctx context.Context, p *store.CancelJobParams) (*store.Job, error) {
	var job *store.Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		j, err := scanJob(tx.QueryRow(ctx, `SELECT `+jobColumns+` FROM sepp_jobs WHERE id = $1 FOR UPDATE`, pgID(p.ID)))
		if err != nil {
			return err
		}
		if !j.State.Finalized() {
			now := micros(p.Now)
			if _, err := tx.Exec(ctx, `UPDATE sepp_jobs SET state = $1, finalized_at = $2, lease_token = NULL,
 lease_expires_at = NULL WHERE id = $3`, int16(store.JobStateCancelled), now, pgID(p.ID)); err != nil {
				return err
			}
			j.State, j.FinalizedAt = store.JobStateCancelled, fromMicros(now)
		}
		job = j
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return job, nil
}

// LookupDedup implements store.Store.
func (s *Store) LookupDedup(ctx context.Context, p *store.LookupDedupParams) (*store.DedupLookup, error) {
	now := micros(p.Now)
	l := store.DedupLookup{Record: store.DedupRecord{Queue: p.Queue, Key: p.Key}}
	var (
		id             pgtype.UUID
		first, expires int64
		fp             []byte
		state          *int16
	)
	err := s.pool.QueryRow(ctx, `SELECT d.job_id, d.first_enqueued_at, d.expires_at, d.fingerprint, d.hits,
 CASE WHEN j.state = 1 AND j.run_at <= $3 THEN 2 ELSE j.state END, j.result
 FROM sepp_dedup d LEFT JOIN sepp_jobs j ON j.id = d.job_id
 WHERE d.queue = $1 AND d.key = $2 AND d.expires_at > $3`, p.Queue, []byte(p.Key), now).
		Scan(&id, &first, &expires, &fp, &l.Record.Hits, &state, &l.Result)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrDedupNotFound
	}
	if err != nil {
		return nil, translate(err)
	}
	l.Record.JobID = id.Bytes
	copy(l.Record.Fingerprint[:], fp)
	l.Record.FirstEnqueuedAt, l.Record.ExpiresAt = fromMicros(first), fromMicros(expires)
	l.JobState = store.JobStateDeleted
	if state != nil {
		l.JobState = store.JobState(*state)
	}
	return &l, nil
}

// ReleaseDedup implements store.Store.
func (s *Store) ReleaseDedup(ctx context.Context, p *store.ReleaseDedupParams) (*store.DedupRecord, error) {
	rec := &store.DedupRecord{Queue: p.Queue, Key: p.Key}
	var (
		id             pgtype.UUID
		first, expires int64
		fp             []byte
	)
	err := s.pool.QueryRow(ctx, `DELETE FROM sepp_dedup WHERE queue = $1 AND key = $2
 RETURNING job_id, first_enqueued_at, expires_at, fingerprint, hits`, p.Queue, []byte(p.Key)).
		Scan(&id, &first, &expires, &fp, &rec.Hits)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrDedupNotFound
	}
	if err != nil {
		return nil, translate(err)
	}
	if expires <= micros(p.Now) {
		return nil, store.ErrDedupNotFound // expired: deleted, but it was not live
	}
	rec.JobID = id.Bytes
	copy(rec.Fingerprint[:], fp)
	rec.FirstEnqueuedAt, rec.ExpiresAt = fromMicros(first), fromMicros(expires)
	return rec, nil
}

// Sweep implements store.Store. SKIP LOCKED lets nodes sweep at once
// without doing the same rows twice.
func (s *Store) Sweep(ctx context.Context, p *store.SweepParams) (*store.SweepResult, error) {
	now := micros(p.Now)
	res := &store.SweepResult{}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		*res = store.SweepResult{}
		t, err := tx.Exec(ctx, `DELETE FROM sepp_dedup WHERE (queue, key) IN
 (SELECT queue, key FROM sepp_dedup WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, p.Limit)
		if err != nil {
			return err
		}
		res.DedupRecords = int(t.RowsAffected())
		n, err := expireLeases(ctx, tx, now)
		if err != nil {
			return err
		}
		res.LeasesExpired = int(n)
		t, err = tx.Exec(ctx, `DELETE FROM sepp_effects WHERE (scope, key) IN
 (SELECT scope, key FROM sepp_effects WHERE expires_at IS NOT NULL AND expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, p.Limit)
		if err != nil {
			return err
		}
		res.Effects = int(t.RowsAffected())
		budget := int64(p.Limit)
		for _, c := range []struct {
			state     store.JobState
			retention int64
		}{
			{store.JobStateCompleted, p.CompletedRetention.Microseconds()},
			{store.JobStateCancelled, p.CompletedRetention.Microseconds()},
			{store.JobStateDead, p.DeadRetention.Microseconds()},
		} {
			if budget == 0 {
				break
			}
			t, err := tx.Exec(ctx, `DELETE FROM sepp_jobs WHERE id IN
 (SELECT id FROM sepp_jobs WHERE state = $1 AND finalized_at IS NOT NULL AND finalized_at <= $2
  ORDER BY finalized_at LIMIT $3 FOR UPDATE SKIP LOCKED)`, int16(c.state), now-c.retention, budget)
			if err != nil {
				return err
			}
			budget -= t.RowsAffected()
			res.Jobs += int(t.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return res, nil
}
