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
	// Samples is how many times each read takes the source's time, one
	// after the other, keeping the one with the shortest round trip: the
	// first call after a lost connection waits for a new one. Default 4.
	Samples int
	// Local is the node's own clock: the clock advances its last reading
	// by Local's elapsed time, and waits on Local's timers between reads.
	// Default System. A test passes a skewed clock, to show the skew
	// changes nothing, or a clocktest.Fake, to move time itself.
	Local Local
	// StartWait bounds how long NewAnchored reads again for a reading exact
	// to 10 ms (a database slow to answer, a lossy link) before it returns
	// the best one it has, which Uncertainty reports. Default 10 s.
	StartWait time.Duration
}

// DefaultResync is AnchoredOptions.Resync's default.
const DefaultResync = 10 * time.Second

// Anchored is a clock anchored to a reference time source. Its methods are
// safe for concurrent use.
type Anchored struct {
	source  func(context.Context) (time.Time, error)
	samples int
	local   Local
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
	// uncertainty is half the round trip of the reading: the source read
	// its clock somewhere within it, so ref is off by at most that.
	uncertainty time.Duration
}

// An anchor's uncertainty grows with the time since it was read, by the
// rate at which a node's monotonic clock may drift from the reference's
// (quartz clocks: within 50 ppm each; taken at four times that).
const driftBound = 200e-6

// wellAnchored is the uncertainty below which the clock resyncs at its
// regular pace; a less exact anchor (read while the database was slow or
// restarting) is read again every retryPoorAnchor.
const (
	wellAnchored    = 2 * time.Millisecond
	retryPoorAnchor = 250 * time.Millisecond
	// At start the clock reads again, 50 ms apart, while its reading is
	// less exact than startUncertainty, for at most AnchoredOptions.StartWait.
	startUncertainty = 10 * time.Millisecond
	DefaultStartWait = 10 * time.Second
)

// uncertaintyAt is a's uncertainty at local instant now.
func (a *anchor) uncertaintyAt(now time.Time) time.Duration {
	return a.uncertainty + time.Duration(float64(now.Sub(a.local))*driftBound)
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
		opts.Local = System
	}
	if opts.Samples <= 0 {
		opts.Samples = 4
	}
	if opts.StartWait <= 0 {
		opts.StartWait = DefaultStartWait
	}
	c := &Anchored{source: opts.Source, samples: opts.Samples, local: opts.Local, log: opts.Logger, timeout: opts.Timeout, done: make(chan struct{})}
	a, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	// A node starting while its database is slow would serve until its
	// first better reading on a clock off by up to half a slow round trip
	// (ahead, when the request waited on its way: a window shortened by
	// that much): read again for a reading exact to startUncertainty.
	for deadline := c.local.Now().Add(opts.StartWait); a.uncertainty > startUncertainty && c.local.Now().Before(deadline); {
		if !Sleep(ctx, c.local, retryPoorAnchor/5) {
			break
		}
		if b, err := c.read(ctx); err == nil && b.uncertainty < a.uncertainty {
			a = b
		}
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
	t := a.ref.Add(c.local.Now().Sub(a.local))
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

// Uncertainty is how far Now may be from the reference's time: half the
// round trip of the reading it is anchored to, plus the drift since.
func (c *Anchored) Uncertainty() time.Duration {
	return c.anchor.Load().uncertaintyAt(c.local.Now())
}

// Close stops the resync goroutine and waits for it to end. Now keeps
// working on the last anchor. Close may be called more than once.
func (c *Anchored) Close() {
	c.closeOnce.Do(func() {
		c.stop()
		<-c.done
	})
}

// read takes the source's time c.samples times and keeps the reading with
// the shortest round trip, taking the reference time to be at its
// midpoint. It fails only when every sample failed.
func (c *Anchored) read(ctx context.Context) (*anchor, error) {
	var best *anchor
	var lastErr error
	for i := 0; i < c.samples && ctx.Err() == nil; i++ {
		t0 := c.local.Now()
		ref, err := c.source(ctx)
		t1 := c.local.Now()
		if err != nil {
			lastErr = err
			continue
		}
		half := t1.Sub(t0) / 2
		ref = ref.Add(half)
		if best == nil || half < best.uncertainty {
			best = &anchor{ref: ref, local: t1, offset: ref.Sub(t1.Round(0)), uncertainty: half}
		}
	}
	if best == nil {
		if lastErr == nil {
			lastErr = ctx.Err()
		}
		return nil, lastErr
	}
	return best, nil
}

// resync reads the source every interval until ctx ends (every
// retryPoorAnchor while the anchor is not well anchored). A reading replaces
// the anchor only when it is at least as exact as the anchor is by now: a
// read that waited (a node paused, a database restarting, a lossy link) has
// a long round trip, and its midpoint would put the clock off by up to half
// of it. It warns once when reads start failing and notes when they work
// again.
func (c *Anchored) resync(ctx context.Context, interval time.Duration) {
	defer close(c.done)
	failing := false
	for {
		wait := interval
		if cur := c.anchor.Load(); cur.uncertaintyAt(c.local.Now()) > wellAnchored {
			wait = min(wait, retryPoorAnchor)
		}
		if !Sleep(ctx, c.local, wait) {
			return
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
			if cur := c.anchor.Load(); a.uncertainty <= cur.uncertaintyAt(a.local) {
				c.anchor.Store(a)
			}
		}
	}
}
