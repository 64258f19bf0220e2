// Package clocktest gives tests a clock.Local that moves only when the test
// moves it (Fake), and one that runs ahead of the host's (Skewed). A test
// on a Fake does not sleep and does not time anything: it waits for the
// code under test to arm a timer (BlockUntil), which is the event of that
// code going to sleep, and then advances the clock past it (Advance).
package clocktest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/clock"
)

// Fake is a clock.Local whose time stands still until Advance. Its methods
// are safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer // the armed timers, in the order they were armed
	// armed is closed, and replaced, whenever a timer is armed: BlockUntil
	// waits on it.
	armed chan struct{}
}

var _ clock.Local = (*Fake)(nil)

// New returns a fake clock stopped at start.
func New(start time.Time) *Fake {
	return &Fake{now: start, armed: make(chan struct{})}
}

// Now returns the clock's time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that sends the clock's time on its channel once
// an Advance reaches d from now (at once, for d <= 0). The channel holds
// one value, so Advance never waits for its reader.
func (f *Fake) NewTimer(d time.Duration) clock.Timer {
	t := &timer{f: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc returns a timer that runs fn once an Advance reaches d from
// now, on the goroutine that calls Advance, before Advance returns (for
// d <= 0: at once, on a goroutine of its own, as time.AfterFunc does).
func (f *Fake) AfterFunc(d time.Duration, fn func()) clock.Timer {
	t := &timer{f: f, fn: fn}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d. The timers due by then fire in the
// order of their times, the clock standing at each one's time as it fires;
// a timer armed meanwhile (by an AfterFunc function, say) fires too if it
// is due by then.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	end := f.now.Add(d)
	for {
		t := f.popDue(end)
		if t == nil {
			break
		}
		if t.when.After(f.now) {
			f.now = t.when
		}
		if t.fn == nil {
			t.send()
			continue
		}
		f.mu.Unlock()
		t.fn()
		f.mu.Lock()
	}
	if end.After(f.now) {
		f.now = end
	}
	f.mu.Unlock()
}

// Waiting reports how many timers are armed: how many waits of the code
// under test (a sleep, a deadline, a timer of At) the clock holds.
func (f *Fake) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntilContext waits until at least n timers are armed, or ctx ends.
func (f *Fake) BlockUntilContext(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		armed, ch := len(f.timers), f.armed
		f.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// HangGuard bounds BlockUntil. The event a test waits for takes
// microseconds; the guard only turns code that never arms its timer into
// a failure rather than a test run that hangs until go test's timeout.
const HangGuard = 30 * time.Second

// BlockUntil waits until at least n timers are armed, and fails the test
// if they are not within HangGuard.
func (f *Fake) BlockUntil(t testing.TB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	if err := f.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("clocktest: %d timers armed after %v, want %d: the code under test never went to sleep", f.Waiting(), HangGuard, n)
	}
}

// popDue removes and returns the earliest timer due by end, or nil. f.mu is
// held.
func (f *Fake) popDue(end time.Time) *timer {
	i := -1
	for j, t := range f.timers {
		if !t.when.After(end) && (i < 0 || t.when.Before(f.timers[i].when)) {
			i = j
		}
	}
	if i < 0 {
		return nil
	}
	t := f.timers[i]
	f.timers = slices.Delete(f.timers, i, i+1)
	t.armed = false
	return t
}

// timer is a timer of a Fake. Its fields are under f.mu.
type timer struct {
	f     *Fake
	when  time.Time
	c     chan time.Time // NewTimer's; nil for AfterFunc's
	fn    func()         // AfterFunc's
	armed bool
}

func (t *timer) C() <-chan time.Time { return t.c }

// send sends the timer's time on its channel. f.mu is held, so that a Stop
// either comes before (and the timer does not fire) or drops the value.
func (t *timer) send() {
	select {
	case t.c <- t.when:
	default: // a value not yet received stays, as a *time.Timer's would
	}
}

// Stop disarms the timer and reports whether it was armed. As with a
// *time.Timer since Go 1.23, no value sent before Stop is received after.
func (t *timer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.disarm()
}

// Reset arms the timer for d from now and reports whether it was armed.
func (t *timer) Reset(d time.Duration) bool {
	f := t.f
	f.mu.Lock()
	was := t.disarm()
	t.when = f.now.Add(d)
	if d <= 0 {
		if t.fn != nil {
			go t.fn()
		} else {
			t.send()
		}
		f.mu.Unlock()
		return was
	}
	t.armed = true
	f.timers = append(f.timers, t)
	close(f.armed)
	f.armed = make(chan struct{})
	f.mu.Unlock()
	return was
}

// disarm removes t from the armed timers and drops a value its channel
// holds. f.mu is held.
func (t *timer) disarm() bool {
	if t.c != nil {
		select {
		case <-t.c:
		default:
		}
	}
	if !t.armed {
		return false
	}
	t.armed = false
	t.f.timers = slices.DeleteFunc(t.f.timers, func(u *timer) bool { return u == t })
	return true
}

// Skewed returns the host's clock (clock.System) running d ahead of it
// (behind, for d < 0), for tests that show a node's skew changes nothing.
func Skewed(d time.Duration) clock.Local { return skewed{clock.System, d} }

type skewed struct {
	clock.Local
	d time.Duration
}

func (s skewed) Now() time.Time { return s.Local.Now().Add(s.d) }
