package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// scheduleConfig is one schedule ticking every 10 s on queue "ticks".
func scheduleConfig(catchUp string) string {
	return fmt.Sprintf("[[schedules]]\nname = \"tick\"\ncron = \"@every 10s\"\nqueue = \"ticks\"\njob_type = \"tick\"\npayload = \"p\"\ncatch_up = %q\n", catchUp)
}

// t0 is the test servers' clock at start, a multiple of 10 s: the first
// tick after it is t0 + 10 s.
var scheduleT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func tickAt(i int) time.Time { return scheduleT0.Add(time.Duration(i) * 10 * time.Second) }

// tickKeys lists the idempotency keys of the jobs on queue "ticks", sorted.
func tickKeys(t *testing.T, srv *testserver.Server) []string {
	t.Helper()
	admin := seppv1connect.NewAdminServiceClient(http.DefaultClient, srv.URL)
	res, err := admin.ListJobs(context.Background(), &seppv1.ListJobsRequest{Queue: "ticks", PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, j := range res.GetJobs() {
		keys = append(keys, j.GetIdempotencyKey())
	}
	slices.Sort(keys)
	return keys
}

func keysOf(ticks ...int) []string {
	var out []string
	for _, i := range ticks {
		out = append(out, "schedule:tick:"+tickAt(i).Format(time.RFC3339))
	}
	slices.Sort(out)
	return out
}

// awaitIdle waits until the schedule sleeps until its next tick, having
// dealt with every tick up to the clock's time.
func awaitIdle(t *testing.T, srv *testserver.Server) {
	t.Helper()
	testserver.Await(t, "idle schedule", func() bool { return srv.SchedulesIdle() == 1 })
}

// TestScheduleOneJobPerTick moves the test clock over ticks one at a time
// and finds one job per tick, keyed by the tick, and ListSchedules saying
// where the schedule stands.
func TestScheduleOneJobPerTick(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: scheduleConfig("all"), ClockTimers: true})
	awaitIdle(t, srv)
	if keys := tickKeys(t, srv); len(keys) != 0 {
		t.Fatalf("jobs before the first tick: %v", keys)
	}
	for i := 1; i <= 5; i++ {
		srv.Clock.Advance(10 * time.Second)
		testserver.Await(t, fmt.Sprintf("the job of tick %d", i), func() bool { return len(tickKeys(t, srv)) == i })
		awaitIdle(t, srv)
	}
	// Time between ticks fires nothing.
	srv.Clock.Advance(5 * time.Second)
	awaitIdle(t, srv)
	if got, want := tickKeys(t, srv), keysOf(1, 2, 3, 4, 5); !slices.Equal(got, want) {
		t.Fatalf("jobs: %v\nwant %v", got, want)
	}

	admin := seppv1connect.NewAdminServiceClient(http.DefaultClient, srv.URL)
	res, err := admin.ListSchedules(context.Background(), &seppv1.ListSchedulesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GetSchedules()) != 1 {
		t.Fatalf("schedules: %v", res.GetSchedules())
	}
	s := res.GetSchedules()[0]
	if s.GetName() != "tick" || s.GetCron() != "@every 10s" || s.GetTimezone() != "UTC" || s.GetCatchUp() != "all" ||
		!s.GetLastTick().AsTime().Equal(tickAt(5)) || !s.GetNextTick().AsTime().Equal(tickAt(6)) ||
		s.GetLastJobId() == "" || s.GetLastError() != "" {
		t.Fatalf("ListSchedules: %v", s)
	}
	for sample, want := range map[string]float64{
		`sepp_schedule_ticks_total{outcome="created",schedule="tick"}`:   5,
		`sepp_schedule_ticks_total{outcome="duplicate",schedule="tick"}`: 0,
		`sepp_schedule_ticks_total{outcome="skipped",schedule="tick"}`:   0,
		`sepp_schedule_errors_total{schedule="tick"}`:                    0,
	} {
		if v, ok := metricValue(t, http.DefaultClient, srv, sample); !ok || v != want {
			t.Errorf("%s = %v (present: %v), want %v", sample, v, ok, want)
		}
	}
}

// TestScheduleCatchUpAfterRestart stops the node after tick 1, moves the
// clock over ticks 2 to 5 while no node runs, and starts it again: "all"
// fires every missed tick, "last" only tick 5, "none" none of them; every
// policy then fires tick 6 when it comes.
func TestScheduleCatchUpAfterRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		catchUp string
		missed  []int
	}{
		{"all", []int{2, 3, 4, 5}},
		{"last", []int{5}},
		{"none", nil},
	} {
		t.Run(tc.catchUp, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			clk := testserver.NewClock(scheduleT0)
			opts := testserver.Options{Config: scheduleConfig(tc.catchUp), ClockTimers: true, Path: dir, Clock: clk}
			srv := testserver.Start(t, opts)
			awaitIdle(t, srv)
			clk.Advance(10 * time.Second)
			testserver.Await(t, "the job of tick 1", func() bool { return len(tickKeys(t, srv)) == 1 })
			awaitIdle(t, srv)
			srv.Stop()

			clk.Advance(45 * time.Second) // ticks 2 to 5 pass while no node runs
			srv = testserver.Start(t, opts)
			awaitIdle(t, srv)
			want := keysOf(append([]int{1}, tc.missed...)...)
			if got := tickKeys(t, srv); !slices.Equal(got, want) {
				t.Fatalf("after the restart: %v\nwant %v", got, want)
			}
			clk.Advance(5 * time.Second)
			want = keysOf(append(append([]int{1}, tc.missed...), 6)...)
			testserver.Await(t, "the job of tick 6", func() bool { return slices.Equal(tickKeys(t, srv), want) })
			awaitIdle(t, srv)
			if got := tickKeys(t, srv); !slices.Equal(got, want) {
				t.Fatalf("after tick 6: %v\nwant %v", got, want)
			}
		})
	}
}

// unavailableEnqueues is a store whose EnqueueBatch fails, as a database
// that cannot be reached does, while fail is set.
type unavailableEnqueues struct {
	store.Store
	fail atomic.Bool
}

func (u *unavailableEnqueues) EnqueueBatch(ctx context.Context, p *store.EnqueueBatchParams) ([]store.EnqueueResult, error) {
	if u.fail.Load() {
		return nil, fmt.Errorf("%w: cannot reach PostgreSQL; retry", store.ErrUnavailable)
	}
	return u.Store.EnqueueBatch(ctx, p)
}

// TestScheduleRetriesAFailedTick: a tick whose enqueue fails is retried and
// never skipped, even under catch_up = "none", while the ticks that came
// and went while the store could not be written are, as "none" says; the
// error shows in ListSchedules and the metrics until a tick fires again.
func TestScheduleRetriesAFailedTick(t *testing.T) {
	t.Parallel()
	u := &unavailableEnqueues{}
	srv := testserver.Start(t, testserver.Options{Config: scheduleConfig("none"), ClockTimers: true,
		WrapStore: func(s store.Store) store.Store { u.Store = s; return u }})
	admin := seppv1connect.NewAdminServiceClient(http.DefaultClient, srv.URL)
	info := func() *seppv1.ScheduleInfo {
		res, err := admin.ListSchedules(context.Background(), &seppv1.ListSchedulesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetSchedules()[0]
	}
	awaitIdle(t, srv)
	u.fail.Store(true)
	srv.Clock.Advance(10 * time.Second) // tick 1 comes; its enqueue fails
	testserver.Await(t, "the failed tick's error", func() bool { return info().GetLastError() != "" })
	if e := info().GetLastError(); !strings.Contains(e, "unavailable") && !strings.Contains(e, "PostgreSQL") {
		t.Errorf("last_error %q does not say what failed", e)
	}
	if info().GetLastTick() != nil {
		t.Fatalf("a last tick while every enqueue fails: %v", info())
	}

	u.fail.Store(false)
	srv.Clock.Advance(25 * time.Second) // the retry, after ticks 2 and 3 came and went
	awaitIdle(t, srv)
	if got, want := tickKeys(t, srv), keysOf(1); !slices.Equal(got, want) {
		t.Fatalf("after the retry: %v\nwant %v (tick 1 retried; 2 and 3 passed over under none)", got, want)
	}
	if s := info(); s.GetLastError() != "" || !s.GetLastTick().AsTime().Equal(tickAt(1)) {
		t.Fatalf("after the retry: %v", s)
	}
	srv.Clock.Advance(5 * time.Second) // tick 4 fires when it comes
	testserver.Await(t, "the job of tick 4", func() bool { return slices.Equal(tickKeys(t, srv), keysOf(1, 4)) })
	for sample, ok := range map[string]func(float64) bool{
		`sepp_schedule_errors_total{schedule="tick"}`:                  func(v float64) bool { return v >= 1 },
		`sepp_schedule_ticks_total{outcome="skipped",schedule="tick"}`: func(v float64) bool { return v == 2 },
		`sepp_schedule_ticks_total{outcome="created",schedule="tick"}`: func(v float64) bool { return v == 2 },
	} {
		if v, found := metricValue(t, http.DefaultClient, srv, sample); !found || !ok(v) {
			t.Errorf("%s = %v (present: %v)", sample, v, found)
		}
	}
}
