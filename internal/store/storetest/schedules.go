package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// testScheduleStateMonotonic checks the promise of store.Schedules that the
// scheduler relies on to fire each tick once (docs/schedules.md): a
// schedule starts once, at the first node's time; its last tick only rises,
// whatever order advances arrive in; and every name has its own state.
func testScheduleStateMonotonic(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.GetSchedule(ctx, &store.GetScheduleParams{Name: "nightly"}); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Fatalf("GetSchedule of a schedule never started: %v, want ErrScheduleNotFound", err)
	}
	st, err := s.StartSchedule(ctx, &store.StartScheduleParams{Name: "nightly", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if !st.StartedAt.Equal(t0) || !st.LastTick.IsZero() {
		t.Fatalf("started: %+v, want StartedAt %v and no last tick", st, t0)
	}
	// A second node starting later keeps the first node's start.
	st, err = s.StartSchedule(ctx, &store.StartScheduleParams{Name: "nightly", Now: t0.Add(time.Hour)})
	if err != nil || !st.StartedAt.Equal(t0) {
		t.Fatalf("second start: %+v, %v; want StartedAt %v", st, err, t0)
	}

	tick := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	advance := func(name string, at time.Time) *store.ScheduleState {
		t.Helper()
		st, err := s.AdvanceSchedule(ctx, &store.AdvanceScheduleParams{Name: name, Tick: at})
		if err != nil {
			t.Fatalf("AdvanceSchedule(%s, %v): %v", name, at, err)
		}
		return st
	}
	if st := advance("nightly", tick(2)); !st.LastTick.Equal(tick(2)) {
		t.Fatalf("after advancing to tick 2: %+v", st)
	}
	if st := advance("nightly", tick(1)); !st.LastTick.Equal(tick(2)) {
		t.Fatalf("advancing back to tick 1 moved the last tick: %+v", st)
	}
	if st := advance("nightly", tick(2)); !st.LastTick.Equal(tick(2)) {
		t.Fatalf("advancing to the same tick: %+v", st)
	}
	st, err = s.GetSchedule(ctx, &store.GetScheduleParams{Name: "nightly"})
	if err != nil || !st.LastTick.Equal(tick(2)) || !st.StartedAt.Equal(t0) || st.Name != "nightly" {
		t.Fatalf("GetSchedule: %+v, %v", st, err)
	}

	// Another name is its own: advancing one never started starts it.
	if st := advance("hourly", tick(5)); !st.LastTick.Equal(tick(5)) || !st.StartedAt.Equal(tick(5)) {
		t.Fatalf("first advance of another schedule: %+v", st)
	}
	if st, _ := s.GetSchedule(ctx, &store.GetScheduleParams{Name: "nightly"}); !st.LastTick.Equal(tick(2)) {
		t.Fatalf("advancing hourly moved nightly: %+v", st)
	}

	// Nodes advancing at once, in any order, leave the greatest tick.
	var wg sync.WaitGroup
	for i := 30; i > 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.AdvanceSchedule(ctx, &store.AdvanceScheduleParams{Name: "nightly", Tick: tick(i)}); err != nil {
				t.Errorf("concurrent advance to tick %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if st, _ := s.GetSchedule(ctx, &store.GetScheduleParams{Name: "nightly"}); !st.LastTick.Equal(tick(30)) {
		t.Fatalf("after concurrent advances: %+v, want last tick %v", st, tick(30))
	}
}
