// Package worker runs Sepp jobs: it reserves jobs from queues, calls the
// handler registered for each job type, keeps leases alive while handlers
// run, and reports each outcome.
//
//	w := worker.New(client, worker.Config{Queues: []string{"emails"}, Concurrency: 16})
//	w.Handle("receipt", func(ctx context.Context, job *worker.Job) ([]byte, error) {
//		return nil, sendReceipt(ctx, job.Payload)
//	})
//	err := w.Run(ctx) // until ctx ends; then a graceful shutdown
//
// Delivery is at least once: a job whose worker dies, or whose lease
// expires, is delivered again. Make handlers idempotent: guard each external
// effect with package effect, and database writes with package inbox.
//
// A handler's error retries the job with the queue's backoff; Permanent(err)
// dead-letters it at once; RetryAfter(err, d) retries it after d. A panic is a
// failure whose error carries the stack.
//
// A job that carries a traceparent header (an enqueue in an OpenTelemetry
// span) runs in a consumer span "sepp.process <queue>", the producer span's
// child, on the global tracer provider; the handler's ctx carries it.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sepp-dev/sepp"
)

// Job is a delivered job.
type Job struct {
	*sepp.Job
	// Attempt counts the deliveries of this job, this one included.
	Attempt int32
	// LeaseToken holds the lease; the runtime uses it to report the outcome.
	LeaseToken string
}

// Handler runs one job. Its result, if any, is stored with the completed job.
type Handler func(ctx context.Context, job *Job) (result []byte, err error)

// Config tunes a Worker. Every field but Queues has a default.
type Config struct {
	// Queues to reserve from. Required.
	Queues []string
	// Concurrency is how many jobs run at once. Default 10.
	Concurrency int
	// Lease is how long each job is leased; the runtime extends it while
	// the handler runs. Default 0: the queue's lease_ms.
	Lease time.Duration
	// Prefetch is how many jobs the runtime holds reserved beyond those
	// running, so that a handler that returns finds its next job waiting
	// and Reserve takes many jobs at a time. It reserves again once at
	// least Prefetch slots (running and waiting) are free. A waiting job's
	// lease is kept alive like a running one's. Default: Concurrency.
	// Negative: none; each Reserve asks for the free slots only, the
	// choice for jobs that run for minutes, so that no job waits behind
	// a long one while another worker is idle.
	Prefetch int
	// Wait is how long one Reserve call waits for a job (long poll).
	// Default 10 s.
	Wait time.Duration
	// ShutdownTimeout is how long Run lets running handlers finish after
	// its context ends. After that their contexts are cancelled and their
	// leases are no longer extended; a job whose handler then returns an
	// error is not reported, so it is delivered again after its lease
	// without spending an attempt. Run waits 5 s more for handlers to
	// return, then returns without those that ignore their context.
	// Default 30 s.
	ShutdownTimeout time.Duration
	// WorkerID names this worker in the server's records. Default
	// "HOSTNAME-PID".
	WorkerID string
	// Logger receives the runtime's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Concurrency <= 0 {
		c.Concurrency = 10
	}
	switch {
	case c.Prefetch == 0:
		c.Prefetch = c.Concurrency
	case c.Prefetch < 0:
		c.Prefetch = 0
	}
	if c.Wait <= 0 {
		c.Wait = 10 * time.Second
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// maxReserve is the most jobs one Reserve asks for (the server's limit).
const maxReserve = 1000

// effectRetryDelay is when a job whose effect was in progress elsewhere is
// tried again.
const effectRetryDelay = time.Second

// afterCancelGrace is how long Run still waits, after cancelling handlers at
// the shutdown timeout, for them to return.
const afterCancelGrace = 5 * time.Second

// Worker reserves and runs jobs. Create it with New, register handlers with
// Handle, then call Run once.
type Worker struct {
	client   *sepp.Client
	cfg      Config
	mu       sync.Mutex
	handlers map[string]Handler
	fallback Handler // HandleAll
	done     completer
}

// New returns a Worker that uses client.
func New(client *sepp.Client, cfg Config) *Worker {
	return &Worker{client: client, cfg: cfg.withDefaults(), handlers: map[string]Handler{}, done: completer{client: client}}
}

// Handle registers h for jobs of jobType. Register before Run.
func (w *Worker) Handle(jobType string, h Handler) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers[jobType] = h
}

// HandleAll registers h for every job type without a handler of its own.
func (w *Worker) HandleAll(h Handler) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fallback = h
}

func (w *Worker) handler(jobType string) Handler {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h, ok := w.handlers[jobType]; ok {
		return h
	}
	return w.fallback
}

// Run reserves and runs jobs until ctx ends, then shuts down gracefully: it
// stops reserving, lets running handlers, and the jobs already reserved for
// them, finish within ShutdownTimeout, then cancels the rest (their jobs
// are delivered again once their leases end). It returns nil after a
// graceful shutdown.
//
// Concurrency handlers take jobs from a queue of reserved ones; the
// reserving loop keeps it filled up to Concurrency + Prefetch, one Reserve
// in flight, and each outcome is reported beside the next job (completions
// of many handlers in one CompleteBatch), as NATS JetStream's Consume keeps
// pulls and acks in flight.
func (w *Worker) Run(ctx context.Context) error {
	if len(w.cfg.Queues) == 0 {
		return errors.New("worker: Config.Queues is empty: name the queues to work on")
	}
	// Handlers run under jobCtx, which outlives ctx by ShutdownTimeout.
	jobCtx, cancelJobs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelJobs()
	log := w.cfg.Logger.With("worker_id", w.cfg.WorkerID)
	log.Info("worker started", "queues", w.cfg.Queues, "concurrency", w.cfg.Concurrency, "prefetch", w.cfg.Prefetch)

	capacity := int64(w.cfg.Concurrency + w.cfg.Prefetch)
	// Reserve again once this many slots are free: with Prefetch, in
	// batches of at least Prefetch jobs; without, as soon as one is.
	batch := int64(max(1, w.cfg.Prefetch))
	ready := make(chan *delivery, capacity)
	var outstanding atomic.Int64 // reserved, not yet finished by a handler
	freed := make(chan struct{}, 1)
	var running sync.WaitGroup // handlers, and the reports of their outcomes
	for range w.cfg.Concurrency {
		running.Add(1)
		go func() {
			defer running.Done()
			for d := range ready {
				w.run(jobCtx, d, &running, func() {
					outstanding.Add(-1)
					select {
					case freed <- struct{}{}:
					default:
					}
				})
			}
		}()
	}

	for ctx.Err() == nil {
		free := capacity - outstanding.Load()
		if free < batch {
			select {
			case <-freed:
			case <-ctx.Done():
			}
			continue
		}
		jobs, err := w.client.Reserve(ctx, sepp.ReserveRequest{
			Queues: w.cfg.Queues, WorkerID: w.cfg.WorkerID, MaxJobs: int(min(free, maxReserve)), Lease: w.cfg.Lease, Wait: w.cfg.Wait,
		})
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("reserve failed; retrying", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		outstanding.Add(int64(len(jobs)))
		for _, r := range jobs {
			ready <- w.deliver(jobCtx, log, r) // never blocks: outstanding <= capacity
		}
	}
	close(ready)

	done := make(chan struct{})
	go func() {
		running.Wait()
		close(done)
	}()
	log.Info("worker stopping: waiting for running jobs", "timeout", w.cfg.ShutdownTimeout)
	select {
	case <-done:
	case <-time.After(w.cfg.ShutdownTimeout):
		log.Warn("shutdown timeout: cancelling running jobs; their leases are no longer extended and they will be delivered again")
		cancelJobs()
		select {
		case <-done:
		case <-time.After(afterCancelGrace):
			log.Warn("some handlers ignore their context and are still running; returning without them")
		}
	}
	log.Info("worker stopped")
	return nil
}

// delivery is a reserved job, from its reservation until its outcome is
// reported.
type delivery struct {
	job  *Job
	log  *slog.Logger
	keep *leaseKeeper
}

// deliver starts keeping r's lease alive, at once: a job may wait for a
// handler.
func (w *Worker) deliver(ctx context.Context, log *slog.Logger, r sepp.Reservation) *delivery {
	job := &Job{Job: r.Job, Attempt: r.Attempt, LeaseToken: r.LeaseToken}
	log = log.With("job_id", job.ID, "job_type", job.JobType, "queue", job.Queue, "attempt", job.Attempt)
	lease := r.Lease // as the server granted it
	if lease <= 0 {
		lease = max(time.Until(r.LeaseExpiresAt), 100*time.Millisecond)
	}
	return &delivery{job: job, log: log, keep: w.keepLease(ctx, log, job, lease)}
}

// run runs one delivered job and has its outcome reported beside the next
// job (the report is counted in reports). It calls handlerDone when the
// handler has returned, or when the job is not run.
func (w *Worker) run(ctx context.Context, d *delivery, reports *sync.WaitGroup, handlerDone func()) {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if ctx.Err() != nil || !d.keep.running(cancel) {
		// Shut down, or its lease was lost while it waited: not run, and
		// delivered again (to this worker or another) after its lease.
		d.keep.stop()
		handlerDone()
		return
	}
	tctx, span := startProcessSpan(hctx, d.job) // tracing.go
	result, err := w.call(tctx, d.job)
	endProcessSpan(span, err)
	handlerDone()
	cancel()
	d.keep.stop()
	if err != nil && ctx.Err() != nil {
		// Cut short by the shutdown timeout: report nothing, so the job is
		// delivered again once its lease ends, without spending an attempt
		// on a failure that was not the job's.
		d.log.Warn("job cut short by shutdown; it will be delivered again after its lease", "err", err)
		return
	}
	reports.Add(1)
	go func() {
		defer reports.Done()
		w.report(ctx, d, result, err)
	}()
}

// report reports a handler's outcome: a completion (durably, batched with
// others), or a failure.
func (w *Worker) report(ctx context.Context, d *delivery, result []byte, err error) {
	job, log := d.job, d.log
	// Report with a context of its own: the handler's is done by now, and
	// the report must still reach the server during a graceful shutdown.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	if err == nil {
		if err := w.done.complete(rctx, sepp.Completion{JobID: job.ID, LeaseToken: job.LeaseToken, Result: result}); err != nil {
			log.Warn("complete failed; the job will be delivered again", "err", err)
		}
		return
	}
	opts := sepp.FailOptions{}
	var p *permanentError
	var ra *retryAfterError
	switch {
	case errors.As(err, &p):
		opts.Permanent = true
	case errors.As(err, &ra):
		opts.RetryAfter = &ra.after
	case errors.Is(err, sepp.ErrEffectInProgress):
		// Another delivery is running this job's effect (effect.Raise):
		// come back soon, when it has finished, rather than after the
		// queue's backoff.
		after := effectRetryDelay
		opts.RetryAfter = &after
	}
	res, ferr := w.client.Fail(rctx, job.ID, job.LeaseToken, err.Error(), opts)
	if ferr != nil {
		log.Warn("fail failed; the job will be delivered again", "err", ferr, "job_err", err)
		return
	}
	if res.State == sepp.JobStateDead {
		log.Warn("job failed and is dead", "err", err)
		return
	}
	log.Info("job failed; will retry", "err", err, "next_run_at", res.NextRunAt)
}

// call runs the job's handler, turning a panic into an error with the stack.
func (w *Worker) call(ctx context.Context, job *Job) (result []byte, err error) {
	h := w.handler(job.JobType)
	if h == nil {
		return nil, fmt.Errorf("no handler registered for job type %q on worker %s", job.JobType, w.cfg.WorkerID)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return h(ctx, job)
}

// leaseKeeper renews one job's lease every third of its length, from its
// reservation until its handler returns. If the lease is lost it cancels
// the handler, or, before the handler has started, keeps it from starting.
type leaseKeeper struct {
	w     *Worker
	log   *slog.Logger
	job   *Job
	lease time.Duration
	every time.Duration
	ctx   context.Context // the extensions'; ended by stop
	end   context.CancelFunc

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	lost    bool
	cancel  context.CancelFunc // the handler's, once it runs
	busy    sync.WaitGroup     // an extension in flight
}

func (w *Worker) keepLease(ctx context.Context, log *slog.Logger, job *Job, lease time.Duration) *leaseKeeper {
	k := &leaseKeeper{w: w, log: log, job: job, lease: lease, every: max(lease/3, 10*time.Millisecond)}
	k.ctx, k.end = context.WithCancel(ctx)
	k.mu.Lock()
	k.timer = time.AfterFunc(k.every, k.extend)
	k.mu.Unlock()
	return k
}

func (k *leaseKeeper) extend() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	k.busy.Add(1)
	k.mu.Unlock()
	defer k.busy.Done()
	_, err := k.w.client.ExtendLease(k.ctx, k.job.ID, k.job.LeaseToken, k.lease)
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.stopped || k.ctx.Err() != nil:
		return
	case errors.Is(err, sepp.ErrLeaseLost):
		k.log.Warn("lease lost: cancelling the handler; the job belongs to another delivery now")
		k.lost = true
		if k.cancel != nil {
			k.cancel()
		}
		return
	case err != nil:
		k.log.Warn("lease extension failed; will retry", "err", err)
	}
	k.timer.Reset(k.every)
}

// running records the handler's cancel; false if the lease is lost.
func (k *leaseKeeper) running(cancel context.CancelFunc) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cancel = cancel
	return !k.lost
}

// stop ends the renewals and waits for one in flight.
func (k *leaseKeeper) stop() {
	k.mu.Lock()
	k.stopped = true
	k.timer.Stop()
	k.mu.Unlock()
	k.end()
	k.busy.Wait()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
