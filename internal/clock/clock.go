// Package clock gives a node the time of a reference clock that several
// nodes share, so that the node's own wall clock decides nothing.
//
// On PostgreSQL every node judges dedup windows, leases and run-ats against
// times the other nodes wrote. An Anchored clock reads the reference (the
// database's clock) at start and every Resync, and in between advances the
// last reading by the node's monotonic clock: a node whose wall clock is
// wrong, or is stepped by NTP, keeps the database's time.
package clock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// AnchoredOptions configure NewAnchored.
type AnchoredOptions struct {
	// Source reads the reference time (the database's clock). Required.
	Source func(context.Context) (time.Time, error)
	// Resync is how often the clock reads Source again. Default 10 s.
	Resync time.Duration
	// Timeout bounds each read of Source after the first. Default 5 s, and
	// at most Resync.
	Timeout time.Duration
	// Logger receives the warning when Source cannot be read and the note
	// when it can again. Default slog.Default().
	Logger *slog.Logger
	// Local is the node's clock, for tests only: a test sets it to a
	// skewed clock to show that the skew has no effect. It must return
	// values that carry Go's monotonic reading, as time.Now's do (and
	// time.Now().Add(d)'s). Default time.Now.
	Local func() time.Time
}

// DefaultResync is AnchoredOptions.Resync's default.
const DefaultResync = 10 * time.Second

// Anchored is a clock anchored to a reference time source. Its methods are
// safe for concurrent use.
type Anchored struct {
	source  func(context.Context) (time.Time, error)
	local   func() time.Time
	log     *slog.Logger
	timeout time.Duration

	anchor atomic.Pointer[anchor]
	// latest is the largest time Now has returned, in Unix nanoseconds: a
	// resync that puts the reference back does not put Now back.
	latest atomic.Int64

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// anchor is one reading of the source: ref is the reference time at the
// local instant local.
type anchor struct {
	ref   time.Time
	local time.Time
	// offset is ref minus the local wall clock at that instant.
	offset time.Duration
}

// NewAnchored reads opts.Source once, failing if it cannot (ctx bounds that
// read only), and returns a clock anchored to it. A goroutine owned by the
// clock reads the source again every opts.Resync until Close; a failed read
// keeps the previous anchor.
func NewAnchored(ctx context.Context, opts AnchoredOptions) (*Anchored, error) {
	if opts.Source == nil {
		return nil, errors.New("clock: AnchoredOptions.Source is required")
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	opts.Timeout = min(opts.Timeout, opts.Resync)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Local == nil {
		opts.Local = time.Now
	}
	c := &Anchored{source: opts.Source, local: opts.Local, log: opts.Logger, timeout: opts.Timeout, done: make(chan struct{})}
	a, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	c.anchor.Store(a)
	bg, stop := context.WithCancel(context.Background())
	c.stop = stop
	go c.resync(bg, opts.Resync)
	return c, nil
}

// Now returns the reference time: the last anchor advanced by the local
// monotonic time since it was read, and never earlier than a time Now
// returned before.
func (c *Anchored) Now() time.Time {
	a := c.anchor.Load()
	t := a.ref.Add(c.local().Sub(a.local))
	n := t.UnixNano()
	for {
		latest := c.latest.Load()
		if n <= latest {
			return time.Unix(0, latest).UTC()
		}
		if c.latest.CompareAndSwap(latest, n) {
			return t.UTC()
		}
	}
}

// Offset is how far the reference clock was ahead of this host's wall clock
// (negative: behind) at the last successful read.
func (c *Anchored) Offset() time.Duration { return c.anchor.Load().offset }

// Close stops the resync goroutine and waits for it to end. Now keeps
// working on the last anchor. Close may be called more than once.
func (c *Anchored) Close() {
	c.closeOnce.Do(func() {
		c.stop()
		<-c.done
	})
}

// read reads the source, taking the reference time to be at the midpoint of
// the round trip.
func (c *Anchored) read(ctx context.Context) (*anchor, error) {
	t0 := c.local()
	ref, err := c.source(ctx)
	t1 := c.local()
	if err != nil {
		return nil, err
	}
	ref = ref.Add(t1.Sub(t0) / 2)
	return &anchor{ref: ref, local: t1, offset: ref.Sub(t1.Round(0))}, nil
}

// resync reads the source every interval until ctx ends. It warns once when
// reads start failing and notes when they work again.
func (c *Anchored) resync(ctx context.Context, interval time.Duration) {
	defer close(c.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		a, err := c.read(rctx)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				c.log.Warn("clock: cannot read the reference clock; keeping the last reading, advanced by this node's monotonic clock", "err", err)
				failing = true
			}
		default:
			if failing {
				c.log.Info("clock: the reference clock can be read again", "offset", a.offset)
				failing = false
			}
			c.anchor.Store(a)
		}
	}
}
