package clock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sepp-dev/sepp/internal/clock"
)

// TestMain checks that no test leaves a resync goroutine running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reference is a reference clock the test sets: each read returns the next
// of its readings (the last one again once they run out), or its error.
type reference struct {
	mu       sync.Mutex
	readings []time.Time
	err      error
	reads    int
}

func (r *reference) read(context.Context) (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	if r.err != nil && r.reads > 1 {
		return time.Time{}, r.err
	}
	t := r.readings[min(r.reads, len(r.readings))-1]
	return t, nil
}

func (r *reference) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads
}

func (r *reference) setErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// waitReads waits until the clock has read r n times. The resync goroutine
// stores each anchor before its next read, so at n reads the (n-1)th is in
// use.
func waitReads(t *testing.T, r *reference, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the clock read its source %d times in 10 s, want %d", r.count(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func start(t *testing.T, opts clock.AnchoredOptions) *clock.Anchored {
	t.Helper()
	c, err := clock.NewAnchored(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

var base = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// within fails unless lo <= got <= hi.
func within(t *testing.T, what string, got, lo, hi time.Time) {
	t.Helper()
	if got.Before(lo) || got.After(hi) {
		t.Fatalf("%s = %v, want within [%v, %v]", what, got, lo, hi)
	}
}

// TestFollowsSource: Now is the source's time plus the time elapsed since
// it was read, whatever this host's wall clock says (2031 here), and a
// local clock skewed by 30 s changes nothing.
func TestFollowsSource(t *testing.T) {
	for _, skew := range []time.Duration{0, 30 * time.Second, -time.Hour} {
		ref := &reference{readings: []time.Time{base}}
		before := time.Now()
		c := start(t, clock.AnchoredOptions{Source: ref.read, Resync: time.Hour,
			Local: func() time.Time { return time.Now().Add(skew) }})
		for range 3 {
			got := c.Now()
			within(t, "Now", got, base, base.Add(time.Since(before)))
			time.Sleep(5 * time.Millisecond)
		}
		// The round trip and the sleeps are at least 10 ms.
		if got := c.Now(); got.Sub(base) < 10*time.Millisecond {
			t.Fatalf("skew %v: Now = %v, not advanced by the elapsed time", skew, got)
		}
		if off := c.Offset(); off > base.Sub(before)-skew || off < base.Sub(time.Now())-skew {
			t.Fatalf("skew %v: Offset = %v, want about %v", skew, off, base.Sub(before)-skew)
		}
		if got := c.Now().Location(); got != time.UTC {
			t.Fatalf("Now is in %v, want UTC", got)
		}
	}
}

// TestResyncForward: a resync takes the source's new time.
func TestResyncForward(t *testing.T) {
	ref := &reference{readings: []time.Time{base, base.Add(time.Hour)}}
	c := start(t, clock.AnchoredOptions{Source: ref.read, Resync: time.Millisecond, Samples: 1})
	// A reading replaces the anchor once it is as exact as the anchor has
	// become: within a few resyncs here.
	deadline := time.Now().Add(10 * time.Second)
	for c.Now().Before(base.Add(time.Hour)) {
		if time.Now().After(deadline) {
			t.Fatalf("Now = %v 10 s after the source moved to %v", c.Now(), base.Add(time.Hour))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestResyncNeverBackwards: a resync to an earlier time does not put Now
// back; Now stays at the latest time it returned until the source catches up.
func TestResyncNeverBackwards(t *testing.T) {
	ref := &reference{readings: []time.Time{base, base.Add(-time.Hour)}}
	before := time.Now()
	c := start(t, clock.AnchoredOptions{Source: ref.read, Resync: time.Millisecond, Samples: 1})
	first := c.Now()
	within(t, "Now before the resync", first, base, base.Add(time.Since(before)))
	waitReads(t, ref, 3)
	prev := first
	for range 100 {
		got := c.Now()
		if got.Before(prev) {
			t.Fatalf("Now went back from %v to %v", prev, got)
		}
		prev = got
	}
	within(t, "Now after the resync", prev, first, base.Add(time.Since(before)))
}

// TestFailingSourceKeepsAnchor: reads that fail keep the last anchor,
// advanced by the elapsed time, and log one warning for the whole streak;
// when the source answers again the clock takes its time.
func TestFailingSourceKeepsAnchor(t *testing.T) {
	ref := &reference{readings: []time.Time{base, base.Add(time.Hour)}, err: errors.New("connection refused")}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, nil))
	before := time.Now()
	c := start(t, clock.AnchoredOptions{Source: ref.read, Resync: time.Millisecond, Logger: logger})
	waitReads(t, ref, 5)
	within(t, "Now while the source fails", c.Now(), base, base.Add(time.Since(before)))

	ref.setErr(nil)
	// A reading replaces the anchor once it is as exact as the anchor has
	// become: within a few reads.
	deadline := time.Now().Add(10 * time.Second)
	for c.Now().Before(base.Add(time.Hour)) {
		if time.Now().After(deadline) {
			t.Fatalf("Now = %v 10 s after the source answers again; want at least %v", c.Now(), base.Add(time.Hour))
		}
		time.Sleep(time.Millisecond)
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if got := strings.Count(out, "level=WARN"); got != 1 {
		t.Fatalf("%d warnings for one streak of failed reads, want 1:\n%s", got, out)
	}
	if !strings.Contains(out, "connection refused") || !strings.Contains(out, "can be read again") {
		t.Fatalf("logs lack the failure or the recovery:\n%s", out)
	}
}

// TestStartFails: a source that cannot be read at start fails NewAnchored.
func TestStartFails(t *testing.T) {
	down := errors.New("no database")
	_, err := clock.NewAnchored(context.Background(), clock.AnchoredOptions{
		Source: func(context.Context) (time.Time, error) { return time.Time{}, down }})
	if !errors.Is(err, down) {
		t.Fatalf("NewAnchored = %v, want %v", err, down)
	}
}

// TestCloseStopsResync: Close ends the resync goroutine, Now still answers
// on the last anchor, and a second Close is harmless.
func TestCloseStopsResync(t *testing.T) {
	others := goleak.IgnoreCurrent()
	ref := &reference{readings: []time.Time{base}}
	c, err := clock.NewAnchored(context.Background(), clock.AnchoredOptions{Source: ref.read, Resync: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitReads(t, ref, 2)
	c.Close()
	if err := goleak.Find(others); err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if c.Now().Before(base) {
		t.Fatal("Now after Close went before the last anchor")
	}
	c.Close()
}

type lockedWriter struct {
	buf *bytes.Buffer
	mu  *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// BenchmarkNow measures Now, on every server call's path, from one
// goroutine and from many.
func BenchmarkNow(b *testing.B) {
	c, err := clock.NewAnchored(context.Background(), clock.AnchoredOptions{
		Source: func(context.Context) (time.Time, error) { return time.Now(), nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			c.Now()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Now()
			}
		})
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			time.Now()
		}
	})
}

// TestSlowReadNotTrusted: a read that waited before the source read its
// clock (a database restarting, a paused node) has a long round trip, and
// its midpoint would put the clock ahead by half of it. The clock keeps
// its exact anchor instead, and takes the quick sample of a read that
// waited only on its first call (a new connection).
func TestSlowReadNotTrusted(t *testing.T) {
	began := time.Now()
	truth := func() time.Time { return base.Add(time.Since(began)) }
	var mu sync.Mutex
	calls := 0
	slow := 0 // 1: every call waits; 2: every other call, as the first after a reconnect
	source := func(context.Context) (time.Time, error) {
		mu.Lock()
		calls++
		wait := slow == 1 || (slow == 2 && calls%2 == 1)
		mu.Unlock()
		if wait {
			time.Sleep(200 * time.Millisecond)
		}
		return truth(), nil
	}
	c := start(t, clock.AnchoredOptions{Source: source, Resync: time.Millisecond, Samples: 1})
	mu.Lock()
	slow = 1
	mu.Unlock()
	for range 10 { // several slow reads
		time.Sleep(50 * time.Millisecond)
		if off := c.Now().Sub(truth()); off > 20*time.Millisecond || off < -20*time.Millisecond {
			t.Fatalf("Now is off the source by %v after slow reads, want within 20 ms (a slow read's midpoint is 100 ms off)", off)
		}
	}

	// With two samples a read keeps the quick one.
	c.Close() // its reads would change which calls are slow
	mu.Lock()
	slow, calls = 2, 0
	mu.Unlock()
	c2 := start(t, clock.AnchoredOptions{Source: source, Resync: time.Hour, Samples: 2})
	if off := c2.Now().Sub(truth()); off > 20*time.Millisecond || off < -20*time.Millisecond {
		t.Fatalf("Now is off the source by %v, want within 20 ms: the read kept its slow sample", off)
	}
}

// slowFirst is a source whose first n reads wait d before they read the
// reference (the request waited on its way: the read is late), and the
// reference it reads.
func slowFirst(n int, d time.Duration) (source func(context.Context) (time.Time, error), truth func() time.Time) {
	began := time.Now()
	truth = func() time.Time { return base.Add(time.Since(began)) }
	var mu sync.Mutex
	calls := 0
	source = func(context.Context) (time.Time, error) {
		mu.Lock()
		calls++
		slow := calls <= n
		mu.Unlock()
		if slow {
			time.Sleep(d)
		}
		return truth(), nil
	}
	return source, truth
}

// TestSlowStartReadAgain: a node that starts while its database is slow
// reads again until it has an exact reading, rather than serving on a clock
// half a slow round trip ahead until its first resync.
func TestSlowStartReadAgain(t *testing.T) {
	source, truth := slowFirst(2, 200*time.Millisecond)
	c := start(t, clock.AnchoredOptions{Source: source, Resync: time.Hour, Samples: 1})
	if off := c.Now().Sub(truth()); off > 20*time.Millisecond || off < -20*time.Millisecond {
		t.Fatalf("Now is off the source by %v after a slow start, want within 20 ms", off)
	}
}

// TestLongSlowStartWaitsForExactReading: a node that starts while every
// read of its database waits (a lossy link) keeps reading, up to StartWait,
// until one is exact to 10 ms, instead of serving on a clock ahead by half
// a slow round trip (it read ten more times and then served on the best).
func TestLongSlowStartWaitsForExactReading(t *testing.T) {
	source, truth := slowFirst(15, 60*time.Millisecond)
	c := start(t, clock.AnchoredOptions{Source: source, Resync: time.Hour, Samples: 1})
	if u := c.Uncertainty(); u > 10*time.Millisecond {
		t.Fatalf("Uncertainty %v after start, want within 10 ms", u)
	}
	if off := c.Now().Sub(truth()); off > 10*time.Millisecond || off < -10*time.Millisecond {
		t.Fatalf("Now is off the source by %v after a long slow start, want within 10 ms", off)
	}
}
