package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/server"
	"github.com/sepp-dev/sepp/internal/store/pebble"
	"github.com/sepp-dev/sepp/internal/testserver"
)

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempts int32
		rnd      float64
		want     time.Duration
		initial  time.Duration
		max      time.Duration
	}{
		{attempts: 1, rnd: 0, want: 500 * time.Millisecond, initial: time.Second, max: time.Hour},
		{attempts: 1, rnd: 0.999999, want: time.Second - time.Microsecond, initial: time.Second, max: time.Hour},
		{attempts: 2, rnd: 0, want: time.Second, initial: time.Second, max: time.Hour},
		{attempts: 4, rnd: 0.5, want: 6 * time.Second, initial: time.Second, max: time.Hour},
		{attempts: 30, rnd: 0, want: 30 * time.Minute, initial: time.Second, max: time.Hour},
		{attempts: 1000, rnd: 0, want: 30 * time.Minute, initial: time.Second, max: time.Hour},
	} {
		got := server.Backoff(tc.attempts, tc.initial, tc.max, tc.rnd)
		if diff := got - tc.want; diff < -time.Microsecond || diff > time.Microsecond {
			t.Errorf("Backoff(%d, %v, %v, %v) = %v, want %v", tc.attempts, tc.initial, tc.max, tc.rnd, got, tc.want)
		}
	}
}

// TestRetriesWalkTheBackoff fails a job until it is dead, moving the server's
// clock to each retry, and checks every delay against the jitter bounds.
func TestRetriesWalkTheBackoff(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: `
[[queues]]
name = "q"
max_attempts = 6
backoff_initial_ms = 1000
backoff_max_ms = 8000
`})
	ctx := context.Background()
	c, err := sepp.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ack, _ := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("k")})
	nominal := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
	for attempt := 1; attempt <= 6; attempt++ {
		r, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"q"}})
		if err != nil || len(r) != 1 || r[0].Attempt != int32(attempt) {
			t.Fatalf("attempt %d: reserve %+v %v", attempt, r, err)
		}
		now := srv.Clock.Now()
		res, err := c.Fail(ctx, r[0].Job.ID, r[0].LeaseToken, "boom", sepp.FailOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if attempt == 6 {
			if res.State != sepp.JobStateDead {
				t.Fatalf("after the last attempt: %+v", res)
			}
			break
		}
		d := res.NextRunAt.Sub(now)
		if n := nominal[attempt-1]; res.State != sepp.JobStateScheduled || d < n/2 || d > n {
			t.Fatalf("attempt %d: retry in %v, want within [%v, %v]", attempt, d, n/2, n)
		}
		// Not before its time.
		srv.Clock.Advance(d - time.Millisecond)
		if early, _ := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"q"}}); len(early) != 0 {
			t.Fatalf("attempt %d: delivered before its retry time", attempt)
		}
		srv.Clock.Advance(time.Millisecond)
	}
	j, err := c.GetJob(ctx, ack.JobID)
	if err != nil || j.State != sepp.JobStateDead || j.LastError != "boom" || j.Attempts != 6 {
		t.Fatalf("dead job: %+v %v", j, err)
	}
}

func TestStaleLeaseChangesNothing(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[[queues]]\nname = \"q\"\nlease_ms = 1000\n"})
	ctx := context.Background()
	c, err := sepp.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t"})
	first, _ := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"q"}})
	srv.Clock.Advance(time.Second) // the lease ends
	second, _ := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"q"}})
	if len(second) != 1 || second[0].Attempt != 2 {
		t.Fatalf("redelivery: %+v", second)
	}
	if err := c.Complete(ctx, first[0].Job.ID, first[0].LeaseToken, nil); !errors.Is(err, sepp.ErrLeaseLost) {
		t.Fatalf("late Complete: %v", err)
	}
	if _, err := c.ExtendLease(ctx, first[0].Job.ID, first[0].LeaseToken, time.Second); !errors.Is(err, sepp.ErrLeaseLost) {
		t.Fatalf("late ExtendLease: %v", err)
	}
	j, _ := c.GetJob(ctx, second[0].Job.ID)
	if j.State != sepp.JobStateReserved || j.Attempts != 2 {
		t.Fatalf("job after stale calls: %+v", j)
	}
	if err := c.Complete(ctx, second[0].Job.ID, second[0].LeaseToken, []byte("ok")); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownAnswersWaitingReserves(t *testing.T) {
	st, err := pebble.Open(context.Background(), pebble.Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := config.Default()
	srv, err := server.New(server.Options{Config: &cfg, Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c, err := sepp.Connect(context.Background(), "http://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reserved := make(chan error, 1)
	go func() {
		jobs, err := c.Reserve(context.Background(), sepp.ReserveRequest{Queues: []string{"q"}, Wait: 5 * time.Minute})
		if err == nil && len(jobs) != 0 {
			t.Errorf("reserve returned %d jobs from an empty queue", len(jobs))
		}
		reserved <- err
	}()
	testserver.Await(t, "Reserve waiting", func() bool { return srv.WaitingReserves("q") == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a waiting Reserve: %v", err)
	}
	if err := <-reserved; err != nil {
		t.Fatalf("the waiting Reserve got %v; want an empty answer", err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
