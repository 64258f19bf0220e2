package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// The job states as SQL literals, for queries that must match the WHERE of a
// partial index.
var (
	stateScheduled = strconv.Itoa(int(store.JobStateScheduled))
	stateAvailable = strconv.Itoa(int(store.JobStateAvailable))
	stateReserved  = strconv.Itoa(int(store.JobStateReserved))
)

// expireLeases releases every lease that ended at or before now: the job is
// deliverable again, or dead when that lease was its last attempt (the SQL
// form of storerule.AfterLeaseExpiry).
func expireLeases(ctx context.Context, tx *sql.Tx, now int64) (int64, error) {
	// The state is a literal, not a parameter: SQLite uses a partial index
	// (jobs_leases, WHERE state = 3) only when the query's WHERE implies it.
	r, err := tx.ExecContext(ctx, `UPDATE jobs SET
  state = CASE WHEN attempts >= max_attempts THEN ? ELSE ? END,
  finalized_at = CASE WHEN attempts >= max_attempts THEN ? ELSE NULL END,
  last_error = CASE WHEN attempts >= max_attempts THEN ? ELSE last_error END,
  run_at = ?, lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
 WHERE state = `+stateReserved+` AND lease_expires_at <= ?`,
		int(store.JobStateDead), int(store.JobStateAvailable), now, storerule.LeaseExpiredError, now, now)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// Reserve implements store.Worker.
func (s *Store) Reserve(ctx context.Context, p *store.ReserveParams) ([]store.ReservedJob, error) {
	now := p.Now.UnixMicro()
	expires := p.Now.Add(p.Lease).UnixMicro()
	var out []store.ReservedJob
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = out[:0]
		if _, err := expireLeases(ctx, tx, now); err != nil {
			return err
		}
		ids, err := readyJobs(ctx, tx, p.Queues, p.Max, now)
		if err != nil {
			return err
		}
		order := make(map[store.JobID]int, len(ids))
		for i, id := range ids {
			order[id] = i
		}
		// One lease token for the whole call: a lease is the pair (job id,
		// token), and a redelivery draws a new token, so sharing it among
		// the jobs leased together fences exactly as well, with one UPDATE.
		var token store.LeaseToken
		rand.Read(token[:])
		for _, n := range chunks(len(ids), maxRowsPerStatement) {
			st, err := s.stmts.get(ctx, tx, reserveJobsSQL(n))
			if err != nil {
				return err
			}
			args := make([]any, 0, 4+n)
			args = append(args, int(store.JobStateReserved), token[:], expires, p.WorkerID)
			for _, id := range ids[:n] {
				args = append(args, id[:])
			}
			ids = ids[n:]
			rows, err := st.QueryContext(ctx, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				j, err := scanJob(rows)
				if err != nil {
					rows.Close()
					return err
				}
				out = append(out, store.ReservedJob{Job: j, LeaseToken: token, LeaseExpiresAt: time.UnixMicro(expires).UTC()})
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		// RETURNING gives no order; deliver in the order readyJobs chose.
		slices.SortStableFunc(out, func(a, b store.ReservedJob) int { return order[a.Job.ID] - order[b.Job.ID] })
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func reserveJobsSQL(n int) string {
	return `UPDATE jobs SET state = ?, attempts = attempts + 1, lease_token = ?, lease_expires_at = ?, worker_id = ?
 WHERE id IN (` + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `) RETURNING ` + jobColumns
}

// readyJobs returns the ids of up to max deliverable jobs of the unpaused
// queues among queues, best first: each queue's best via the jobs_ready
// index, then merged.
func readyJobs(ctx context.Context, tx *sql.Tx, queues []string, max int, now int64) ([]store.JobID, error) {
	type cand struct {
		id       store.JobID
		priority int32
		runAt    int64
	}
	var all []cand
	for _, q := range queues {
		// Literal states, so the partial index jobs_ready applies.
		rows, err := tx.QueryContext(ctx, `SELECT id, priority, run_at FROM jobs
 WHERE queue = ? AND state IN (`+stateScheduled+`, `+stateAvailable+`) AND run_at <= ?
   AND NOT EXISTS (SELECT 1 FROM queues WHERE name = ? AND paused = 1)
 ORDER BY priority DESC, run_at, id LIMIT ?`,
			q, now, q, max)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var c cand
			var id []byte
			if err := rows.Scan(&id, &c.priority, &c.runAt); err != nil {
				rows.Close()
				return nil, err
			}
			copy(c.id[:], id)
			all = append(all, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	if len(queues) > 1 {
		slices.SortFunc(all, func(a, b cand) int {
			return storerule.DeliveryOrder(a.priority, a.runAt, a.id, b.priority, b.runAt, b.id)
		})
	}
	ids := make([]store.JobID, 0, min(len(all), max))
	for _, c := range all[:min(len(all), max)] {
		ids = append(ids, c.id)
	}
	return ids, nil
}

// holdsLease checks, inside tx, that token holds the lease of job id at now.
func holdsLease(ctx context.Context, tx *sql.Tx, id store.JobID, token store.LeaseToken, now int64) error {
	var stored []byte
	var expires sql.NullInt64
	var state int
	err := tx.QueryRowContext(ctx, `SELECT state, lease_token, lease_expires_at FROM jobs WHERE id = ?`, id[:]).
		Scan(&state, &stored, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return logicalError{store.ErrLeaseLost}
	}
	if err != nil {
		return err
	}
	if store.JobState(state) != store.JobStateReserved || string(stored) != string(token[:]) ||
		!expires.Valid || expires.Int64 <= now {
		return logicalError{store.ErrLeaseLost}
	}
	return nil
}

// Complete implements store.Worker. One conditional UPDATE per job both
// checks the lease and finishes the job: a stale token matches no row. The
// token stays on the completed row, so a retried Complete can be told from a
// stale one.
func (s *Store) Complete(ctx context.Context, p *store.CompleteParams) ([]store.CompleteResult, error) {
	now := p.Now.UnixMicro()
	out := make([]store.CompleteResult, len(p.Jobs))
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		st, err := s.stmts.get(ctx, tx, completeSQL)
		if err != nil {
			return err
		}
		for i, j := range p.Jobs {
			r, err := st.ExecContext(ctx, int(store.JobStateCompleted), now, j.Result, j.ID[:], int(store.JobStateReserved), j.LeaseToken[:], now)
			if err != nil {
				return err
			}
			out[i] = store.CompleteResult{}
			if n, _ := r.RowsAffected(); n == 0 {
				out[i], err = completedBefore(ctx, tx, j)
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const completeSQL = `UPDATE jobs SET state = ?, finalized_at = ?, result = ?, lease_expires_at = NULL
 WHERE id = ? AND state = ? AND lease_token = ? AND lease_expires_at > ?`

// completedBefore judges a Complete that matched no reserved row: the token
// that completed the job is a retry, any other is stale.
func completedBefore(ctx context.Context, tx *sql.Tx, j store.CompletedJob) (store.CompleteResult, error) {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM jobs WHERE id = ? AND state = ? AND lease_token = ?`,
		j.ID[:], int(store.JobStateCompleted), j.LeaseToken[:]).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.CompleteResult{Err: store.ErrLeaseLost}, nil
	case err != nil:
		return store.CompleteResult{}, err
	}
	return store.CompleteResult{AlreadyCompleted: true}, nil
}

// Fail implements store.Worker. The token stays on the failed row, so a
// retried Fail can be told from a stale one.
func (s *Store) Fail(ctx context.Context, p *store.FailParams) (*store.FailResult, error) {
	now := p.Now.UnixMicro()
	res := &store.FailResult{}
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := holdsLease(ctx, tx, p.ID, p.LeaseToken, now); err != nil {
			if errors.Is(err, store.ErrLeaseLost) {
				return failedBefore(ctx, tx, p, res)
			}
			return err
		}
		var attempts, maxAttempts int32
		var queue string
		if err := tx.QueryRowContext(ctx, `SELECT queue, attempts, max_attempts FROM jobs WHERE id = ?`, p.ID[:]).
			Scan(&queue, &attempts, &maxAttempts); err != nil {
			return err
		}
		state, runAt := storerule.AfterFail(p, queue, attempts, maxAttempts)
		if state == store.JobStateDead {
			*res = store.FailResult{State: store.JobStateDead}
			_, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, finalized_at = ?, last_error = ?,
 lease_expires_at = NULL WHERE id = ?`, int(store.JobStateDead), now, p.Error, p.ID[:])
			return err
		}
		*res = store.FailResult{State: store.JobStateScheduled, NextRunAt: time.UnixMicro(runAt).UTC()}
		_, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, run_at = ?, last_error = ?,
 lease_expires_at = NULL, worker_id = NULL WHERE id = ?`, int(store.JobStateScheduled), runAt, p.Error, p.ID[:])
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// failedBefore judges a Fail whose token holds no lease: when that token's
// Fail was committed (the job waits for its retry, or is dead, still under
// this token) it is a retry and gets the job's state now; otherwise the
// token is stale.
func failedBefore(ctx context.Context, tx *sql.Tx, p *store.FailParams, res *store.FailResult) error {
	var state int
	var runAt int64
	err := tx.QueryRowContext(ctx, `SELECT state, run_at FROM jobs WHERE id = ? AND lease_token = ?`,
		p.ID[:], p.LeaseToken[:]).Scan(&state, &runAt)
	if errors.Is(err, sql.ErrNoRows) {
		return logicalError{store.ErrLeaseLost}
	}
	if err != nil {
		return err
	}
	repeat, ok := storerule.RepeatedFail(store.JobState(state), runAt)
	if !ok {
		return logicalError{store.ErrLeaseLost}
	}
	*res = repeat
	return nil
}

// ExtendLease implements store.Worker.
func (s *Store) ExtendLease(ctx context.Context, p *store.ExtendLeaseParams) (time.Time, error) {
	now := p.Now.UnixMicro()
	expires := p.Now.Add(p.Lease).UnixMicro()
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := holdsLease(ctx, tx, p.ID, p.LeaseToken, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE jobs SET lease_expires_at = ? WHERE id = ?`, expires, p.ID[:])
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMicro(expires).UTC(), nil
}
