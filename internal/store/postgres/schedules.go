package postgres

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp/internal/store"
)

func scheduleState(name string, startedAt int64, lastTick sql.NullInt64) *store.ScheduleState {
	st := &store.ScheduleState{Name: name, StartedAt: time.UnixMicro(startedAt).UTC()}
	if lastTick.Valid {
		st.LastTick = time.UnixMicro(lastTick.Int64).UTC()
	}
	return st
}

// StartSchedule implements store.Schedules. The no-op update makes
// RETURNING give the stored row when it exists, in one statement.
func (s *Store) StartSchedule(ctx context.Context, p *store.StartScheduleParams) (*store.ScheduleState, error) {
	var started int64
	var last sql.NullInt64
	err := s.pool.QueryRow(ctx, `INSERT INTO sepp_schedules (name, started_at) VALUES ($1, $2)
 ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
 RETURNING started_at, last_tick`, p.Name, p.Now.UnixMicro()).Scan(&started, &last)
	if err != nil {
		return nil, translate(ctx, err)
	}
	return scheduleState(p.Name, started, last), nil
}

// GetSchedule implements store.Schedules.
func (s *Store) GetSchedule(ctx context.Context, p *store.GetScheduleParams) (*store.ScheduleState, error) {
	var started int64
	var last sql.NullInt64
	err := s.pool.QueryRow(ctx, `SELECT started_at, last_tick FROM sepp_schedules WHERE name = $1`, p.Name).Scan(&started, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrScheduleNotFound
	}
	if err != nil {
		return nil, translate(ctx, err)
	}
	return scheduleState(p.Name, started, last), nil
}

// AdvanceSchedule implements store.Schedules. GREATEST keeps last_tick from
// moving back when a node that computed with an older state commits after
// one that went further (GREATEST ignores the NULL of a first advance).
func (s *Store) AdvanceSchedule(ctx context.Context, p *store.AdvanceScheduleParams) (*store.ScheduleState, error) {
	var started int64
	var last sql.NullInt64
	tick := p.Tick.UnixMicro()
	err := s.pool.QueryRow(ctx, `INSERT INTO sepp_schedules (name, started_at, last_tick) VALUES ($1, $2, $2)
 ON CONFLICT (name) DO UPDATE SET last_tick = GREATEST(sepp_schedules.last_tick, EXCLUDED.last_tick)
 RETURNING started_at, last_tick`, p.Name, tick).Scan(&started, &last)
	if err != nil {
		return nil, translate(ctx, err)
	}
	return scheduleState(p.Name, started, last), nil
}
