package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// Waiting Reserve calls wake by notification only (no polling): these tests
// check that each way a job becomes deliverable by the clock wakes them, well
// before the 10 s safety re-check would.

const wakeBound = 3 * time.Second // far below the safety re-check

func waitingReserve(t *testing.T, c *sepp.Client, queue string) (sepp.Reservation, time.Duration) {
	t.Helper()
	start := time.Now()
	r, err := c.Reserve(context.Background(), sepp.ReserveRequest{Queues: []string{queue}, Wait: 20 * time.Second})
	if err != nil || len(r) != 1 {
		t.Fatalf("waiting reserve: %+v %v", r, err)
	}
	return r[0], time.Since(start)
}

func TestWaitingReserveWakes(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: "[[queues]]\nname = \"lease\"\nlease_ms = 300\n"})
	ctx := context.Background()
	c, err := sepp.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	t.Run("enqueue", func(t *testing.T) {
		time.AfterFunc(100*time.Millisecond, func() { c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "now", JobType: "t"}) })
		if _, d := waitingReserve(t, c, "now"); d > wakeBound {
			t.Fatalf("handed over after %v", d)
		}
	})
	t.Run("run_at", func(t *testing.T) {
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "later", JobType: "t", RunAt: time.Now().Add(400 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		if _, d := waitingReserve(t, c, "later"); d < 300*time.Millisecond || d > wakeBound {
			t.Fatalf("scheduled job handed over after %v, want at its run_at (400 ms)", d)
		}
	})
	t.Run("retry", func(t *testing.T) {
		c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "retry", JobType: "t"})
		r, _ := waitingReserve(t, c, "retry")
		after := 400 * time.Millisecond
		if _, err := c.Fail(ctx, r.Job.ID, r.LeaseToken, "boom", sepp.FailOptions{RetryAfter: &after}); err != nil {
			t.Fatal(err)
		}
		if again, d := waitingReserve(t, c, "retry"); again.Attempt != 2 || d < 300*time.Millisecond || d > wakeBound {
			t.Fatalf("retry handed over after %v (attempt %d), want at its retry time (400 ms)", d, again.Attempt)
		}
	})
	t.Run("lease expiry", func(t *testing.T) {
		c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "lease", JobType: "t"})
		waitingReserve(t, c, "lease") // and never completed
		if again, d := waitingReserve(t, c, "lease"); again.Attempt != 2 || d > wakeBound {
			t.Fatalf("redelivered after %v (attempt %d), want when the 300 ms lease ends", d, again.Attempt)
		}
	})
	t.Run("resume", func(t *testing.T) {
		if err := c.PauseQueue(ctx, "paused", sepp.PauseOptions{Create: true}); err != nil { // before its first job
			t.Fatal(err)
		}
		c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "paused", JobType: "t"})
		time.AfterFunc(300*time.Millisecond, func() { c.ResumeQueue(ctx, "paused") })
		if _, d := waitingReserve(t, c, "paused"); d < 200*time.Millisecond || d > wakeBound {
			t.Fatalf("handed over after %v, want at the resume (300 ms)", d)
		}
	})
}
