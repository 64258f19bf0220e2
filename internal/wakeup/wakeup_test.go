package wakeup_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sepp-dev/sepp/internal/wakeup"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
	h := wakeup.New(wakeup.Options{})
	defer h.Close()
	var ready atomic.Bool
	checks := 0
	go func() {
		for h.Waiting("q") == 0 {
			time.Sleep(time.Millisecond)
		}
		ready.Store(true)
		h.Notify("q")
	}()
	start := time.Now()
	out, err := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: time.Now().Add(time.Minute)},
		func() (bool, time.Duration, error) {
			checks++
			return ready.Load(), 0, nil
		})
	if out != wakeup.Done || err != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("Wait = %v, %v after %v", out, err, time.Since(start))
	}
	if checks != 2 {
		t.Fatalf("%d checks, want 2 (one before the wait, one after the wake-up)", checks)
	}
}

// TestWaitDoesNotPoll: with nothing happening, a waiter looks once, then
// once at its deadline... and not in between.
func TestWaitDoesNotPoll(t *testing.T) {
	h := wakeup.New(wakeup.Options{})
	defer h.Close()
	checks := 0
	out, _ := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: time.Now().Add(500 * time.Millisecond)},
		func() (bool, time.Duration, error) { checks++; return false, 0, nil })
	if out != wakeup.TimedOut || checks != 2 {
		t.Fatalf("Wait = %v after %d checks, want TimedOut after 2", out, checks)
	}
}

func TestWaitAgain(t *testing.T) {
	h := wakeup.New(wakeup.Options{})
	defer h.Close()
	checks := 0
	start := time.Now()
	out, _ := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: time.Now().Add(time.Minute)},
		func() (bool, time.Duration, error) { checks++; return checks == 3, 50 * time.Millisecond, nil })
	if out != wakeup.Done || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("Wait = %v after %v", out, time.Since(start))
	}
}

// TestRecheckWakesOneWaiterPerKey: the safety re-check costs one check per
// key, not per waiter; and when the woken waiter finds something nothing
// announced, the others of its key look too.
func TestRecheckWakesOneWaiterPerKey(t *testing.T) {
	h := wakeup.New(wakeup.Options{Recheck: 100 * time.Millisecond})
	defer h.Close()
	var checks atomic.Int64
	var found atomic.Bool
	const waiters = 20
	var wg sync.WaitGroup
	outs := make(chan wakeup.Outcome, waiters)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _ := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: time.Now().Add(time.Minute)},
				func() (bool, time.Duration, error) { checks.Add(1); return found.Load(), 0, nil })
			outs <- out
		}()
	}
	for h.Waiting("q") < waiters {
		time.Sleep(time.Millisecond)
	}
	base := checks.Load()
	time.Sleep(550 * time.Millisecond) // about 5 re-checks
	if n := checks.Load() - base; n < 2 || n > 10 {
		t.Fatalf("%d checks in 5 re-check intervals with %d waiters, want about 5", n, waiters)
	}
	found.Store(true) // unannounced
	wg.Wait()
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
	h := wakeup.New(wakeup.Options{Granularity: time.Millisecond})
	defer h.Close()
	start := time.Now()
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
	<-early
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("early woke after %v, before its time", d)
	}
	if isClosed(late) {
		t.Fatal("late woke with early")
	}
	<-late
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("late woke after %v, before its time", d)
	}
	if n := h.Pending(); n != 0 {
		t.Fatalf("pending %d after both fired", n)
	}
	// A time already past wakes at once.
	now, cancel := h.Register("now")
	defer cancel()
	h.At("now", time.Now().Add(-time.Second))
	if !isClosed(now) {
		t.Fatal("a past time did not wake at once")
	}
}

// TestAtOnTheCallersClock: times are on the hub's clock, not the wall's.
func TestAtOnTheCallersClock(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	h := wakeup.New(wakeup.Options{Now: now})
	defer h.Close()
	ch, cancel := h.Register("q")
	defer cancel()
	h.At("q", clock.Add(50*time.Millisecond))
	time.Sleep(200 * time.Millisecond) // the timer fired at least once, on a clock that stood still
	if isClosed(ch) {
		t.Fatal("woke before the clock reached the time")
	}
	mu.Lock()
	clock = clock.Add(50 * time.Millisecond)
	mu.Unlock()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("did not wake once the clock passed the time")
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
	h := wakeup.New(wakeup.Options{})
	h.At("q", time.Now().Add(time.Hour))
	var wg sync.WaitGroup
	outs := make(chan wakeup.Outcome, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _ := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: time.Now().Add(time.Hour)},
				func() (bool, time.Duration, error) { return false, 0, nil })
			outs <- out
		}()
	}
	for h.Waiting("q") < 50 {
		time.Sleep(time.Millisecond)
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
	// After Close: a Wait looks once and stops.
	out, _ := h.Wait(context.Background(), []string{"q"}, wakeup.WaitOptions{Deadline: time.Now().Add(time.Hour)},
		func() (bool, time.Duration, error) { return false, 0, nil })
	if out != wakeup.Stopped || h.Pending() != 0 {
		t.Fatalf("Wait after Close = %v, pending %d", out, h.Pending())
	}
	// goleak (TestMain) checks that no goroutine outlives the hub.
}

func TestWaitCancelled(t *testing.T) {
	h := wakeup.New(wakeup.Options{})
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	out, err := h.Wait(ctx, []string{"q"}, wakeup.WaitOptions{Deadline: time.Now().Add(time.Hour)},
		func() (bool, time.Duration, error) { return false, 0, nil })
	if out != wakeup.Cancelled || err == nil {
		t.Fatalf("Wait = %v, %v", out, err)
	}
	if h.Waiting("q") != 0 {
		t.Fatal("a cancelled waiter stays registered")
	}
}
