package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

// ListQueues implements store.Admin.
func (s *Store) ListQueues(ctx context.Context, p *store.ListQueuesParams) ([]store.QueueStats, error) {
	now := micros(p.Now)
	byName := map[string]*store.QueueStats{}
	get := func(name string) *store.QueueStats {
		q := byName[name]
		if q == nil {
			q = &store.QueueStats{Name: name, Counts: map[store.JobState]int64{}, Held: map[store.Hold]int64{}}
			byName[name] = q
		}
		return q
	}
	each := func(query string, args []any, fn func(pgx.Rows) error) error {
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := fn(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	if err := each(`SELECT queue, CASE WHEN state IN (1, 2) AND (follows IS NOT NULL OR waiting OR rwaiting) THEN 1
  WHEN state = 1 AND run_at <= $1 THEN 2 ELSE state END,
 CASE WHEN state NOT IN (1, 2) THEN 0 WHEN follows IS NOT NULL THEN `+fmt.Sprint(int(store.HoldFollowUp))+`
  WHEN waiting THEN `+fmt.Sprint(int(store.HoldConcurrency))+`
  WHEN rwaiting THEN `+fmt.Sprint(int(store.HoldRate))+` ELSE 0 END, count(*)
 FROM sepp_jobs GROUP BY 1, 2, 3`, []any{now}, func(r pgx.Rows) error {
		var name string
		var state, hold int16
		var n int64
		if err := r.Scan(&name, &state, &hold, &n); err != nil {
			return err
		}
		q := get(name)
		q.Counts[store.JobState(state)] += n
		if hold != 0 {
			q.Held[store.Hold(hold)] += n
		}
		return nil
	}); err != nil {
		return nil, translate(ctx, err)
	}
	if err := each(`SELECT queue, count(*) FROM sepp_dedup WHERE expires_at > $1 GROUP BY queue`, []any{now}, func(r pgx.Rows) error {
		var name string
		var n int64
		if err := r.Scan(&name, &n); err != nil {
			return err
		}
		if storerule.IsRuleQueue(name) {
			return nil // a uniqueness rule's records, not a queue
		}
		get(name).DedupRecords = n
		return nil
	}); err != nil {
		return nil, translate(ctx, err)
	}
	if err := each(`SELECT name, paused FROM sepp_queues`, nil, func(r pgx.Rows) error {
		var name string
		var paused bool
		if err := r.Scan(&name, &paused); err != nil {
			return err
		}
		get(name).Paused = paused
		return nil
	}); err != nil {
		return nil, translate(ctx, err)
	}
	out := make([]store.QueueStats, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	return out, nil
}

// ListJobs implements store.Admin.
func (s *Store) ListJobs(ctx context.Context, p *store.ListJobsParams) ([]*store.Job, error) {
	args := []any{pgID(p.After)}
	where := []string{"id > $1"}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprint("$", len(args))
	}
	if p.Queue != "" {
		where = append(where, "queue = "+arg(p.Queue))
	}
	now := micros(p.Now)
	switch p.State {
	case 0:
	case store.JobStateAvailable:
		where = append(where, "(state = 2 OR (state = 1 AND run_at <= "+arg(now)+")) AND follows IS NULL AND NOT waiting AND NOT rwaiting")
	case store.JobStateScheduled:
		where = append(where, "((state = 1 AND run_at > "+arg(now)+") OR (state IN (1, 2) AND (follows IS NOT NULL OR waiting OR rwaiting)))")
	default:
		where = append(where, "state = "+arg(int16(p.State)))
	}
	rows, err := s.pool.Query(ctx, `SELECT `+jobColumns+` FROM sepp_jobs WHERE `+strings.Join(where, " AND ")+
		` ORDER BY id LIMIT `+arg(p.Limit), args...)
	if err != nil {
		return nil, translate(ctx, err)
	}
	defer rows.Close()
	var out []*store.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, translate(ctx, rows.Err())
}

// deadSelection is the WHERE clause of a DeadJobsParams, its arguments
// numbered from first.
func deadSelection(p *store.DeadJobsParams, first int) (string, []any) {
	where := "state = 5"
	var args []any
	if p.Queue != "" {
		args = append(args, p.Queue)
		where += fmt.Sprint(" AND queue = $", first+len(args)-1)
	}
	if len(p.IDs) > 0 {
		ids := make([]pgtype.UUID, len(p.IDs))
		for i, id := range p.IDs {
			ids[i] = pgID(id)
		}
		args = append(args, ids)
		where += fmt.Sprint(" AND id = ANY($", first+len(args)-1, ")")
	}
	return where, args
}

// RequeueDead implements store.Admin.
func (s *Store) RequeueDead(ctx context.Context, p *store.DeadJobsParams) (store.DeadJobsResult, error) {
	where, args := deadSelection(p, 2)
	var res store.DeadJobsResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = store.DeadJobsResult{}
		rows, err := tx.Query(ctx, `UPDATE sepp_jobs SET state = 2, attempts = 0, run_at = $1, finalized_at = NULL,
 lease_token = NULL, lease_expires_at = NULL, worker_id = NULL WHERE `+where+` RETURNING queue, id`,
			append([]any{micros(p.Now)}, args...)...)
		if err != nil {
			return err
		}
		queues := map[string]bool{}
		done := map[store.JobID]bool{}
		for rows.Next() {
			var q string
			var id pgtype.UUID
			if err := rows.Scan(&q, &id); err != nil {
				rows.Close()
				return err
			}
			queues[q] = true
			done[store.JobID(id.Bytes)] = true
			res.N++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		res.NotDead = storerule.NotDead(p.IDs, done)
		for q := range queues {
			if err := notifyJobs(ctx, tx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return store.DeadJobsResult{}, translate(ctx, err)
	}
	return res, nil
}

// PurgeDead implements store.Admin.
func (s *Store) PurgeDead(ctx context.Context, p *store.DeadJobsParams) (store.DeadJobsResult, error) {
	where, args := deadSelection(p, 1)
	if len(p.IDs) == 0 {
		t, err := s.pool.Exec(ctx, `DELETE FROM sepp_jobs WHERE `+where, args...)
		if err != nil {
			return store.DeadJobsResult{}, translate(ctx, err)
		}
		return store.DeadJobsResult{N: int(t.RowsAffected())}, nil
	}
	rows, err := s.pool.Query(ctx, `DELETE FROM sepp_jobs WHERE `+where+` RETURNING id`, args...)
	if err != nil {
		return store.DeadJobsResult{}, translate(ctx, err)
	}
	defer rows.Close()
	var res store.DeadJobsResult
	done := map[store.JobID]bool{}
	for rows.Next() {
		var id pgtype.UUID
		if err := rows.Scan(&id); err != nil {
			return store.DeadJobsResult{}, translate(ctx, err)
		}
		done[store.JobID(id.Bytes)] = true
		res.N++
	}
	if err := rows.Err(); err != nil {
		return store.DeadJobsResult{}, translate(ctx, err)
	}
	res.NotDead = storerule.NotDead(p.IDs, done)
	return res, nil
}

// SetQueuePaused implements store.Admin.
func (s *Store) SetQueuePaused(ctx context.Context, p *store.SetQueuePausedParams) error {
	return translate(ctx, pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO sepp_queues (name, paused) VALUES ($1, $2)
 ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused`, p.Queue, p.Paused); err != nil {
			return err
		}
		if !p.Paused {
			return notifyJobs(ctx, tx, p.Queue)
		}
		return nil
	}))
}
