package server

import (
	"context"
	"errors"

	"google.golang.org/protobuf/types/known/timestamppb"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/schedule"
	"github.com/sepp-dev/sepp/internal/store"
)

// scheduleBatch bounds the ticks one enqueue batch carries when a schedule
// with catch_up = "all" catches up (server.max_batch_size bounds it too).
const scheduleBatch = 100

// openSchedules makes a runner per [[schedules]] entry; Serve runs them.
func (s *Server) openSchedules() error {
	rs, err := s.cfg.ResolvedSchedules()
	if err != nil {
		return err
	}
	for _, sc := range rs {
		s.schedules = append(s.schedules, schedule.NewRunner(schedule.Config{
			Name: sc.Name, Cron: sc.Cron, Timezone: sc.Timezone, Spec: sc.Spec,
			Queue: sc.Queue, JobType: sc.JobType, Payload: sc.PayloadData, Headers: sc.Headers,
			CatchUp: sc.CatchUpMode, Batch: min(scheduleBatch, s.cfg.Server.MaxBatchSize),
		}, schedule.Options{Store: s.store, Enqueue: relayEnqueuer{s}, Now: s.now, Local: s.local,
			Log: s.log, Metrics: s.metrics.schedule}))
	}
	return nil
}

// runSchedules runs each schedule's loop on a goroutine of its own until
// Shutdown (the goroutine/owner/stop table of docs/architecture.md).
func (s *Server) runSchedules() {
	loops := make([]func(context.Context), len(s.schedules))
	for i, r := range s.schedules {
		loops[i] = r.Run
		c := r.Config()
		s.log.Info("running schedule", "schedule", c.Name, "cron", c.Cron, "queue", c.Queue, "catch_up", string(c.CatchUp))
	}
	s.runLoops(loops)
}

// ListSchedules reads each schedule's state from the store, which every
// node shares; the last job and error are this node's.
func (a *adminService) ListSchedules(ctx context.Context, _ *seppv1.ListSchedulesRequest) (*seppv1.ListSchedulesResponse, error) {
	res := &seppv1.ListSchedulesResponse{}
	for _, r := range a.s.schedules {
		c, in := r.Config(), r.Info()
		st, err := a.s.store.GetSchedule(ctx, &store.GetScheduleParams{Name: c.Name})
		switch {
		case errors.Is(err, store.ErrScheduleNotFound):
			st = nil // not started yet: this node's loop has not run
		case err != nil:
			return nil, err
		}
		tz := c.Timezone
		if tz == "" {
			tz = "UTC"
		}
		info := &seppv1.ScheduleInfo{Name: c.Name, Cron: c.Cron, Timezone: tz, Queue: c.Queue, JobType: c.JobType,
			CatchUp: string(c.CatchUp), LastJobId: in.LastJobID, LastError: in.LastError}
		if st != nil && !st.LastTick.IsZero() {
			info.LastTick = timestamppb.New(st.LastTick)
		}
		if next := r.NextAfter(st); !next.IsZero() {
			info.NextTick = timestamppb.New(next)
		}
		res.Schedules = append(res.Schedules, info)
	}
	return res, nil
}

// SchedulesIdle reports how many schedules sleep until their next tick,
// having dealt with every tick up to now. A test waits for it before it
// moves the clock.
func (s *Server) SchedulesIdle() int {
	n := 0
	for _, r := range s.schedules {
		if r.Idle() {
			n++
		}
	}
	return n
}
