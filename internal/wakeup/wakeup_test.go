package wakeup_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sepp-dev/sepp/internal/clock/clocktest"
	"github.com/sepp-dev/sepp/internal/wakeup"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeHub returns a hub whose clocks, Now and Local, are one fake clock.
func fakeHub(t *testing.T, opts wakeup.Options) (*wakeup.Hub, *clocktest.Fake) {
	f := clocktest.New(start)
	opts.Local = f
	h := wakeup.New(opts)
	t.Cleanup(h.Close)
	return h, f
}

// waitAsync runs Wait on its own goroutine and returns its outcome's channel.
func waitAsync(h *wakeup.Hub, deadline time.Time, check func() (bool, time.Duration, error)) <-chan wakeup.Outcome {
	out := make(chan wakeup.Outcome, 1)
	go func() {
		o, _ := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: deadline}, check)
		out <- o
	}()
	return out
}

// receive returns what ch yields, failing the test if it yields nothing
// within clocktest.HangGuard (a hang, not a slow answer: the event takes
// microseconds).
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(clocktest.HangGuard):
		t.Fatalf("%s: nothing after %v", what, clocktest.HangGuard)
		panic("unreachable")
	}
}

// waitUntil polls cond, which the hub's goroutines make true, until it
// holds: the sleep only paces the poll, and clocktest.HangGuard only turns a
// hang into a failure.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(clocktest.HangGuard); !cond(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, clocktest.HangGuard)
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestNotifyWakesOnlyItsKey(t *testing.T) {
	h := wakeup.New(wakeup.Options{})
	defer h.Close()
	a, cancelA := h.Register("a", "b")
	defer cancelA()
	c, cancelC := h.Register("c")
	defer cancelC()
	h.Notify("b")
	if !isClosed(a) {
		t.Fatal("a waiter on b was not woken")
	}
	if isClosed(c) {
		t.Fatal("a waiter on c was woken by b")
	}
	if n := h.Waiting("a"); n != 0 {
		t.Fatalf("a woken waiter stays registered on its other key: %d", n)
	}
	h.NotifyPrefix("")
	if !isClosed(c) {
		t.Fatal("NotifyPrefix(\"\") did not wake every waiter")
	}
}

func TestUnregister(t *testing.T) {
	h := wakeup.New(wakeup.Options{})
	defer h.Close()
	ch, cancel := h.Register("q")
	cancel()
	h.Notify("q")
	if isClosed(ch) || h.Waiting("q") != 0 {
		t.Fatal("an unregistered waiter was woken or kept")
	}
}

func TestWaitWakesOnNotify(t *testing.T) {
	h, f := fakeHub(t, wakeup.Options{})
	var ready atomic.Bool
	var checks atomic.Int32
	out := waitAsync(h, f.Now().Add(time.Minute), func() (bool, time.Duration, error) {
		checks.Add(1)
		return ready.Load(), 0, nil
	})
	f.BlockUntil(t, 1) // the waiter looked and sleeps
	if n := h.Waiting("q"); n != 1 {
		t.Fatalf("Waiting = %d while the waiter sleeps, want 1", n)
	}
	ready.Store(true)
	h.Notify("q")
	if o := receive(t, out, "Wait after Notify"); o != wakeup.Done {
		t.Fatalf("Wait = %v, want Done", o)
	}
	if n := checks.Load(); n != 2 {
		t.Fatalf("%d checks, want 2 (one before the wait, one after the wake-up)", n)
	}
}

// TestWaitDoesNotPoll: with nothing happening, a waiter looks once, then
// once at its deadline... and not in between.
func TestWaitDoesNotPoll(t *testing.T) {
	h, f := fakeHub(t, wakeup.Options{})
	var checks atomic.Int32
	out := waitAsync(h, f.Now().Add(500*time.Millisecond), func() (bool, time.Duration, error) {
		checks.Add(1)
		return false, 0, nil
	})
	for range 4 {
		f.BlockUntil(t, 1)
		f.Advance(100 * time.Millisecond)
	}
	f.BlockUntil(t, 1)
	if n := checks.Load(); n != 1 {
		t.Fatalf("%d checks 400 ms into a 500 ms wait with nothing happening, want 1", n)
	}
	f.Advance(100 * time.Millisecond)
	if o := receive(t, out, "Wait at its deadline"); o != wakeup.TimedOut || checks.Load() != 2 {
		t.Fatalf("Wait = %v after %d checks, want TimedOut after 2", o, checks.Load())
	}
}

// TestWaitAgain: a check's again is when it looks next, with nothing
// notified.
func TestWaitAgain(t *testing.T) {
	h, f := fakeHub(t, wakeup.Options{})
	var checks atomic.Int32
	out := waitAsync(h, f.Now().Add(time.Minute), func() (bool, time.Duration, error) {
		return checks.Add(1) == 3, 50 * time.Millisecond, nil
	})
	for want := int32(1); want < 3; want++ {
		f.BlockUntil(t, 1)
		f.Advance(49 * time.Millisecond)
		f.BlockUntil(t, 1)
		if n := checks.Load(); n != want {
			t.Fatalf("%d checks 49 ms after check %d, want %d: it looked before its again", n, want, want)
		}
		f.Advance(time.Millisecond)
	}
	if o := receive(t, out, "Wait"); o != wakeup.Done || checks.Load() != 3 {
		t.Fatalf("Wait = %v after %d checks, want Done after 3", o, checks.Load())
	}
	if d := f.Now().Sub(start); d != 100*time.Millisecond {
		t.Fatalf("done at %v on the fake clock, want 100 ms", d)
	}
}

// TestRecheckWakesOneWaiterPerKey: the safety re-check costs one check per
// key, not per waiter; and when the woken waiter finds something nothing
// announced, the others of its key look too.
func TestRecheckWakesOneWaiterPerKey(t *testing.T) {
	h, f := fakeHub(t, wakeup.Options{Recheck: 100 * time.Millisecond})
	var checks atomic.Int64
	var found atomic.Bool
	const waiters = 20
	var wg sync.WaitGroup
	outs := make(chan wakeup.Outcome, waiters)
	for range waiters {
		wg.Go(func() {
			out, _ := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: f.Now().Add(time.Minute)},
				func() (bool, time.Duration, error) { checks.Add(1); return found.Load(), 0, nil })
			outs <- out
		})
	}
	allAsleep := func() bool { return h.Waiting("q") == waiters }
	waitUntil(t, "every waiter asleep", allAsleep)
	for i := range 5 {
		before := checks.Load()
		f.Advance(100 * time.Millisecond)
		waitUntil(t, "every waiter asleep again", allAsleep)
		if n := checks.Load() - before; n != 1 {
			t.Fatalf("re-check %d: %d checks by %d waiters of one key, want 1", i+1, n, waiters)
		}
	}
	found.Store(true) // unannounced
	f.Advance(100 * time.Millisecond)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	receive(t, done, "the waiters' ends")
	close(outs)
	for out := range outs {
		if out != wakeup.Done {
			t.Fatalf("a waiter ended %v", out)
		}
	}
}

// TestAtWakesAtTheEarliestTime: times given out of order fire in order, each
// at its own time, through one timer.
func TestAtWakesAtTheEarliestTime(t *testing.T) {
	h, f := fakeHub(t, wakeup.Options{Granularity: time.Millisecond})
	late, cancelLate := h.Register("late")
	defer cancelLate()
	early, cancelEarly := h.Register("early")
	defer cancelEarly()
	h.At("late", start.Add(400*time.Millisecond))
	h.At("early", start.Add(100*time.Millisecond))
	h.At("early", start.Add(100*time.Millisecond)) // a repeat is held once
	if n := h.Pending(); n != 2 {
		t.Fatalf("pending %d, want 2", n)
	}
	if n := f.Waiting(); n != 1 {
		t.Fatalf("%d timers armed for two times, want 1", n)
	}
	f.Advance(99 * time.Millisecond)
	if isClosed(early) {
		t.Fatal("early woke at 99 ms, before its time")
	}
	f.Advance(time.Millisecond) // the timer's function runs within Advance
	if !isClosed(early) || isClosed(late) {
		t.Fatalf("at 100 ms: early woken %v, late woken %v; want early only", isClosed(early), isClosed(late))
	}
	f.Advance(299 * time.Millisecond)
	if isClosed(late) {
		t.Fatal("late woke at 399 ms, before its time")
	}
	f.Advance(time.Millisecond)
	if !isClosed(late) {
		t.Fatal("late did not wake at 400 ms")
	}
	if n := h.Pending(); n != 0 || f.Waiting() != 0 {
		t.Fatalf("pending %d, timers %d after both fired", n, f.Waiting())
	}
	// A time already past wakes at once.
	now, cancel := h.Register("now")
	defer cancel()
	h.At("now", f.Now().Add(-time.Second))
	if !isClosed(now) {
		t.Fatal("a past time did not wake at once")
	}
}

// TestAtOnTheCallersClock: times are on the hub's clock (Now), not on the
// clock its timers run on (Local).
func TestAtOnTheCallersClock(t *testing.T) {
	var mu sync.Mutex
	ref := start.Add(time.Hour)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return ref }
	h, f := fakeHub(t, wakeup.Options{Now: now})
	ch, cancel := h.Register("q")
	defer cancel()
	h.At("q", ref.Add(50*time.Millisecond))
	f.Advance(200 * time.Millisecond) // the timer fires, more than once, on a Now that stands still
	if isClosed(ch) {
		t.Fatal("woke before Now reached the time")
	}
	mu.Lock()
	ref = ref.Add(50 * time.Millisecond)
	mu.Unlock()
	f.Advance(50 * time.Millisecond)
	if !isClosed(ch) {
		t.Fatal("did not wake once Now passed the time")
	}
}

func TestAtBounded(t *testing.T) {
	h := wakeup.New(wakeup.Options{MaxPending: 3})
	defer h.Close()
	for i := range 10 {
		h.At("q", time.Now().Add(time.Hour+time.Duration(i)*time.Second))
	}
	if n := h.Pending(); n != 3 {
		t.Fatalf("pending %d, want the bound 3", n)
	}
}

// TestNoLostWakeUp races a notifier against many waiters whose check does
// not yet see the change: each waiter must end Done, none may sleep to its
// deadline. The change is published before Notify, as the server does (the
// store commits, then the handler notifies).
func TestNoLostWakeUp(t *testing.T) {
	h := wakeup.New(wakeup.Options{})
	defer h.Close()
	for round := range 200 {
		var published atomic.Bool
		var wg sync.WaitGroup
		results := make(chan wakeup.Outcome, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, _ := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: time.Now().Add(20 * time.Second)},
					func() (bool, time.Duration, error) { return published.Load(), 0, nil })
				results <- out
			}()
		}
		go func() {
			published.Store(true)
			h.Notify("q")
		}()
		wg.Wait()
		close(results)
		for out := range results {
			if out != wakeup.Done {
				t.Fatalf("round %d: a waiter ended %v: its wake-up was lost", round, out)
			}
		}
	}
}

func TestCloseEndsEveryWait(t *testing.T) {
	f := clocktest.New(start)
	h := wakeup.New(wakeup.Options{Local: f})
	h.At("q", start.Add(time.Hour))
	var wg sync.WaitGroup
	outs := make(chan wakeup.Outcome, 50)
	for range 50 {
		wg.Go(func() {
			out, _ := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: start.Add(time.Hour)},
				func() (bool, time.Duration, error) { return false, 0, nil })
			outs <- out
		})
	}
	f.BlockUntil(t, 51) // At's timer and every waiter's
	if n := h.Waiting("q"); n != 50 {
		t.Fatalf("Waiting = %d, want 50", n)
	}
	h.Close()
	h.Close() // twice is fine
	wg.Wait()
	close(outs)
	for out := range outs {
		if out != wakeup.Stopped {
			t.Fatalf("Wait = %v after Close, want Stopped", out)
		}
	}
	if n := f.Waiting(); n != 0 {
		t.Fatalf("%d timers armed after Close", n)
	}
	// After Close: a Wait looks once and stops.
	out, _ := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: start.Add(time.Hour)},
		func() (bool, time.Duration, error) { return false, 0, nil })
	if out != wakeup.Stopped || h.Pending() != 0 {
		t.Fatalf("Wait after Close = %v, pending %d", out, h.Pending())
	}
	// goleak (TestMain) checks that no goroutine outlives the hub.
}

func TestWaitCancelled(t *testing.T) {
	h, f := fakeHub(t, wakeup.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		out wakeup.Outcome
		err error
	}
	res := make(chan result, 1)
	go func() {
		out, err := h.Wait(ctx, []string{"q"}, wakeup.WaitOptions{Deadline: start.Add(time.Hour)},
			func() (bool, time.Duration, error) { return false, 0, nil })
		res <- result{out, err}
	}()
	f.BlockUntil(t, 1)
	cancel()
	if r := receive(t, res, "Wait after its context ended"); r.out != wakeup.Cancelled || r.err == nil {
		t.Fatalf("Wait = %v, %v", r.out, r.err)
	}
	if h.Waiting("q") != 0 {
		t.Fatal("a cancelled waiter stays registered")
	}
}
