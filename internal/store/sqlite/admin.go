package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/sepp-dev/sepp/internal/store"
)

// ListQueues implements store.Admin. It scans the jobs and the live dedup
// records once each: an operator's call, not a hot path.
func (s *Store) ListQueues(ctx context.Context, p *store.ListQueuesParams) ([]store.QueueStats, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	now := p.Now.UnixMicro()
	byName := map[string]*store.QueueStats{}
	get := func(name string) *store.QueueStats {
		q := byName[name]
		if q == nil {
			q = &store.QueueStats{Name: name, Counts: map[store.JobState]int64{}}
			byName[name] = q
		}
		return q
	}
	rows, err := s.read.QueryContext(ctx, `SELECT queue,
  CASE WHEN state = ? AND run_at <= ? THEN ? ELSE state END, count(*)
 FROM jobs GROUP BY 1, 2`, int(store.JobStateScheduled), now, int(store.JobStateAvailable))
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		var state int
		var n int64
		if err := rows.Scan(&name, &state, &n); err != nil {
			rows.Close()
			return nil, err
		}
		get(name).Counts[store.JobState(state)] += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := scanEach(ctx, s.read, `SELECT queue, count(*) FROM dedup WHERE expires_at > ? GROUP BY queue`, []any{now},
		func(r *sql.Rows) error {
			var name string
			var n int64
			if err := r.Scan(&name, &n); err != nil {
				return err
			}
			get(name).DedupRecords = n
			return nil
		}); err != nil {
		return nil, err
	}
	if err := scanEach(ctx, s.read, `SELECT name, paused FROM queues`, nil, func(r *sql.Rows) error {
		var name string
		var paused bool
		if err := r.Scan(&name, &paused); err != nil {
			return err
		}
		get(name).Paused = paused
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]store.QueueStats, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	return out, nil
}

func scanEach(ctx context.Context, db *sql.DB, query string, args []any, fn func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, query, args...)
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

// ListJobs implements store.Admin.
func (s *Store) ListJobs(ctx context.Context, p *store.ListJobsParams) ([]*store.Job, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	var where []string
	args := []any{}
	where = append(where, "id > ?")
	args = append(args, p.After[:])
	if p.Queue != "" {
		where = append(where, "queue = ?")
		args = append(args, p.Queue)
	}
	now := p.Now.UnixMicro()
	switch p.State {
	case 0:
	case store.JobStateAvailable:
		where = append(where, "(state = ? OR (state = ? AND run_at <= ?))")
		args = append(args, int(store.JobStateAvailable), int(store.JobStateScheduled), now)
	case store.JobStateScheduled:
		where = append(where, "state = ? AND run_at > ?")
		args = append(args, int(store.JobStateScheduled), now)
	default:
		where = append(where, "state = ?")
		args = append(args, int(p.State))
	}
	args = append(args, p.Limit)
	var out []*store.Job
	err := scanEach(ctx, s.read, `SELECT `+jobColumns+` FROM jobs WHERE `+strings.Join(where, " AND ")+` ORDER BY id LIMIT ?`,
		args, func(r *sql.Rows) error {
			j, err := scanJob(r)
			if err != nil {
				return err
			}
			out = append(out, j)
			return nil
		})
	return out, err
}

// deadSelection is the WHERE clause and arguments of a DeadJobsParams.
func deadSelection(p *store.DeadJobsParams) (string, []any) {
	where := "state = ?"
	args := []any{int(store.JobStateDead)}
	if p.Queue != "" {
		where += " AND queue = ?"
		args = append(args, p.Queue)
	}
	if len(p.IDs) > 0 {
		where += " AND id IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(p.IDs)), ", ") + ")"
		for _, id := range p.IDs {
			args = append(args, id[:])
		}
	}
	return where, args
}

// RequeueDead implements store.Admin.
func (s *Store) RequeueDead(ctx context.Context, p *store.DeadJobsParams) (int, error) {
	var n int64
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		where, args := deadSelection(p)
		r, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, attempts = 0, run_at = ?, finalized_at = NULL,
 lease_token = NULL, lease_expires_at = NULL, worker_id = NULL WHERE `+where,
			append([]any{int(store.JobStateAvailable), p.Now.UnixMicro()}, args...)...)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return int(n), err
}

// PurgeDead implements store.Admin.
func (s *Store) PurgeDead(ctx context.Context, p *store.DeadJobsParams) (int, error) {
	var n int64
	err := s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		where, args := deadSelection(p)
		r, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE `+where, args...)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return int(n), err
}

// SetQueuePaused implements store.Admin.
func (s *Store) SetQueuePaused(ctx context.Context, p *store.SetQueuePausedParams) error {
	return s.submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO queues (name, paused) VALUES (?, ?)
 ON CONFLICT (name) DO UPDATE SET paused = excluded.paused`, p.Queue, p.Paused)
		return err
	})
}
