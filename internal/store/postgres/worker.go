package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// expireLeases releases every lease that ended at or before now. Row locks
// make concurrent sweeps on several nodes release each lease once. The
// queues of the jobs it makes deliverable again (not those it dead-letters)
// are announced inside tx, one pg_notify per queue, so that other nodes'
// waiting Reserve calls hear of them at once: whichever transaction
// releases a lease (a Sweep, or a Reserve of any queue) is the only one
// that could. It returns the number of leases released and the queues of
// the dedup records it deleted, one entry a record.
func expireLeases(ctx context.Context, tx pgx.Tx, now int64) (int64, []string, error) {
	var n int64
	var queues, freed []string
	// A job dead-lettered here releases its dedup record as releasing says.
	err := tx.QueryRow(ctx, fmt.Sprintf(`WITH released AS (UPDATE sepp_jobs SET
  state = CASE WHEN attempts >= max_attempts THEN 5 ELSE 2 END,
  finalized_at = CASE WHEN attempts >= max_attempts THEN $1 ELSE NULL END,
  last_error = CASE WHEN attempts >= max_attempts THEN $2 ELSE last_error END,
  run_at = $1, lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
 WHERE state = 3 AND lease_expires_at <= $1
 RETURNING id, queue, state, idempotency_key, release_key_on),
 freed AS (DELETE FROM sepp_dedup d USING released r
  WHERE r.state = 5 AND r.release_key_on & %d <> 0 AND d.queue = r.queue AND d.key = r.idempotency_key AND d.job_id = r.id
  RETURNING d.queue)
SELECT count(*), coalesce(array_agg(DISTINCT queue) FILTER (WHERE state = 2), '{}'),
 (SELECT coalesce(array_agg(queue), '{}') FROM freed) FROM released`, store.ReleaseOnDead),
		now, storerule.LeaseExpiredError).Scan(&n, &queues, &freed)
	if err != nil {
		return 0, nil, err
	}
	return n, freed, notifyJobs(ctx, tx, queues...)
}

// Reserve implements store.Worker: FOR UPDATE SKIP LOCKED hands each job to
// one node's caller even when several nodes reserve at once. A job of a
// concurrency key without a slot, or of a rate key, is picked but not
// leased by the first statement; gate then gives it a slot and a place in
// its rate window, or sets it waiting, and Reserve picks again until Max
// are leased or none was set aside.
func (s *Store) Reserve(ctx context.Context, p *store.ReserveParams) ([]store.ReservedJob, error) {
	now := micros(p.Now)
	expires := micros(p.Now.Add(p.Lease))
	var token store.LeaseToken
	rand.Read(token[:])
	var out []store.ReservedJob
	var freed []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		var err error
		if _, freed, err = expireLeases(ctx, tx, now); err != nil {
			return err
		}
		if err := fireRateTimers(ctx, tx, p, now); err != nil {
			return err
		}
		for waited := true; waited && len(out) < p.Max; {
			var gated []gatedJob
			if out, gated, err = reservePick(ctx, tx, p, out, token, now, expires); err != nil {
				return err
			}
			if len(gated) == 0 {
				break
			}
			if out, waited, err = gate(ctx, tx, p, out, gated, token, now, expires); err != nil {
				return err
			}
		}
		if len(out) == 0 && p.WakeAt != nil {
			// Nothing to deliver: a waiting Reserve on this node looks
			// again when the first rate window of its queues has room,
			// whichever node held the jobs.
			return rateWakes(ctx, tx, p)
		}
		return nil
	})
	if err != nil {
		return nil, translate(ctx, err)
	}
	s.keysReleased(freed)
	// RETURNING gives no order: deliver best first.
	slices.SortFunc(out, func(a, b store.ReservedJob) int {
		return storerule.DeliveryOrder(a.Job.Priority, micros(a.Job.RunAt), a.Job.ID, b.Job.Priority, micros(b.Job.RunAt), b.Job.ID)
	})
	return out, nil
}

// reservePick picks the best Max - len(out) ready jobs, leases those that
// need no slot (appending them to out) and returns, locked, the others.
func reservePick(ctx context.Context, tx pgx.Tx, p *store.ReserveParams, out []store.ReservedJob, token store.LeaseToken, now, expires int64) ([]store.ReservedJob, []gatedJob, error) {
	// One queue (the common case) is compared with =, so PostgreSQL
	// walks sepp_jobs_ready in delivery order and stops at the LIMIT;
	// with = ANY it sorted every ready job of the queue on each call.
	queueMatch := "queue = ANY($1)"
	var queues any = p.Queues
	if len(p.Queues) == 1 {
		queueMatch, queues = "queue = $1", p.Queues[0]
	}
	// A gated job is updated to what it was, so that one statement both
	// leases the others and returns it.
	rows, err := tx.Query(ctx, `WITH picked AS (
  SELECT id, (ckey IS NOT NULL AND NOT slot) OR rkey IS NOT NULL AS gated FROM sepp_jobs
   WHERE `+queueMatch+` AND state IN (1, 2) AND follows IS NULL AND NOT waiting AND NOT rwaiting AND run_at <= $2
     AND queue NOT IN (SELECT name FROM sepp_queues WHERE paused)
   ORDER BY priority DESC, run_at, id
   LIMIT $3 FOR UPDATE SKIP LOCKED)
 UPDATE sepp_jobs j SET state = CASE WHEN gated THEN j.state ELSE 3 END,
  attempts = CASE WHEN gated THEN j.attempts ELSE j.attempts + 1 END,
  lease_token = CASE WHEN gated THEN j.lease_token ELSE $4 END,
  lease_expires_at = CASE WHEN gated THEN j.lease_expires_at ELSE $5 END,
  worker_id = CASE WHEN gated THEN j.worker_id ELSE $6 END
 FROM picked WHERE j.id = picked.id
 RETURNING j.id, j.queue, j.job_type, j.payload, j.idempotency_key, j.priority, j.run_at, j.max_attempts, j.attempts,
  j.headers, j.state, j.created_at, j.finalized_at, j.result, j.last_error, j.follows, j.ckey, j.waiting, j.rkey, j.rwaiting,
  j.rfrees_at, picked.gated, j.climit, j.slot, j.rlimit, j.rperiod`,
		queues, now, p.Max-len(out), token[:], expires, p.WorkerID)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var gated []gatedJob
	for rows.Next() {
		var isGated, slot bool
		var climit, rlimit *int32
		var rperiod *int64
		j, err := scanJob(rows, &isGated, &climit, &slot, &rlimit, &rperiod)
		if err != nil {
			return nil, nil, err
		}
		if isGated {
			g := gatedJob{id: j.ID, queue: j.Queue, priority: j.Priority, runAt: micros(j.RunAt)}
			if j.HasConcurrency && !slot {
				g.conc = &store.ConcurrencyKey{Key: j.ConcurrencyKey, Limit: int(*climit)}
			}
			if j.HasRate {
				g.rate = &store.RateKey{Key: j.RateKey, Limit: int(*rlimit), Period: time.Duration(*rperiod) * time.Microsecond}
			}
			gated = append(gated, g)
			continue
		}
		out = append(out, store.ReservedJob{Job: j, LeaseToken: token, LeaseExpiresAt: fromMicros(expires)})
	}
	return out, gated, rows.Err()
}

const leaseHeld = `id = $1 AND state = 3 AND lease_token = $2 AND lease_expires_at > $3`

var (
	completeSQL = releasing(`UPDATE sepp_jobs SET state = 4, finalized_at = $3, result = $4,
 lease_expires_at = NULL WHERE `+leaseHeld, store.ReleaseOnCompleted)
	deadSQL = releasing(`UPDATE sepp_jobs SET state = 5, finalized_at = $2, last_error = $3,
 lease_expires_at = NULL WHERE id = $1`, store.ReleaseOnDead)
)

// Complete implements store.Worker. The token stays on the completed row, so
// a retried Complete can be told from a stale one.
func (s *Store) Complete(ctx context.Context, p *store.CompleteParams) ([]store.CompleteResult, error) {
	now := micros(p.Now)
	out := make([]store.CompleteResult, len(p.Jobs))
	var freed []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		freed = freed[:0]
		for i, j := range p.Jobs {
			var n int64
			var f []string
			if err := tx.QueryRow(ctx, completeSQL, pgID(j.ID), j.LeaseToken[:], now, j.Result).Scan(&n, &f); err != nil {
				return err
			}
			freed = append(freed, f...)
			out[i] = store.CompleteResult{}
			if n > 0 {
				continue
			}
			// The token that completed the job is a retry; any other is stale.
			var one int
			err := tx.QueryRow(ctx, `SELECT 1 FROM sepp_jobs WHERE id = $1 AND state = 4 AND lease_token = $2`,
				pgID(j.ID), j.LeaseToken[:]).Scan(&one)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				out[i].Err = store.ErrLeaseLost
			case err != nil:
				return err
			default:
				out[i].AlreadyCompleted = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, translate(ctx, err)
	}
	s.keysReleased(freed)
	return out, nil
}

// Fail implements store.Worker. The token stays on the failed row, so a
// retried Fail can be told from a stale one.
func (s *Store) Fail(ctx context.Context, p *store.FailParams) (*store.FailResult, error) {
	now := micros(p.Now)
	res := &store.FailResult{}
	var freed []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		freed = nil
		var queue string
		var attempts, maxAttempts int32
		err := tx.QueryRow(ctx, `SELECT queue, attempts, max_attempts FROM sepp_jobs WHERE `+leaseHeld+` FOR UPDATE`,
			pgID(p.ID), p.LeaseToken[:], now).Scan(&queue, &attempts, &maxAttempts)
		if errors.Is(err, pgx.ErrNoRows) {
			return failedBefore(ctx, tx, p, res)
		}
		if err != nil {
			return err
		}
		state, runAt := storerule.AfterFail(p, queue, attempts, maxAttempts)
		if state == store.JobStateDead {
			*res = store.FailResult{State: store.JobStateDead}
			var n int64
			return tx.QueryRow(ctx, deadSQL, pgID(p.ID), now, p.Error).Scan(&n, &freed)
		}
		*res = store.FailResult{State: store.JobStateScheduled, NextRunAt: fromMicros(runAt)}
		if _, err := tx.Exec(ctx, `UPDATE sepp_jobs SET state = 1, run_at = $2, last_error = $3,
 lease_expires_at = NULL, worker_id = NULL WHERE id = $1`, pgID(p.ID), runAt, p.Error); err != nil {
			return err
		}
		// A retry due now is deliverable at once: tell the other nodes, as
		// an enqueue does. A later one is not announced; the failing
		// node's wake-up hub has a timer for it, and the other nodes find
		// it at their safety re-check (internal/server/worker.go).
		if runAt <= now {
			return notifyJobs(ctx, tx, queue)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			return nil, err
		}
		return nil, translate(ctx, err)
	}
	s.keysReleased(freed)
	return res, nil
}

// failedBefore judges a Fail whose token holds no lease: when that token's
// Fail was committed (the job waits for its retry, or is dead, still under
// this token) it is a retry and gets the job's state now; otherwise the
// token is stale.
func failedBefore(ctx context.Context, tx pgx.Tx, p *store.FailParams, res *store.FailResult) error {
	var state int16
	var runAt int64
	err := tx.QueryRow(ctx, `SELECT state, run_at FROM sepp_jobs WHERE id = $1 AND lease_token = $2`,
		pgID(p.ID), p.LeaseToken[:]).Scan(&state, &runAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrLeaseLost
	}
	if err != nil {
		return err
	}
	repeat, ok := storerule.RepeatedFail(store.JobState(state), runAt)
	if !ok {
		return store.ErrLeaseLost
	}
	*res = repeat
	return nil
}

// ExtendLease implements store.Worker.
func (s *Store) ExtendLease(ctx context.Context, p *store.ExtendLeaseParams) (time.Time, error) {
	now := micros(p.Now)
	expires := micros(p.Now.Add(p.Lease))
	t, err := s.pool.Exec(ctx, `UPDATE sepp_jobs SET lease_expires_at = $4 WHERE `+leaseHeld,
		pgID(p.ID), p.LeaseToken[:], now, expires)
	if err != nil {
		return time.Time{}, translate(ctx, err)
	}
	if t.RowsAffected() == 0 {
		return time.Time{}, store.ErrLeaseLost
	}
	return fromMicros(expires), nil
}
