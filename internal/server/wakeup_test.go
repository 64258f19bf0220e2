package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/clock/clocktest"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// Waiting Reserve calls wake by notification only (no polling): these tests
// check that each way a job becomes deliverable wakes them, and not before.
// The server's waits run on its test clock (ClockTimers): neither the safety
// re-check nor the end of a wait comes unless the test moves the clock, so
// what wakes a Reserve here is the notification or the timer under test.

// reserve is one waiting Reserve, started on its own goroutine.
type reserve struct {
	srv    *testserver.Server
	queue  string
	answer chan []sepp.Reservation
}

func startReserve(t *testing.T, srv *testserver.Server, c *sepp.Client, queue string) *reserve {
	t.Helper()
	r := &reserve{srv: srv, queue: queue, answer: make(chan []sepp.Reservation, 1)}
	go func() {
		jobs, err := c.Reserve(context.Background(), sepp.ReserveRequest{Queues: []string{queue}, Wait: 20 * time.Second})
		if err != nil {
			t.Errorf("waiting reserve on %s: %v", queue, err)
		}
		r.answer <- jobs
	}()
	r.asleep(t)
	return r
}

// asleep waits until the Reserve sleeps (it looked, and found nothing) or
// has answered.
func (r *reserve) asleep(t *testing.T) {
	t.Helper()
	testserver.Await(t, "Reserve on "+r.queue+" asleep", func() bool {
		return r.srv.WaitingReserves(r.queue) == 1 || len(r.answer) > 0
	})
}

// notYet fails the test if the Reserve has answered.
func (r *reserve) notYet(t *testing.T, when string) {
	t.Helper()
	r.asleep(t) // a wake-up it had is done with
	if len(r.answer) > 0 {
		t.Fatalf("%s handed over %s", r.queue, when)
	}
}

// handed waits for the Reserve's answer, which must be one job.
func (r *reserve) handed(t *testing.T) sepp.Reservation {
	t.Helper()
	select {
	case jobs := <-r.answer:
		if len(jobs) != 1 {
			t.Fatalf("%s: %d jobs handed over, want 1", r.queue, len(jobs))
		}
		return jobs[0]
	case <-time.After(clocktest.HangGuard):
		t.Fatalf("%s: the waiting Reserve was not woken", r.queue)
		panic("unreachable")
	}
}

func TestWaitingReserveWakes(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{ClockTimers: true, Config: "[[queues]]\nname = \"lease\"\nlease_ms = 300\n"})
	ctx := context.Background()
	c, err := sepp.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	t.Run("enqueue", func(t *testing.T) {
		r := startReserve(t, srv, c, "now")
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "now", JobType: "t"}); err != nil {
			t.Fatal(err)
		}
		r.handed(t)
	})
	t.Run("run_at", func(t *testing.T) {
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "later", JobType: "t", RunAt: srv.Clock.Now().Add(400 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		r := startReserve(t, srv, c, "later")
		srv.Clock.Advance(399 * time.Millisecond)
		r.notYet(t, "before its run_at")
		srv.Clock.Advance(time.Millisecond)
		r.handed(t)
	})
	t.Run("retry", func(t *testing.T) {
		c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "retry", JobType: "t"})
		first, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"retry"}})
		if err != nil || len(first) != 1 {
			t.Fatalf("reserve: %+v %v", first, err)
		}
		after := 400 * time.Millisecond
		if _, err := c.Fail(ctx, first[0].Job.ID, first[0].LeaseToken, "boom", sepp.FailOptions{RetryAfter: &after}); err != nil {
			t.Fatal(err)
		}
		r := startReserve(t, srv, c, "retry")
		srv.Clock.Advance(399 * time.Millisecond)
		r.notYet(t, "before its retry time")
		srv.Clock.Advance(time.Millisecond)
		if again := r.handed(t); again.Attempt != 2 {
			t.Fatalf("retry handed over as attempt %d, want 2", again.Attempt)
		}
	})
	t.Run("lease expiry", func(t *testing.T) {
		c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "lease", JobType: "t"})
		if first, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"lease"}}); err != nil || len(first) != 1 { // and never completed
			t.Fatalf("reserve: %+v %v", first, err)
		}
		r := startReserve(t, srv, c, "lease")
		srv.Clock.Advance(299 * time.Millisecond)
		r.notYet(t, "again before its 300 ms lease ended")
		srv.Clock.Advance(time.Millisecond)
		if again := r.handed(t); again.Attempt != 2 {
			t.Fatalf("redelivered as attempt %d, want 2", again.Attempt)
		}
	})
	t.Run("resume", func(t *testing.T) {
		if err := c.PauseQueue(ctx, "paused", sepp.PauseOptions{Create: true}); err != nil { // before its first job
			t.Fatal(err)
		}
		c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "paused", JobType: "t"})
		r := startReserve(t, srv, c, "paused")
		if err := c.ResumeQueue(ctx, "paused"); err != nil {
			t.Fatal(err)
		}
		r.handed(t)
	})
}
