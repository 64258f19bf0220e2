// Package wakeup wakes long-polling calls when what they wait for may have
// changed, so that a waiting call costs nothing while nothing happens.
//
// A Hub holds waiters registered on keys (the server uses queue names for
// Reserve and one key per effect for ClaimEffect). Notify wakes the waiters
// of a key at once; At wakes them at a time on the caller's clock (a
// scheduled job's run-at, a lease's expiry), with one timer for the earliest
// such time the hub holds. Wait is the long-poll loop built on both: it
// registers, then looks, then sleeps until a wake-up, so a notification that
// lands between the look and the sleep is never lost.
//
// The hub only knows what it is told. What it cannot be told (a job another
// node scheduled, a lease another node's worker extended, jobs stored before
// a restart) is caught by the safety re-check (Options.Recheck): at a long
// interval the hub wakes one waiter of each key, not all of them, so its cost
// grows with the keys waited on rather than the waiters; a waiter woken so
// that finds what it waited for wakes the others of its keys.
package wakeup

import (
	"container/heap"
	"context"
	"strings"
	"sync"
	"time"

	"github.com/sepp-dev/sepp/internal/clock"
)

// Defaults of Options.
const (
	// DefaultGranularity: times passed to At are rounded up to a multiple
	// of it, so the many lease expiries of busy queue share a few timer
	// firings. A scheduled job is handed over at most this much late.
	DefaultGranularity = 10 * time.Millisecond
	// DefaultMaxPending bounds the times At holds; beyond it At drops new
	// times and the safety re-check covers them.
	DefaultMaxPending = 1 << 16
)

// Options configure New.
type Options struct {
	// Now is the clock of the times passed to At (the server's: on
	// PostgreSQL, the database's). Default Local.Now.
	Now func() time.Time
	// Local is the clock the hub's timers and Wait's deadlines run on.
	// Default clock.System; a test passes a clocktest.Fake.
	Local clock.Local
	// Granularity, MaxPending: see DefaultGranularity, DefaultMaxPending.
	Granularity time.Duration
	MaxPending  int
	// Recheck is the interval of the safety re-check. Zero: none.
	Recheck time.Duration
}

// Hub wakes waiters by key. Create it with New; Close ends its timer and
// every Wait. The methods are safe for concurrent use.
type Hub struct {
	now   func() time.Time
	local clock.Local
	gran  time.Duration
	cap   int
	// recheck: see Options.Recheck.
	recheck time.Duration

	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{}
	pending dueHeap             // times of At, earliest first
	known   map[dueKey]struct{} // the entries of pending, to drop repeats
	timer   clock.Timer         // fires at pending[0]; nil when pending is empty
	armedAt time.Time           // the time timer is armed for (on h.now's clock)
	safety  clock.Timer         // the safety re-check; nil while not armed
	closed  bool
	done    chan struct{} // closed by Close
}

type waiter struct {
	ch     chan struct{}
	keys   []string
	safety bool // woken by the safety re-check; under Hub.mu
	// looking: registered by Wait, whose check has not yet returned; not
	// counted by Waiting. Under Hub.mu.
	looking bool
}

type due struct {
	at  time.Time
	key string
}

type dueKey struct {
	at  int64 // UnixNano
	key string
}

func (d due) id() dueKey { return dueKey{d.at.UnixNano(), d.key} }

// New returns a hub.
func New(opts Options) *Hub {
	if opts.Local == nil {
		opts.Local = clock.System
	}
	if opts.Now == nil {
		opts.Now = opts.Local.Now
	}
	if opts.Granularity <= 0 {
		opts.Granularity = DefaultGranularity
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	return &Hub{
		now: opts.Now, local: opts.Local, gran: opts.Granularity, cap: opts.MaxPending, recheck: opts.Recheck,
		waiters: map[string]map[*waiter]struct{}{}, known: map[dueKey]struct{}{},
		done: make(chan struct{}),
	}
}

// Register returns a channel that is closed at the first wake-up of any of
// keys, and a function that unregisters (call it in every case). Register
// before the last look at the state waited for, so a wake-up between the
// look and the wait is not lost.
func (h *Hub) Register(keys ...string) (<-chan struct{}, func()) {
	w, cancel := h.register(keys, false)
	return w.ch, cancel
}

// register registers a waiter on keys; looking marks it as Wait's, about
// to check.
func (h *Hub) register(keys []string, looking bool) (*waiter, func()) {
	w := &waiter{ch: make(chan struct{}), keys: keys, looking: looking}
	h.mu.Lock()
	if h.closed {
		close(w.ch)
		h.mu.Unlock()
		return w, func() {}
	}
	if h.recheck > 0 && h.safety == nil {
		h.safety = h.local.AfterFunc(h.recheck, h.recheckOne)
	}
	for _, k := range keys {
		set := h.waiters[k]
		if set == nil {
			set = map[*waiter]struct{}{}
			h.waiters[k] = set
		}
		set[w] = struct{}{}
	}
	h.mu.Unlock()
	return w, func() {
		h.mu.Lock()
		h.remove(w)
		h.mu.Unlock()
	}
}

// recheckOne is the safety re-check: it wakes one waiter of every key.
func (h *Hub) recheckOne() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	for _, set := range h.waiters {
		for w := range set {
			w.safety = true
			close(w.ch)
			h.remove(w)
			break
		}
	}
	if len(h.waiters) == 0 {
		h.safety = nil // the next Register arms it again
		return
	}
	h.safety.Reset(h.recheck)
}

// remove unregisters w from all its keys. h.mu is held.
func (h *Hub) remove(w *waiter) {
	for _, k := range w.keys {
		if set := h.waiters[k]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(h.waiters, k)
			}
		}
	}
}

// wake wakes every waiter on key. h.mu is held.
func (h *Hub) wake(key string) {
	for w := range h.waiters[key] {
		close(w.ch)
		h.remove(w)
	}
}

// Notify wakes every waiter on key now.
func (h *Hub) Notify(key string) {
	h.mu.Lock()
	h.wake(key)
	h.mu.Unlock()
}

// NotifyPrefix wakes every waiter on a key that starts with prefix (every
// waiter when prefix is empty).
func (h *Hub) NotifyPrefix(prefix string) {
	h.mu.Lock()
	for k := range h.waiters {
		if strings.HasPrefix(k, prefix) {
			h.wake(k)
		}
	}
	h.mu.Unlock()
}

// Waiting reports how many waiters wait on key: registered with Register,
// or in Wait having looked and found nothing (a test waits for it to know
// that a long poll is asleep).
func (h *Hub) Waiting(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for w := range h.waiters[key] {
		if !w.looking {
			n++
		}
	}
	return n
}

// At wakes the waiters on key at t (on the hub's clock, rounded up to its
// granularity): the time a scheduled job comes due or a lease expires. A time
// already past wakes them now.
func (h *Hub) At(key string, t time.Time) {
	now := h.now()
	if !t.After(now) {
		h.Notify(key)
		return
	}
	if r := t.Round(h.gran); r.Before(t) {
		t = r.Add(h.gran)
	} else {
		t = r
	}
	d := due{at: t, key: key}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.pending) >= h.cap {
		return
	}
	if _, ok := h.known[d.id()]; ok {
		return
	}
	h.known[d.id()] = struct{}{}
	heap.Push(&h.pending, d)
	h.arm(now)
}

// arm points the one timer at the earliest pending time. h.mu is held.
func (h *Hub) arm(now time.Time) {
	if len(h.pending) == 0 {
		if h.timer != nil {
			h.timer.Stop()
			h.timer = nil
		}
		return
	}
	first := h.pending[0].at
	if h.timer != nil && h.armedAt.Equal(first) {
		return
	}
	// At least 1 ms, so a clock that stands still (a test's) cannot make
	// the timer spin.
	delay := max(first.Sub(now), time.Millisecond)
	h.armedAt = first
	if h.timer == nil {
		h.timer = h.local.AfterFunc(delay, h.fire)
	} else {
		h.timer.Reset(delay)
	}
}

// fire wakes the keys whose times have come and re-arms for the next.
func (h *Hub) fire() {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	for len(h.pending) > 0 && !h.pending[0].at.After(now) {
		d := heap.Pop(&h.pending).(due)
		delete(h.known, d.id())
		h.wake(d.key)
	}
	h.armedAt = time.Time{}
	h.arm(now)
}

// Pending reports how many times At holds.
func (h *Hub) Pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pending)
}

// Close stops the timer and wakes every waiter; Wait returns Stopped from
// then on. The hub starts no goroutine of its own: once Close returns, no
// timer of it runs again.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.done)
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if h.safety != nil {
		h.safety.Stop()
		h.safety = nil
	}
	h.pending, h.known = nil, nil
	for k := range h.waiters {
		h.wake(k)
	}
}

// Outcome says why Wait returned.
type Outcome int

const (
	// Done: check reported done (or failed).
	Done Outcome = iota
	// TimedOut: the deadline passed first.
	TimedOut
	// Stopped: the hub was closed.
	Stopped
	// Cancelled: ctx ended.
	Cancelled
)

// WaitOptions tune Wait.
type WaitOptions struct {
	// Deadline ends the wait, on the hub's Local clock (in production the
	// host's: time.Now().Add(wait)). Zero or past: check runs once.
	Deadline time.Time
}

// Wait runs check until it reports done, the deadline passes, the hub is
// closed or ctx ends, and says which. Before each check it registers on
// keys, so a wake-up that lands while check looks makes it look again.
// Between checks it sleeps until a wake-up of keys (the safety re-check's
// among them), or the again check returned (when positive: the time until the state
// waited for may change by itself, such as an effect holder's lease
// ending). An error from check ends the wait with Done and the error.
func (h *Hub) Wait(ctx context.Context, keys []string, opts WaitOptions, check func() (done bool, again time.Duration, err error)) (Outcome, error) {
	bySafety := false
	for {
		w, cancel := h.register(keys, true)
		done, again, err := check()
		if err != nil || done {
			cancel()
			if done && bySafety {
				// Nothing announced what this waiter found: the other
				// waiters of its keys may find more.
				h.mu.Lock()
				for _, k := range keys {
					h.wake(k)
				}
				h.mu.Unlock()
			}
			return Done, err
		}
		left := opts.Deadline.Sub(h.local.Now())
		if left <= 0 {
			cancel()
			return TimedOut, nil
		}
		sleep := left
		if again > 0 {
			sleep = min(sleep, again)
		}
		h.mu.Lock()
		w.looking = false
		h.mu.Unlock()
		t := h.local.NewTimer(sleep)
		select {
		case <-w.ch:
		case <-t.C():
		case <-ctx.Done():
		case <-h.done:
		}
		t.Stop()
		cancel()
		h.mu.Lock()
		bySafety = w.safety
		h.mu.Unlock()
		if ctx.Err() != nil {
			return Cancelled, ctx.Err()
		}
		select {
		case <-h.done:
			return Stopped, nil
		default:
		}
	}
}

// dueHeap is a min-heap of times.
type dueHeap []due

func (q dueHeap) Len() int           { return len(q) }
func (q dueHeap) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q dueHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *dueHeap) Push(x any)        { *q = append(*q, x.(due)) }
func (q *dueHeap) Pop() any {
	old := *q
	d := old[len(old)-1]
	*q = old[:len(old)-1]
	return d
}
