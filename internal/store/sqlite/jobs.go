package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

const jobColumns = `id, queue, job_type, payload, idempotency_key, priority, run_at, max_attempts, attempts,
 headers, state, created_at, finalized_at, result, last_error`

type rowScanner interface{ Scan(dest ...any) error }

func scanJob(row rowScanner) (*store.Job, error) {
	var (
		j                        store.Job
		id, key, headers, result []byte
		runAt, createdAt         int64
		finalizedAt              sql.NullInt64
		lastError                sql.NullString
		state                    int
	)
	err := row.Scan(&id, &j.Queue, &j.JobType, &j.Payload, &key, &j.Priority, &runAt, &j.MaxAttempts,
		&j.Attempts, &headers, &state, &createdAt, &finalizedAt, &result, &lastError)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrJobNotFound
		}
		return nil, err
	}
	copy(j.ID[:], id)
	if key != nil {
		k := string(key)
		j.IdempotencyKey = &k
	}
	if j.Headers, err = storerule.DecodeHeaders(headers); err != nil {
		return nil, fmt.Errorf("sqlite: job %x: %w", id, err)
	}
	j.RunAt = time.UnixMicro(runAt).UTC()
	j.CreatedAt = time.UnixMicro(createdAt).UTC()
	if finalizedAt.Valid {
		j.FinalizedAt = time.UnixMicro(finalizedAt.Int64).UTC()
	}
	j.State = store.JobState(state)
	j.Result = result
	j.LastError = lastError.String
	return &j, nil
}

// GetJob implements store.Store.
func (s *Store) GetJob(ctx context.Context, p *store.GetJobParams) (*store.Job, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	return scanJob(s.read.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, p.ID[:]))
}

// CancelJob implements store.Store.
func (s *Store) CancelJob(ctx context.Context, p *store.CancelJobParams) (*store.Job, error) {
	var job *store.Job
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		j, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, p.ID[:]))
		if errors.Is(err, store.ErrJobNotFound) {
			return logicalError{err}
		}
		if err != nil {
			return err
		}
		if !j.State.Finalized() {
			now := p.Now.UnixMicro()
			if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, finalized_at = ?, lease_token = NULL,
 lease_expires_at = NULL WHERE id = ?`, int(store.JobStateCancelled), now, p.ID[:]); err != nil {
				return err
			}
			j.State = store.JobStateCancelled
			j.FinalizedAt = time.UnixMicro(now).UTC()
		}
		job = j
		return nil
	})
	if err != nil {
		return nil, err
	}
	return job, nil
}

// LookupDedup implements store.Store.
func (s *Store) LookupDedup(ctx context.Context, p *store.LookupDedupParams) (*store.DedupLookup, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	var (
		l             = store.DedupLookup{Record: store.DedupRecord{Queue: p.Queue, Key: p.Key}}
		id, fp        []byte
		first, expire int64
		state         sql.NullInt64
	)
	now := p.Now.UnixMicro()
	err := s.read.QueryRowContext(ctx, `SELECT d.job_id, d.first_enqueued_at, d.expires_at, d.fingerprint, d.hits,
 CASE WHEN j.state = ? AND j.run_at <= ? THEN ? ELSE j.state END, j.result
 FROM dedup d LEFT JOIN jobs j ON j.id = d.job_id
 WHERE d.queue = ? AND d.key = ? AND d.expires_at > ?`,
		int(store.JobStateScheduled), now, int(store.JobStateAvailable), p.Queue, []byte(p.Key), now).
		Scan(&id, &first, &expire, &fp, &l.Record.Hits, &state, &l.Result)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrDedupNotFound
	}
	if err != nil {
		return nil, err
	}
	copy(l.Record.JobID[:], id)
	copy(l.Record.Fingerprint[:], fp)
	l.Record.FirstEnqueuedAt = time.UnixMicro(first).UTC()
	l.Record.ExpiresAt = time.UnixMicro(expire).UTC()
	l.JobState = store.JobStateDeleted
	if state.Valid {
		l.JobState = store.JobState(state.Int64)
	}
	return &l, nil
}

// ReleaseDedup implements store.Store.
func (s *Store) ReleaseDedup(ctx context.Context, p *store.ReleaseDedupParams) (*store.DedupRecord, error) {
	rec := &store.DedupRecord{Queue: p.Queue, Key: p.Key}
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var id, fp []byte
		var first, expire int64
		// An expired record is deleted too (the sweeper would have), but it
		// was not live, so it is reported as not found.
		err := tx.QueryRowContext(ctx, `DELETE FROM dedup WHERE queue = ? AND key = ?
 RETURNING job_id, first_enqueued_at, expires_at, fingerprint, hits`, p.Queue, []byte(p.Key)).
			Scan(&id, &first, &expire, &fp, &rec.Hits)
		if errors.Is(err, sql.ErrNoRows) {
			return logicalError{store.ErrDedupNotFound}
		}
		if err != nil {
			return err
		}
		if expire <= p.Now.UnixMicro() {
			return logicalError{store.ErrDedupNotFound}
		}
		copy(rec.JobID[:], id)
		copy(rec.Fingerprint[:], fp)
		rec.FirstEnqueuedAt = time.UnixMicro(first).UTC()
		rec.ExpiresAt = time.UnixMicro(expire).UTC()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Sweep implements store.Store.
func (s *Store) Sweep(ctx context.Context, p *store.SweepParams) (*store.SweepResult, error) {
	res := &store.SweepResult{}
	now := p.Now.UnixMicro()
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		*res = store.SweepResult{}
		r, err := tx.ExecContext(ctx, `DELETE FROM dedup WHERE (queue, key) IN
 (SELECT queue, key FROM dedup WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`, now, p.Limit)
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		res.DedupRecords = int(n)

		expired, err := expireLeases(ctx, tx, now)
		if err != nil {
			return err
		}
		res.LeasesExpired = int(expired)

		if res.Effects, err = sweepEffects(ctx, tx, now, p.Limit); err != nil {
			return err
		}

		budget := int64(p.Limit)
		for _, c := range storerule.Retentions(p) {
			if budget == 0 {
				break
			}
			r, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id IN
 (SELECT id FROM jobs WHERE state = ? AND finalized_at IS NOT NULL AND finalized_at <= ? ORDER BY finalized_at LIMIT ?)`,
				int(c.State), c.Before, budget)
			if err != nil {
				return err
			}
			n, _ := r.RowsAffected()
			budget -= n
			res.Jobs += int(n)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (s *Store) checkOpen() error {
	select {
	case <-s.stop:
		return store.ErrClosed
	default:
		return nil
	}
}

// Ping implements store.Store: one read of the schema version through the
// read pool.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	var v int
	if err := s.read.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return fmt.Errorf("sqlite: read the schema version: %w", err)
	}
	return nil
}
