package clock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sepp-dev/sepp/internal/clock"
	"github.com/sepp-dev/sepp/internal/clock/clocktest"
)

// TestMain checks that no test leaves a resync goroutine running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// database is the reference clock of a test, read over a link whose delays
// are on the test's fake clock: its time is base plus the fake time elapsed
// since the test began, plus a step the test sets. A read waits, on the fake
// clock, the delay the test sets for it before the database reads its clock
// (the request waited on its way: the read is late), and fails with err from
// the second read on while err is set.
type database struct {
	local *clocktest.Fake
	began time.Time

	mu    sync.Mutex
	step  time.Duration
	err   error
	delay func(read int) time.Duration // nil: none
	reads int
}

func newDatabase(local *clocktest.Fake) *database {
	return &database{local: local, began: local.Now()}
}

// truth is the database's time now.
func (d *database) truth() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return base.Add(d.local.Now().Sub(d.began) + d.step)
}

func (d *database) read(context.Context) (time.Time, error) {
	d.mu.Lock()
	d.reads++
	n, err, delay := d.reads, d.err, d.delay
	d.mu.Unlock()
	if err != nil && n > 1 {
		return time.Time{}, err
	}
	if delay != nil {
		d.local.Advance(delay(n))
	}
	return d.truth(), nil
}

func (d *database) set(f func(d *database)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func (d *database) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reads
}

// The reference's time, and the host's as the fake clock starts it: years
// apart, so a clock that took the host's time could not pass.
var (
	base      = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	hostStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

// start returns a clock on the fake local clock f whose first reading is
// exact (NewAnchored does not sleep), closed when the test ends.
func start(t *testing.T, f *clocktest.Fake, opts clock.AnchoredOptions) *clock.Anchored {
	t.Helper()
	opts.Local = f
	c, err := clock.NewAnchored(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// startSlow is start for a first reading that is not exact: NewAnchored
// sleeps on f between its reads, and startSlow moves f on while it sleeps,
// until it returns. Pass a long Resync: the resync goroutine's first sleep
// must not end meanwhile.
func startSlow(t *testing.T, f *clocktest.Fake, opts clock.AnchoredOptions) *clock.Anchored {
	t.Helper()
	opts.Local = f
	var c *clock.Anchored
	var err error
	returned, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		c, err = clock.NewAnchored(context.Background(), opts)
	}()
	// No timer is armed while NewAnchored reads, so these steps never
	// lengthen a read's round trip.
	for f.BlockUntilContext(returned, 1) == nil && returned.Err() == nil {
		f.Advance(10 * time.Millisecond)
	}
	<-returned.Done()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// resync moves f to the clock's next read and waits until the read is done:
// until the resync goroutine sleeps again.
func resync(t *testing.T, f *clocktest.Fake) {
	t.Helper()
	f.BlockUntil(t, 1)
	f.Advance(clock.DefaultResync)
	f.BlockUntil(t, 1)
}

// exact fails unless the clock's Now is the database's time.
func exact(t *testing.T, what string, c *clock.Anchored, db *database) {
	t.Helper()
	if got, want := c.Now(), db.truth(); !got.Equal(want) {
		t.Fatalf("%s: Now = %v, want the database's %v (off by %v)", what, got, want, got.Sub(want))
	}
}

// TestFollowsSource: Now is the source's time plus the time elapsed since
// it was read, whatever this host's wall clock says (2026 here, or 30 s
// ahead of that, or an hour behind).
func TestFollowsSource(t *testing.T) {
	for _, skew := range []time.Duration{0, 30 * time.Second, -time.Hour} {
		f := clocktest.New(hostStart.Add(skew))
		db := newDatabase(f)
		c := start(t, f, clock.AnchoredOptions{Source: db.read})
		for range 3 {
			exact(t, fmt.Sprintf("skew %v", skew), c, db)
			f.Advance(5 * time.Millisecond)
		}
		if got := c.Now(); !got.Equal(base.Add(15 * time.Millisecond)) {
			t.Fatalf("skew %v: Now = %v, want %v: advanced by the elapsed 15 ms", skew, got, base.Add(15*time.Millisecond))
		}
		if off, want := c.Offset(), base.Sub(hostStart.Add(skew)); off != want {
			t.Fatalf("skew %v: Offset = %v, want %v", skew, off, want)
		}
		if got := c.Now().Location(); got != time.UTC {
			t.Fatalf("Now is in %v, want UTC", got)
		}
	}
}

// TestResyncForward: a resync takes the source's new time.
func TestResyncForward(t *testing.T) {
	f := clocktest.New(hostStart)
	db := newDatabase(f)
	c := start(t, f, clock.AnchoredOptions{Source: db.read, Samples: 1})
	db.set(func(d *database) { d.step = time.Hour })
	if got := c.Now(); !got.Equal(base) {
		t.Fatalf("Now before the resync = %v, want %v", got, base)
	}
	resync(t, f)
	exact(t, "after the resync", c, db)
}

// TestResyncNeverBackwards: a resync to an earlier time does not put Now
// back; Now stays at the latest time it returned until the source catches up.
func TestResyncNeverBackwards(t *testing.T) {
	f := clocktest.New(hostStart)
	db := newDatabase(f)
	c := start(t, f, clock.AnchoredOptions{Source: db.read, Samples: 1})
	f.Advance(time.Second)
	latest := c.Now()
	db.set(func(d *database) { d.step = -time.Hour })
	resync(t, f)
	for range 2 { // 30 min later, the source is still behind
		if got := c.Now(); !got.Equal(latest) {
			t.Fatalf("Now = %v after a resync to %v, want the latest it returned, %v", got, db.truth(), latest)
		}
		f.Advance(30 * time.Minute)
		f.BlockUntil(t, 1) // a resync that fired is done
	}
	exact(t, "once the source caught up", c, db)
}

// TestFailingSourceKeepsAnchor: reads that fail keep the last anchor,
// advanced by the elapsed time, and log one warning for the whole streak;
// when the source answers again the clock takes its time.
func TestFailingSourceKeepsAnchor(t *testing.T) {
	f := clocktest.New(hostStart)
	db := newDatabase(f)
	db.set(func(d *database) { d.err = errors.New("connection refused") })
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, nil))
	c := start(t, f, clock.AnchoredOptions{Source: db.read, Samples: 1, Logger: logger})
	db.set(func(d *database) { d.step = time.Hour }) // unseen while the reads fail
	for range 3 {
		resync(t, f)
	}
	if got, want := c.Now(), db.truth().Add(-time.Hour); !got.Equal(want) {
		t.Fatalf("Now while the source fails = %v, want the last anchor advanced by the elapsed time, %v", got, want)
	}

	db.set(func(d *database) { d.err = nil })
	resync(t, f)
	exact(t, "once the source answers again", c, db)
	if n := db.count(); n != 5 {
		t.Fatalf("%d reads, want 5: the first, three failed, one good", n)
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
	f := clocktest.New(hostStart)
	db := newDatabase(f)
	c, err := clock.NewAnchored(context.Background(), clock.AnchoredOptions{Source: db.read, Local: f})
	if err != nil {
		t.Fatal(err)
	}
	resync(t, f)
	c.Close()
	if err := goleak.Find(others); err != nil {
		t.Fatalf("after Close: %v", err)
	}
	f.Advance(time.Minute)
	exact(t, "after Close", c, db)
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
	f := clocktest.New(hostStart)
	db := newDatabase(f)
	c := start(t, f, clock.AnchoredOptions{Source: db.read, Samples: 1})
	db.set(func(d *database) {
		d.delay = func(int) time.Duration { return 200 * time.Millisecond } // every read waits
	})
	for i := range 10 {
		resync(t, f)
		exact(t, fmt.Sprintf("after slow read %d (its midpoint is 100 ms ahead)", i+1), c, db)
	}
	if n := db.count(); n != 11 {
		t.Fatalf("%d reads, want 11", n)
	}

	// With two samples a read keeps the quick one.
	c.Close() // its reads would change which calls are slow
	db.set(func(d *database) {
		d.reads = 0
		d.delay = func(read int) time.Duration { // the first after each reconnect waits
			if read%2 == 1 {
				return 200 * time.Millisecond
			}
			return 0
		}
	})
	c2 := start(t, f, clock.AnchoredOptions{Source: db.read, Samples: 2})
	exact(t, "a read whose first sample waited", c2, db)
	if u := c2.Uncertainty(); u != 0 {
		t.Fatalf("Uncertainty %v, want 0: the read kept its slow sample", u)
	}
}

// slowFirst makes the first n reads of db wait d before the database reads
// its clock, and every later one wait nothing.
func slowFirst(db *database, n int, d time.Duration) {
	db.set(func(db *database) {
		db.delay = func(read int) time.Duration {
			if read <= n {
				return d
			}
			return 0
		}
	})
}

// TestSlowStartReadAgain: a node that starts while its database is slow
// reads again until it has an exact reading, rather than serving on a clock
// half a slow round trip ahead until its first resync.
func TestSlowStartReadAgain(t *testing.T) {
	f := clocktest.New(hostStart)
	db := newDatabase(f)
	slowFirst(db, 2, 200*time.Millisecond)
	c := startSlow(t, f, clock.AnchoredOptions{Source: db.read, Resync: time.Hour, Samples: 1})
	exact(t, "after a slow start", c, db)
	if n := db.count(); n != 3 {
		t.Fatalf("%d reads at start, want 3: two slow, then an exact one", n)
	}
}

// TestLongSlowStartWaitsForExactReading: a node that starts while every
// read of its database waits (a lossy link) keeps reading, up to StartWait,
// until one is exact to 10 ms, instead of serving on a clock ahead by half
// a slow round trip (it read ten more times and then served on the best).
func TestLongSlowStartWaitsForExactReading(t *testing.T) {
	f := clocktest.New(hostStart)
	db := newDatabase(f)
	slowFirst(db, 15, 60*time.Millisecond)
	c := startSlow(t, f, clock.AnchoredOptions{Source: db.read, Resync: time.Hour, Samples: 1})
	if u := c.Uncertainty(); u != 0 {
		t.Fatalf("Uncertainty %v after start, want 0: the 16th read is exact", u)
	}
	exact(t, "after a long slow start", c, db)
}

// TestSlowStartGivesUpAtStartWait: when no read is exact to 10 ms within
// StartWait, NewAnchored returns on the best reading, and Uncertainty says
// how far off it may be.
func TestSlowStartGivesUpAtStartWait(t *testing.T) {
	f := clocktest.New(hostStart)
	db := newDatabase(f)
	slowFirst(db, 1<<30, 60*time.Millisecond)
	began := f.Now()
	c := startSlow(t, f, clock.AnchoredOptions{Source: db.read, Resync: time.Hour, Samples: 1, StartWait: time.Second})
	if took := f.Now().Sub(began); took < time.Second {
		t.Fatalf("NewAnchored returned after %v on the fake clock, before StartWait (1 s)", took)
	}
	u := c.Uncertainty()
	if u < 30*time.Millisecond || u > 31*time.Millisecond {
		t.Fatalf("Uncertainty %v, want the best reading's 30 ms (half its round trip) and the drift since", u)
	}
	if off := c.Now().Sub(db.truth()); off.Abs() > u {
		t.Fatalf("Now is off the source by %v, more than its Uncertainty %v", off, u)
	}
}
