package clock

import (
	"context"
	"time"
)

// Local is a node's own clock: the time it reads and the timers it waits
// on. An Anchored clock advances its readings by Local's elapsed time and
// waits on Local's timers between reads; the wake-up hub (internal/wakeup)
// arms its timers on it. System is the host's clock, which production code
// uses; a test passes a clocktest.Fake, a clock that moves only when the
// test advances it, so that it waits on events instead of on time.
type Local interface {
	// Now returns the current time. Differences of its values are the
	// elapsed time, so they must not jump when the wall clock is stepped:
	// time.Now's values carry Go's monotonic reading for that.
	Now() time.Time
	// NewTimer is time.NewTimer on this clock.
	NewTimer(d time.Duration) Timer
	// AfterFunc is time.AfterFunc on this clock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer of a Local clock, as *time.Timer is of the host's.
type Timer interface {
	// C is the channel the timer sends its time on; nil for a timer of
	// AfterFunc.
	C() <-chan time.Time
	// Stop and Reset are *time.Timer's.
	Stop() bool
	Reset(d time.Duration) bool
}

// System is the host's clock: time.Now and the runtime's timers.
var System Local = system{}

type system struct{}

func (system) Now() time.Time                 { return time.Now() }
func (system) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }
func (system) AfterFunc(d time.Duration, f func()) Timer {
	return systemTimer{time.AfterFunc(d, f)}
}

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time        { return s.t.C }
func (s systemTimer) Stop() bool                 { return s.t.Stop() }
func (s systemTimer) Reset(d time.Duration) bool { return s.t.Reset(d) }

// Sleep waits d on c, and reports false if ctx ended first (at once, for a
// d of zero or less, whether ctx has ended).
func Sleep(ctx context.Context, c Local, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
