package pebble

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sepp-dev/sepp/internal/store"
)

// A schedule's state is 17 bytes: a flag byte (1: LastTick is set), then
// StartedAt and LastTick in microseconds, each as appendInt64 writes it.
const scheduleValueLen = 17

func encodeSchedule(st *store.ScheduleState) []byte {
	b := make([]byte, 1, scheduleValueLen)
	if !st.LastTick.IsZero() {
		b[0] = 1
	}
	b = appendInt64(b, st.StartedAt.UnixMicro())
	return appendInt64(b, st.LastTick.UnixMicro())
}

func decodeSchedule(name string, v []byte) (*store.ScheduleState, error) {
	if len(v) != scheduleValueLen {
		return nil, fmt.Errorf("pebble: schedule %q: stored state is %d bytes, want %d", name, len(v), scheduleValueLen)
	}
	st := &store.ScheduleState{Name: name, StartedAt: time.UnixMicro(readInt64(v[1:])).UTC()}
	if v[0] == 1 {
		st.LastTick = time.UnixMicro(readInt64(v[9:])).UTC()
	}
	return st, nil
}

// getSchedule reads a schedule's state from r (the database or a batch);
// nil when absent.
func getSchedule(r pebble.Reader, name string) (*store.ScheduleState, error) {
	v, ok, err := get(r, scheduleKey(name))
	if err != nil || !ok {
		return nil, err
	}
	return decodeSchedule(name, v)
}

// StartSchedule implements store.Schedules.
func (s *Store) StartSchedule(ctx context.Context, p *store.StartScheduleParams) (*store.ScheduleState, error) {
	var out *store.ScheduleState
	err := s.submit(ctx, func(t *tx) error {
		st, err := getSchedule(t.b, p.Name)
		if err != nil || st != nil {
			out = st
			return err
		}
		out = &store.ScheduleState{Name: p.Name, StartedAt: p.Now.UTC().Truncate(time.Microsecond)}
		return t.set(scheduleKey(p.Name), encodeSchedule(out))
	})
	return out, err
}

// GetSchedule implements store.Schedules.
func (s *Store) GetSchedule(_ context.Context, p *store.GetScheduleParams) (*store.ScheduleState, error) {
	var out *store.ScheduleState
	err := s.read(func(db *pebble.DB) error {
		st, err := getSchedule(db, p.Name)
		if err == nil && st == nil {
			err = store.ErrScheduleNotFound
		}
		out = st
		return err
	})
	return out, err
}

// AdvanceSchedule implements store.Schedules. The read and the write are in
// one batch of the single writer, so two nodes' advances (here: two
// requests of one process) cannot interleave and lower the tick.
func (s *Store) AdvanceSchedule(ctx context.Context, p *store.AdvanceScheduleParams) (*store.ScheduleState, error) {
	tick := p.Tick.UTC().Truncate(time.Microsecond)
	var out *store.ScheduleState
	err := s.submit(ctx, func(t *tx) error {
		st, err := getSchedule(t.b, p.Name)
		if err != nil {
			return err
		}
		if st == nil {
			st = &store.ScheduleState{Name: p.Name, StartedAt: tick}
		}
		out = st
		if !st.LastTick.IsZero() && !tick.After(st.LastTick) {
			return nil
		}
		st.LastTick = tick
		return t.set(scheduleKey(p.Name), encodeSchedule(st))
	})
	return out, err
}
