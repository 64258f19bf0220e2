package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/clock"
	"github.com/sepp-dev/sepp/internal/store"
)

// Config is one schedule, validated (internal/config checks [[schedules]]).
type Config struct {
	Name     string
	Cron     string // as configured, for ListSchedules
	Timezone string // as configured; "" is UTC
	Spec     *Spec
	Queue    string
	JobType  string
	Payload  []byte
	Headers  map[string]string
	CatchUp  CatchUp
	// Batch bounds the ticks of one enqueue batch when catching up under
	// CatchUpAll (server.max_batch_size bounds it too).
	Batch int
}

// Enqueuer enqueues the ticks' jobs: the server's own EnqueueBatch, so a
// tick's job gets the checks, policies, metrics and dedup of any enqueue.
type Enqueuer interface {
	EnqueueBatch(ctx context.Context, req *seppv1.EnqueueBatchRequest) (*seppv1.EnqueueBatchResponse, error)
}

// Options are what a Runner needs besides its schedule.
type Options struct {
	Store   store.Schedules
	Enqueue Enqueuer
	// Now is the server's clock, the one ticks are judged by (the
	// database's, on PostgreSQL, so that nodes agree on when a tick came).
	Now func() time.Time
	// Local is the clock the runner waits on (a test's clocktest.Fake).
	Local   clock.Local
	Log     *slog.Logger
	Metrics *Metrics
}

// Retry delays after a failure: from the first to the cap, doubling.
const (
	retryFirst = time.Second
	retryCap   = 30 * time.Second
)

// Runner fires one schedule's ticks. Run is its loop; Info is safe to call
// from any goroutine meanwhile.
type Runner struct {
	cfg  Config
	opts Options

	mu   sync.Mutex
	info Info
	// idle is set while Run sleeps until the next tick with nothing owed,
	// which a test waits for before it moves the clock (Idle).
	idle atomic.Bool
}

// Idle reports whether the runner sleeps until its next tick, having dealt
// with every tick up to now.
func (r *Runner) Idle() bool { return r.idle.Load() }

// Info is what a node knows of its schedule.
type Info struct {
	// Stored is the stored state as this node read it last (zero before).
	Stored store.ScheduleState
	// Through is the latest tick this node dealt with: fired, or skipped
	// under catch_up, or done by another node (the stored last tick).
	Through time.Time
	// LastJobID is the job of the latest tick this node fired.
	LastJobID string
	// LastError is this node's last failure; "" after a success.
	LastError string
}

// NewRunner returns the runner of one schedule.
func NewRunner(cfg Config, opts Options) *Runner {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Local == nil {
		opts.Local = clock.System
	}
	if opts.Metrics != nil {
		opts.Metrics.init(cfg.Name)
	}
	return &Runner{cfg: cfg, opts: opts}
}

// Config returns the runner's schedule.
func (r *Runner) Config() Config { return r.cfg }

// Info returns what this node knows of the schedule.
func (r *Runner) Info() Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info
}

// NextAfter is the first tick after both the stored state st and what this
// node dealt with: the next tick to fire.
func (r *Runner) NextAfter(st *store.ScheduleState) time.Time {
	from := r.Info().Through
	if st != nil {
		from = latest(from, st.StartedAt, st.LastTick)
	}
	if from.IsZero() {
		from = r.opts.Now()
	}
	return r.cfg.Spec.Next(from)
}

// Run fires the schedule's ticks until ctx ends. Each pass reads the stored
// state again, so a tick another node fired is not fired again (and if it
// is, by a node that read the state just before, the tick's key makes it a
// dedup hit). A failure is retried with backoff; the ticks it failed to
// fire stay owed and fire first, whatever catch_up says.
func (r *Runner) Run(ctx context.Context) {
	var (
		started bool
		owed    []time.Time
		delay   = retryFirst
	)
	fail := func(what string, err error) {
		r.opts.Log.Warn("schedule: "+what+" failed; retrying", "schedule", r.cfg.Name, "err", err, "retry_in", delay)
		if r.opts.Metrics != nil {
			r.opts.Metrics.errors.WithLabelValues(r.cfg.Name).Inc()
		}
		r.mu.Lock()
		r.info.LastError = fmt.Sprintf("%s: %v", what, err)
		r.mu.Unlock()
	}
	for ctx.Err() == nil {
		st, err := r.readState(ctx, started)
		if err != nil {
			fail("reading the schedule's state", err)
			if !clock.Sleep(ctx, r.opts.Local, delay) {
				return
			}
			delay = min(2*delay, retryCap)
			continue
		}
		starting := !started
		started = true
		through := r.noteState(st)
		now := r.opts.Now()

		var p Plan
		for len(owed) > 0 && !owed[0].After(through) {
			owed = owed[1:] // another node fired them meanwhile
		}
		if len(owed) > 0 {
			p = Plan{Fire: owed, Through: owed[len(owed)-1]}
		} else {
			p = Decide(r.cfg.Spec, r.cfg.CatchUp, through, now, starting, r.cfg.Batch)
		}
		if p.Skipped > 0 {
			r.opts.Log.Info("schedule: ticks skipped under catch_up", "schedule", r.cfg.Name, "catch_up", string(r.cfg.CatchUp),
				"skipped", p.Skipped, "through", p.Through)
			if r.opts.Metrics != nil {
				r.opts.Metrics.ticks.WithLabelValues(r.cfg.Name, outcomeSkipped).Add(float64(p.Skipped))
			}
		}
		if len(p.Fire) > 0 {
			if err := r.fire(ctx, p.Fire); err != nil {
				if ctx.Err() != nil {
					return
				}
				owed = r.owedAfter(p.Fire)
				fail("firing a tick", err)
				if !clock.Sleep(ctx, r.opts.Local, delay) {
					return
				}
				delay = min(2*delay, retryCap)
				continue
			}
			owed = nil
		}
		r.advanceThrough(p.Through)
		delay = retryFirst
		if pending := r.cfg.Spec.Next(r.Info().Through); !pending.IsZero() && !pending.After(now) {
			// Ticks remain in (Through, now]: the next batch under "all",
			// or the ticks that came while owed ones were retried, which
			// the next pass plans under catch_up. Never slept past.
			continue
		}
		next := r.cfg.Spec.Next(latest(r.Info().Through, now))
		if next.IsZero() {
			<-ctx.Done() // a cron that never fires again
			return
		}
		r.idle.Store(true)
		ok := clock.Sleep(ctx, r.opts.Local, next.Sub(r.opts.Now()))
		r.idle.Store(false)
		if !ok {
			return
		}
	}
}

// readState starts the schedule in the store on the first pass (a schedule
// first seen starts at the next tick after now), and reads it afterwards.
func (r *Runner) readState(ctx context.Context, started bool) (*store.ScheduleState, error) {
	if !started {
		return r.opts.Store.StartSchedule(ctx, &store.StartScheduleParams{Name: r.cfg.Name, Now: r.opts.Now()})
	}
	return r.opts.Store.GetSchedule(ctx, &store.GetScheduleParams{Name: r.cfg.Name})
}

// noteState records the stored state and returns the tick after which this
// node is still to deal with ticks.
func (r *Runner) noteState(st *store.ScheduleState) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.info.Stored = *st
	r.info.Through = latest(r.info.Through, st.StartedAt, st.LastTick)
	return r.info.Through
}

func (r *Runner) advanceThrough(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.info.Through = latest(r.info.Through, t)
}

// owedAfter returns the ticks of fire that this node has not dealt with.
func (r *Runner) owedAfter(fire []time.Time) []time.Time {
	through := r.Info().Through
	for len(fire) > 0 && !fire[0].After(through) {
		fire = fire[1:]
	}
	return fire
}

// fire enqueues the ticks' jobs in one batch and, once their jobs exist,
// records the latest of them in the stored state. It stops at the first
// tick whose job could not be enqueued: the ticks before it count as done.
func (r *Runner) fire(ctx context.Context, ticks []time.Time) error {
	req := &seppv1.EnqueueBatchRequest{}
	for _, t := range ticks {
		key := Key(r.cfg.Name, t)
		req.Jobs = append(req.Jobs, &seppv1.EnqueueRequest{Queue: r.cfg.Queue, JobType: r.cfg.JobType,
			Payload: r.cfg.Payload, IdempotencyKey: &key, Headers: r.cfg.Headers})
	}
	res, err := r.opts.Enqueue.EnqueueBatch(ctx, req)
	if err != nil {
		return err
	}
	done, jobID := 0, ""
	var itemErr error
	for i, item := range res.GetResults() {
		outcome := ""
		switch {
		case item.GetAck() != nil:
			jobID = item.GetAck().GetJobId()
			outcome = outcomeCreated
			if item.GetAck().GetDeduplicated() {
				outcome = outcomeDuplicate
			}
		case tickExists(item.GetError()):
			outcome = outcomeDuplicate
		default:
			e := item.GetError()
			itemErr = fmt.Errorf("the job of tick %s: %s (%s)", ticks[i].Format(time.RFC3339), e.GetMessage(), e.GetReason())
		}
		if itemErr != nil {
			break
		}
		done++
		if r.opts.Metrics != nil {
			r.opts.Metrics.ticks.WithLabelValues(r.cfg.Name, outcome).Inc()
		}
	}
	if itemErr == nil && done < len(ticks) {
		itemErr = errors.New("the server answered fewer results than jobs")
	}
	if done > 0 {
		last := ticks[done-1]
		r.mu.Lock()
		r.info.Through = latest(r.info.Through, last)
		if jobID != "" {
			r.info.LastJobID = jobID
		}
		r.mu.Unlock()
		// The jobs exist whatever happens to this write: a node that does
		// not see it fires these ticks again and gets dedup hits.
		st, err := r.opts.Store.AdvanceSchedule(ctx, &store.AdvanceScheduleParams{Name: r.cfg.Name, Tick: last})
		if err != nil {
			return errors.Join(itemErr, fmt.Errorf("recording tick %s: %w", last.Format(time.RFC3339), err))
		}
		r.noteState(st)
	}
	if itemErr != nil {
		return itemErr
	}
	r.mu.Lock()
	r.info.LastError = ""
	r.mu.Unlock()
	return nil
}

// tickExists reports a refusal that means the tick's job already exists:
// DUPLICATE_JOB (a queue with on_duplicate = "reject") or
// IDEMPOTENCY_KEY_CONFLICT (the schedule's payload was changed since that
// job was made, on a queue with key_reuse = "reject_mismatch").
func tickExists(e *seppv1.BatchItemError) bool {
	return e != nil && (e.GetReason() == "DUPLICATE_JOB" || e.GetReason() == "IDEMPOTENCY_KEY_CONFLICT")
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}
