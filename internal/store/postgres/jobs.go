package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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

// EnqueueBatch implements store.Store. The whole batch is one transaction;
// each keyed job claims its (queue, key) with INSERT ... ON CONFLICT, which
// waits for a concurrent claim of the same key on any node and then sees it,
// so exactly one job is created per live key.
func (s *Store) EnqueueBatch(ctx context.Context, p *store.EnqueueBatchParams) ([]store.EnqueueResult, error) {
	now := micros(p.Now)
	results := make([]store.EnqueueResult, len(p.Jobs))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		created := map[string]bool{}
		for i := range p.Jobs {
			r, err := enqueueOne(ctx, tx, &p.Jobs[i], now)
			if err != nil {
				return err
			}
			if r.Err != nil && p.Atomic {
				return &store.JobError{Index: i, Err: r.Err}
			}
			results[i] = r
			if r.Err == nil && !r.Deduplicated {
				created[p.Jobs[i].Queue] = true
			}
		}
		for q := range created {
			if err := notifyJobs(ctx, tx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		var je *store.JobError
		if errors.As(err, &je) {
			return nil, je
		}
		return nil, translate(err)
	}
	return results, nil
}

func enqueueOne(ctx context.Context, tx pgx.Tx, j *store.EnqueueJob, now int64) (store.EnqueueResult, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return store.EnqueueResult{}, err
	}
	id := store.JobID(u)
	res := store.EnqueueResult{JobID: id}
	runAt := now
	if !j.RunAt.IsZero() && micros(j.RunAt) > now {
		runAt = micros(j.RunAt)
	}
	state := store.JobStateAvailable
	if runAt > now {
		state = store.JobStateScheduled
	}
	var key []byte
	if j.IdempotencyKey != nil {
		if j.DedupWindow <= 0 {
			return res, fmt.Errorf("dedup window must be positive, got %v", j.DedupWindow)
		}
		key = []byte(*j.IdempotencyKey)
		fp := store.NewFingerprint(j.JobType, j.Payload)
		expires := now + j.DedupWindow.Microseconds()
		// Insert the record, or replace an expired one; a live record
		// makes the WHERE false and returns no row.
		var got pgtype.UUID
		err := tx.QueryRow(ctx, `INSERT INTO sepp_dedup (queue, key, job_id, first_enqueued_at, expires_at, fingerprint, hits)
 VALUES ($1, $2, $3, $4, $5, $6, 0)
 ON CONFLICT (queue, key) DO UPDATE SET job_id = EXCLUDED.job_id, first_enqueued_at = EXCLUDED.first_enqueued_at,
   expires_at = EXCLUDED.expires_at, fingerprint = EXCLUDED.fingerprint, hits = 0
 WHERE sepp_dedup.expires_at <= $4
 RETURNING job_id`, j.Queue, key, pgID(id), now, expires, fp[:]).Scan(&got)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return hit(ctx, tx, j, key, fp)
		case err != nil:
			return res, err
		}
		res.OriginalEnqueuedAt, res.ExpiresAt = fromMicros(now), fromMicros(expires)
	}
	var headers []byte
	if len(j.Headers) > 0 {
		if headers, err = json.Marshal(j.Headers); err != nil {
			return res, err
		}
	}
	payload := j.Payload
	if payload == nil {
		payload = []byte{}
	}
	_, err = tx.Exec(ctx, `INSERT INTO sepp_jobs (id, queue, job_type, payload, idempotency_key, priority, run_at,
 max_attempts, headers, state, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		pgID(id), j.Queue, j.JobType, payload, key, j.Priority, runAt, j.MaxAttempts, headers, int16(state), now)
	return res, err
}

// hit answers an enqueue whose key has a live record: the original, or a
// conflict on a queue that rejects a different payload.
func hit(ctx context.Context, tx pgx.Tx, j *store.EnqueueJob, key []byte, fp store.Fingerprint) (store.EnqueueResult, error) {
	var (
		id             pgtype.UUID
		first, expires int64
		stored         []byte
	)
	if err := tx.QueryRow(ctx, `SELECT job_id, first_enqueued_at, expires_at, fingerprint FROM sepp_dedup
 WHERE queue = $1 AND key = $2 FOR UPDATE`, j.Queue, key).Scan(&id, &first, &expires, &stored); err != nil {
		return store.EnqueueResult{}, err
	}
	mismatch := string(stored) != string(fp[:])
	if mismatch && j.RejectMismatch {
		return store.EnqueueResult{Err: store.ErrIdempotencyKeyConflict}, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE sepp_dedup SET hits = hits + 1 WHERE queue = $1 AND key = $2`, j.Queue, key); err != nil {
		return store.EnqueueResult{}, err
	}
	return store.EnqueueResult{JobID: id.Bytes, Deduplicated: true, PayloadMismatch: mismatch,
		OriginalEnqueuedAt: fromMicros(first), ExpiresAt: fromMicros(expires)}, nil
}

// GetJob implements store.Store.
func (s *Store) GetJob(ctx context.Context, p *store.GetJobParams) (*store.Job, error) {
	return scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM sepp_jobs WHERE id = $1`, pgID(p.ID)))
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
