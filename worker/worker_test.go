package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/clock/clocktest"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/testserver"
	"github.com/sepp-dev/sepp/worker"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func setup(t *testing.T, config string) (*testserver.Server, *sepp.Client) {
	t.Helper()
	srv := testserver.Start(t, testserver.Options{Config: config, RealTime: true})
	c, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// runWorker runs w until the test ends (or stop is called) and checks that
// Run returns nil.
func runWorker(t *testing.T, w *worker.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor waits until cond, a state of the server, holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testserver.Await(t, what, cond)
}

func job(t *testing.T, c *sepp.Client, id string) *sepp.Job {
	t.Helper()
	j, err := c.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestEveryJobRunsOnce(t *testing.T) {
	t.Parallel()
	_, c := setup(t, "")
	ctx := context.Background()
	const n = 500
	var ids []string
	for i := range n {
		ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(fmt.Sprint("k", i)), Payload: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ack.JobID)
	}
	var mu sync.Mutex
	runs := map[string]int{}
	var total atomic.Int64
	for range 2 { // two workers of 16 goroutines
		w := worker.New(c, worker.Config{Queues: []string{"q"}, Concurrency: 16, Wait: 100 * time.Millisecond, Logger: quiet})
		w.Handle("t", func(ctx context.Context, j *worker.Job) ([]byte, error) {
			mu.Lock()
			runs[j.ID]++
			mu.Unlock()
			total.Add(1)
			return []byte("done " + string(j.Payload)), nil
		})
		runWorker(t, w)
	}
	waitFor(t, "every job completed", func() bool {
		qs, err := c.ListQueues(ctx)
		return err == nil && len(qs) == 1 && qs[0].Completed == n
	})
	for _, id := range ids {
		if runs[id] != 1 {
			t.Fatalf("job %s ran %d times", id, runs[id])
		}
		if j := job(t, c, id); j.State != sepp.JobStateCompleted || !strings.HasPrefix(string(j.Result), "done ") {
			t.Fatalf("job: %+v", j)
		}
	}
	qs, _ := c.ListQueues(ctx)
	if q := qs[0]; q.Available+q.Reserved+q.Scheduled+q.Dead != 0 || q.DedupRecords != n || total.Load() != n {
		t.Fatalf("queue counts: %+v, handler runs %d", q, total.Load())
	}
	l, err := c.LookupIdempotencyKey(ctx, "q", "k7")
	if err != nil || l.State != sepp.JobStateCompleted || string(l.Result) != "done 7" {
		t.Fatalf("lookup of a completed job: %+v %v", l, err)
	}
}

func TestFailuresRetryThenDeadLetter(t *testing.T) {
	t.Parallel()
	_, c := setup(t, `
[[queues]]
name = "q"
max_attempts = 3
backoff_initial_ms = 20
backoff_max_ms = 40
`)
	ctx := context.Background()
	ack, _ := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("k")})
	perm, _ := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "perm"})
	boom, _ := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "panic"})
	var attempts atomic.Int32
	w := worker.New(c, worker.Config{Queues: []string{"q"}, Wait: 50 * time.Millisecond, Logger: quiet})
	w.Handle("t", func(ctx context.Context, j *worker.Job) ([]byte, error) {
		attempts.Add(1)
		return nil, fmt.Errorf("smtp down (attempt %d)", j.Attempt)
	})
	w.Handle("perm", func(ctx context.Context, j *worker.Job) ([]byte, error) {
		return nil, worker.Permanent(errors.New("malformed address"))
	})
	w.Handle("panic", func(ctx context.Context, j *worker.Job) ([]byte, error) {
		var m map[string]int
		m["x"] = 1 // nil map write
		return nil, nil
	})
	runWorker(t, w)
	waitFor(t, "three jobs dead", func() bool {
		qs, err := c.ListQueues(ctx)
		return err == nil && len(qs) == 1 && qs[0].Dead == 3
	})
	if j := job(t, c, ack.JobID); j.Attempts != 3 || j.LastError != "smtp down (attempt 3)" || attempts.Load() != 3 {
		t.Fatalf("retried job: %+v (handler ran %d times)", j, attempts.Load())
	}
	if j := job(t, c, perm.JobID); j.Attempts != 1 || j.LastError != "malformed address" {
		t.Fatalf("permanent failure: %+v", j)
	}
	if j := job(t, c, boom.JobID); j.Attempts != 3 || !strings.Contains(j.LastError, "panic: assignment to entry in nil map") ||
		!strings.Contains(j.LastError, "worker_test.go") {
		t.Fatalf("panicking handler: %+v", j)
	}

	// Requeue brings the dead jobs back with attempts reset; purge removes them.
	n, err := c.RequeueDeadJobs(ctx, sepp.DeadJobs{JobIDs: []string{perm.JobID}})
	if err != nil || n != 1 {
		t.Fatalf("requeue: %d %v", n, err)
	}
	waitFor(t, "the requeued job to die again", func() bool {
		j := job(t, c, perm.JobID)
		return j.State == sepp.JobStateDead && j.Attempts == 1 && !j.FinalizedAt.IsZero()
	})
	n, err = c.PurgeDeadJobs(ctx, sepp.DeadJobs{Queue: "q"})
	if err != nil || n != 3 {
		t.Fatalf("purge: %d %v", n, err)
	}
	l, err := c.LookupIdempotencyKey(ctx, "q", "k")
	if err != nil || !l.Found || l.JobID != ack.JobID || l.State != sepp.JobStateDeleted {
		t.Fatalf("lookup after purge: %+v %v", l, err)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	_, c := setup(t, "[[queues]]\nname = \"q\"\nbackoff_initial_ms = 3600000\n")
	ctx := context.Background()
	ack, _ := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t"})
	var runs atomic.Int32
	w := worker.New(c, worker.Config{Queues: []string{"q"}, Wait: 50 * time.Millisecond, Logger: quiet})
	w.Handle("t", func(ctx context.Context, j *worker.Job) ([]byte, error) {
		if runs.Add(1) == 1 {
			return nil, worker.RetryAfter(errors.New("rate limited"), 100*time.Millisecond)
		}
		return nil, nil
	})
	runWorker(t, w)
	// With the queue's one-hour backoff this would not finish; RetryAfter
	// brings the retry to 100 ms.
	waitFor(t, "the retried job to complete", func() bool { return job(t, c, ack.JobID).State == sepp.JobStateCompleted })
	if j := job(t, c, ack.JobID); j.Attempts != 2 {
		t.Fatalf("attempts: %d", j.Attempts)
	}
}

// leases is a test server's store, telling the test of each job lease
// extension: the job's and the server's time of it.
type leases struct {
	store.Store
	made chan extension
}

type extension struct {
	job store.JobID
	at  time.Time
}

func (l *leases) ExtendLease(ctx context.Context, p *store.ExtendLeaseParams) (time.Time, error) {
	until, err := l.Store.ExtendLease(ctx, p)
	if err == nil {
		select {
		case l.made <- extension{p.ID, p.Now}:
		default: // the test waits for later ones; more come every third of a lease
		}
	}
	return until, err
}

// setupLeases is setup for tests of lease keeping: the server runs on its
// test clock, which the test moves, and tells it of the extensions.
func setupLeases(t *testing.T, config string) (*testserver.Server, *sepp.Client, *leases) {
	t.Helper()
	l := &leases{made: make(chan extension, 256)}
	srv := testserver.Start(t, testserver.Options{Config: config, WrapStore: func(s store.Store) store.Store { l.Store = s; return l }})
	c, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c, l
}

// outlive moves the server's clock on by three leases of 300 ms, in steps
// of a third of one, each once the worker has extended the lease of each
// of its n jobs at the new time: the jobs' first leases, and the next two,
// end meanwhile unless they are extended.
func (l *leases) outlive(t *testing.T, srv *testserver.Server, n int) {
	t.Helper()
	guard := time.After(clocktest.HangGuard)
	for range 9 {
		srv.Clock.Advance(100 * time.Millisecond)
		now := srv.Clock.Now()
		extended := map[store.JobID]bool{}
		for len(extended) < n {
			select {
			case e := <-l.made:
				if !e.at.Before(now) {
					extended[e.job] = true
				}
			case <-guard:
				t.Fatalf("%d of %d leases extended at %v", len(extended), n, now)
			}
		}
	}
}

func TestLeaseIsExtended(t *testing.T) {
	t.Parallel()
	srv, c, l := setupLeases(t, "[[queues]]\nname = \"q\"\nlease_ms = 300\n")
	ctx := context.Background()
	ack, _ := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "slow"})
	started, release := make(chan struct{}), make(chan struct{})
	w := worker.New(c, worker.Config{Queues: []string{"q"}, Wait: 50 * time.Millisecond, Logger: quiet})
	w.Handle("slow", func(ctx context.Context, j *worker.Job) ([]byte, error) {
		close(started)
		select {
		case <-release: // three leases later
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	runWorker(t, w)
	<-started
	l.outlive(t, srv, 1)
	close(release)
	waitFor(t, "the slow job to complete", func() bool { return job(t, c, ack.JobID).State == sepp.JobStateCompleted })
	if j := job(t, c, ack.JobID); j.Attempts != 1 {
		t.Fatalf("the slow job was delivered %d times", j.Attempts)
	}
}

func TestGracefulShutdownFinishesRunningJobs(t *testing.T) {
	t.Parallel()
	_, c := setup(t, "")
	ctx := context.Background()
	ack, _ := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t"})
	started := make(chan struct{})
	run, shutdown := context.WithCancel(context.Background())
	w := worker.New(c, worker.Config{Queues: []string{"q"}, Wait: 50 * time.Millisecond, Logger: quiet})
	w.Handle("t", func(ctx context.Context, j *worker.Job) ([]byte, error) {
		close(started)
		<-run.Done() // the job runs on into the shutdown
		return []byte("finished"), ctx.Err()
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(run) }()
	<-started
	shutdown()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if j := job(t, c, ack.JobID); j.State != sepp.JobStateCompleted || string(j.Result) != "finished" {
		t.Fatalf("job after shutdown: %+v", j)
	}
}

func TestPausedQueueDeliversNothing(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, "")
	ctx := context.Background()
	// Paused before its first job: a queue the server does not know yet.
	if err := c.PauseQueue(ctx, "q", sepp.PauseOptions{Create: true}); err != nil {
		t.Fatal(err)
	}
	ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t"})
	if err != nil {
		t.Fatalf("enqueue to a paused queue: %v", err)
	}
	var ran atomic.Bool
	w := worker.New(c, worker.Config{Queues: []string{"q"}, Wait: time.Minute, Logger: quiet})
	w.Handle("t", func(ctx context.Context, j *worker.Job) ([]byte, error) { ran.Store(true); return nil, nil })
	runWorker(t, w)
	// The worker's Reserve looked at the queue, holding the job, and waits.
	testserver.Await(t, "the worker's Reserve waiting", func() bool { return srv.WaitingReserves("q") == 1 })
	if ran.Load() {
		t.Fatal("a paused queue delivered a job")
	}
	if qs, _ := c.ListQueues(ctx); len(qs) != 1 || !qs[0].Paused || qs[0].Available != 1 {
		t.Fatalf("queues: %+v", qs)
	}
	if err := c.ResumeQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to run after resume", func() bool { return job(t, c, ack.JobID).State == sepp.JobStateCompleted })
}

func TestCompletionsFollowTheServerBatchLimit(t *testing.T) {
	t.Parallel()
	_, c := setup(t, "[server]\nmax_batch_size = 10\n")
	ctx := context.Background()
	const n = 300
	var ids []string
	for i := range n {
		ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ack.JobID)
	}
	w := worker.New(c, worker.Config{Queues: []string{"q"}, Concurrency: 64, Wait: 50 * time.Millisecond, Logger: quiet})
	w.Handle("t", func(ctx context.Context, j *worker.Job) ([]byte, error) { return nil, nil })
	runWorker(t, w)
	waitFor(t, "every job completed", func() bool {
		qs, err := c.ListQueues(ctx)
		return err == nil && len(qs) == 1 && qs[0].Completed == n
	})
	for _, id := range ids {
		if j := job(t, c, id); j.Attempts != 1 {
			t.Fatalf("job %s ran %d times: a refused completion batch was redelivered", id, j.Attempts)
		}
	}
}

func TestShutdownTimeoutLeavesTheJobForRedelivery(t *testing.T) {
	t.Parallel()
	_, c := setup(t, "")
	ctx := context.Background()
	ack, _ := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t"})
	started := make(chan struct{})
	w := worker.New(c, worker.Config{Queues: []string{"q"}, Wait: 50 * time.Millisecond, ShutdownTimeout: 100 * time.Millisecond, Logger: quiet})
	w.Handle("t", func(ctx context.Context, j *worker.Job) ([]byte, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	stop := runWorker(t, w)
	<-started
	stop()
	j := job(t, c, ack.JobID)
	if j.State != sepp.JobStateReserved || j.Attempts != 1 || j.LastError != "" {
		t.Fatalf("a job cut short by shutdown was reported: %+v", j)
	}
}

func TestEffectInProgressRetriesSoon(t *testing.T) {
	t.Parallel()
	_, c := setup(t, "[[queues]]\nname = \"q\"\nbackoff_initial_ms = 3600000\n")
	ctx := context.Background()
	ack, _ := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t"})
	var runs atomic.Int32
	w := worker.New(c, worker.Config{Queues: []string{"q"}, Wait: 50 * time.Millisecond, Logger: quiet})
	w.Handle("t", func(ctx context.Context, j *worker.Job) ([]byte, error) {
		if runs.Add(1) == 1 {
			return nil, fmt.Errorf("mail: %w", sepp.ErrEffectInProgress)
		}
		return nil, nil
	})
	runWorker(t, w)
	// With the queue's one-hour backoff this would not finish; an effect in
	// progress elsewhere is retried after a second.
	waitFor(t, "the job to complete on its retry", func() bool { return job(t, c, ack.JobID).State == sepp.JobStateCompleted })
	if runs.Load() != 2 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
}

func TestPrefetchedJobKeepsItsLease(t *testing.T) {
	t.Parallel()
	srv, c, l := setupLeases(t, "[[queues]]\nname = \"q\"\nlease_ms = 300\n")
	ctx := context.Background()
	var ids []string
	for range 2 {
		ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "slow"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ack.JobID)
	}
	// One handler, one job reserved ahead: the second job waits three of
	// its leases for the first.
	w := worker.New(c, worker.Config{Queues: []string{"q"}, Concurrency: 1, Prefetch: 1, Wait: 50 * time.Millisecond, Logger: quiet})
	var ran atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	w.Handle("slow", func(ctx context.Context, j *worker.Job) ([]byte, error) {
		if ran.Add(1) > 1 {
			return nil, nil
		}
		close(started)
		select {
		case <-release: // three leases later
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	runWorker(t, w)
	<-started
	l.outlive(t, srv, 2) // the running job's and the prefetched one's
	close(release)
	for _, id := range ids {
		waitFor(t, "both slow jobs to complete", func() bool { return job(t, c, id).State == sepp.JobStateCompleted })
		if j := job(t, c, id); j.Attempts != 1 {
			t.Fatalf("job %s was delivered %d times: its lease ended while it waited", id, j.Attempts)
		}
	}
	if n := ran.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}
