package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// Nodes are two handles on the same stored data, as two `sepp serve` nodes
// sharing one database have. The suite closes both.
type Nodes struct {
	A, B store.Store
	// CutListener breaks the connection on which B listens, as a database
	// restart or a network fault would, and returns when it is gone. It
	// fails t when B had no listening connection.
	CutListener func(t *testing.T)
}

// Notify is what RunNotifier needs of a backend whose stores implement
// store.Notifier.
type Notify struct {
	// Open returns two fresh nodes on one new, empty store.
	Open func(t *testing.T) Nodes
	// FailRetryUnannounced, when not empty, says why a Fail that makes a
	// job deliverable at once does not notify the other nodes yet; the case
	// that demands it is then skipped with this reason. Leave it empty once
	// the backend announces it.
	FailRetryUnannounced string
}

// notifyWait bounds every wait for a notification. It is a limit that a
// broken backend runs into, not a speed requirement.
const notifyWait = 15 * time.Second

// RunNotifier runs the cases of store.Notifier: what one node writes
// reaches the other node's Listen, which returns when its context ends and
// reconnects by itself after a lost connection.
func RunNotifier(t *testing.T, n Notify) {
	tests := []struct {
		name string
		fn   func(t *testing.T, n Notify, nodes Nodes)
	}{
		{"EnqueueNotifiesOtherNode", testEnqueueNotifiesOtherNode},
		{"RequeueDeadNotifies", testRequeueDeadNotifies},
		{"ResumeNotifies", testResumeNotifies},
		{"FailRetryDueNowNotifies", testFailRetryDueNowNotifies},
		{"EffectCompleteAndReleaseNotify", testEffectCompleteAndReleaseNotify},
		{"ListenReturnsOnCancel", testListenReturnsOnCancel},
		{"ListenReconnects", testListenReconnects},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nodes := n.Open(t)
			for _, s := range []store.Store{nodes.A, nodes.B} {
				t.Cleanup(func() {
					if err := s.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
			}
			if _, ok := nodes.B.(store.Notifier); !ok {
				t.Fatalf("%T does not implement store.Notifier", nodes.B)
			}
			tt.fn(t, n, nodes)
		})
	}
}

// event is one callback of Listen: onJobs with its queue, or onEffects.
type event struct {
	effects bool
	queue   string
}

// listening records what a running Listen reported.
type listening struct {
	mu      sync.Mutex
	events  []event
	changed chan struct{} // signalled after each event
	done    chan struct{} // closed when Listen returned
	cancel  context.CancelFunc
	seq     atomic.Int64 // names barrier queues
}

// listen starts b.Listen; it is cancelled, and must have returned, when t
// ends (before the stores close).
func listen(t *testing.T, s store.Store) *listening {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &listening{changed: make(chan struct{}, 1), done: make(chan struct{}), cancel: cancel}
	record := func(e event) {
		l.mu.Lock()
		l.events = append(l.events, e)
		l.mu.Unlock()
		select {
		case l.changed <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(l.done)
		s.(store.Notifier).Listen(ctx,
			func(queue string) { record(event{queue: queue}) },
			func() { record(event{effects: true}) })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-l.done:
		case <-time.After(notifyWait):
			t.Errorf("Listen did not return within %v of its context's cancellation", notifyWait)
		}
	})
	return l
}

// mark returns the position after the events recorded so far.
func (l *listening) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// await waits up to within for an event at or after since that match
// accepts, and returns the position after it.
func (l *listening) await(since int, within time.Duration, match func(event) bool) (int, bool) {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		for i := since; i < len(l.events); i++ {
			if match(l.events[i]) {
				l.mu.Unlock()
				return i + 1, true
			}
		}
		l.mu.Unlock()
		select {
		case <-l.changed:
		case <-l.done:
			return 0, false
		case <-deadline.C:
			return 0, false
		}
	}
}

func jobsOf(queue string) func(event) bool {
	return func(e event) bool { return !e.effects && e.queue == queue }
}

func anyEffects(e event) bool { return e.effects }

// expectJobs fails t unless onJobs(queue) is called after since.
func (l *listening) expectJobs(t *testing.T, since int, queue, after string) int {
	t.Helper()
	at, ok := l.await(since, notifyWait, jobsOf(queue))
	if !ok {
		t.Fatalf("%s: no onJobs(%q) on the other node within %v (Listen returned: %v)", after, queue, notifyWait, l.returned())
	}
	return at
}

// expectEffects fails t unless onEffects is called after since.
func (l *listening) expectEffects(t *testing.T, since int, after string) int {
	t.Helper()
	at, ok := l.await(since, notifyWait, anyEffects)
	if !ok {
		t.Fatalf("%s: no onEffects on the other node within %v (Listen returned: %v)", after, notifyWait, l.returned())
	}
	return at
}

func (l *listening) returned() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// established waits until the listener hears an enqueue made through a:
// Listen connects in the background, and what is written before it
// listens is not announced. It enqueues again every second, up to a
// bound, and returns the position after the first onJobs heard.
func (l *listening) established(t *testing.T, a store.Store) int {
	t.Helper()
	queue := fmt.Sprintf("listening-%d", l.seq.Add(1))
	since := l.mark()
	deadline := time.Now().Add(2 * notifyWait)
	for time.Now().Before(deadline) {
		enqueueOne(t, a, t0, job(queue, ""))
		if at, ok := l.await(since, time.Second, jobsOf(queue)); ok {
			return at
		}
		if l.returned() {
			t.Fatal("Listen returned while its context was live")
		}
	}
	t.Fatalf("the other node's Listen heard no enqueue within %v", 2*notifyWait)
	return 0
}

// barrier enqueues through a into a queue of its own and waits until the
// listener hears it. Notifications reach a listener in commit order, so
// everything a committed before the barrier has been heard by then, and
// the position returned is after it: an event past it was caused by a
// later write.
func (l *listening) barrier(t *testing.T, a store.Store) int {
	t.Helper()
	queue := fmt.Sprintf("barrier-%d", l.seq.Add(1))
	since := l.mark()
	enqueueOne(t, a, t0, job(queue, ""))
	return l.expectJobs(t, since, queue, "a barrier enqueue")
}

func testEnqueueNotifiesOtherNode(t *testing.T, _ Notify, n Nodes) {
	l := listen(t, n.B)
	since := l.established(t, n.A)
	enqueue(t, n.A, t0, job("emails", "k1"), job("sms", ""))
	at := l.expectJobs(t, since, "emails", "an enqueue through the other node")
	l.expectJobs(t, since, "sms", "an enqueue through the other node")
	// Every enqueue that creates a job is announced, not only a queue's first.
	enqueueOne(t, n.A, t0, job("emails", "k2"))
	l.expectJobs(t, at, "emails", "a second enqueue into the queue")
}

// testRequeueDeadNotifies: a dead job requeued through one node is
// deliverable again, and the other node's waiting workers must hear it.
func testRequeueDeadNotifies(t *testing.T, _ Notify, n Nodes) {
	ctx := context.Background()
	l := listen(t, n.B)
	l.established(t, n.A)
	res := enqueueOne(t, n.A, t0, job("dead-q", ""))
	r := reserve(t, n.A, t0, 1, "dead-q")
	if len(r) != 1 {
		t.Fatalf("reserved %d jobs, want 1", len(r))
	}
	if _, err := n.A.Fail(ctx, &store.FailParams{ID: r[0].Job.ID, LeaseToken: r[0].LeaseToken, Error: "boom", Permanent: true, RetryAt: at(t0), Now: t0}); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	since := l.barrier(t, n.A)
	got, err := n.A.RequeueDead(ctx, &store.DeadJobsParams{IDs: []store.JobID{res.JobID}, Now: t0.Add(time.Second)})
	if err != nil || got.N != 1 {
		t.Fatalf("RequeueDead: %+v, %v; want 1", got, err)
	}
	l.expectJobs(t, since, "dead-q", "RequeueDead through the other node")
}

// testResumeNotifies: resuming a paused queue that holds jobs makes them
// deliverable.
func testResumeNotifies(t *testing.T, _ Notify, n Nodes) {
	ctx := context.Background()
	l := listen(t, n.B)
	l.established(t, n.A)
	if err := n.A.SetQueuePaused(ctx, &store.SetQueuePausedParams{Queue: "paused-q", Paused: true}); err != nil {
		t.Fatal(err)
	}
	enqueueOne(t, n.A, t0, job("paused-q", ""))
	since := l.barrier(t, n.A)
	if err := n.A.SetQueuePaused(ctx, &store.SetQueuePausedParams{Queue: "paused-q", Paused: false}); err != nil {
		t.Fatal(err)
	}
	l.expectJobs(t, since, "paused-q", "resuming the queue through the other node")
}

// testFailRetryDueNowNotifies: a failed attempt whose retry is due at once
// makes the job deliverable again; a worker waiting on another node must
// not wait for a periodic re-check to get it.
func testFailRetryDueNowNotifies(t *testing.T, n Notify, nodes Nodes) {
	if n.FailRetryUnannounced != "" {
		t.Skip(n.FailRetryUnannounced)
	}
	ctx := context.Background()
	l := listen(t, nodes.B)
	l.established(t, nodes.A)
	enqueueOne(t, nodes.A, t0, job("retry-q", ""))
	r := reserve(t, nodes.A, t0, 1, "retry-q")
	if len(r) != 1 {
		t.Fatalf("reserved %d jobs, want 1", len(r))
	}
	since := l.barrier(t, nodes.A)
	now := t0.Add(time.Second)
	res, err := nodes.A.Fail(ctx, &store.FailParams{ID: r[0].Job.ID, LeaseToken: r[0].LeaseToken, Error: "try again", RetryAt: at(now), Now: now})
	if err != nil || res.State != store.JobStateScheduled {
		t.Fatalf("Fail: %+v, %v; want a retry", res, err)
	}
	if again := reserve(t, nodes.B, now, 1, "retry-q"); len(again) != 1 {
		t.Fatalf("the retried job is not deliverable at its retry time: reserved %d", len(again))
	}
	l.expectJobs(t, since, "retry-q", "a Fail with its retry due now, through the other node")
}

func testEffectCompleteAndReleaseNotify(t *testing.T, _ Notify, n Nodes) {
	ctx := context.Background()
	l := listen(t, n.B)
	l.established(t, n.A)

	c := claim(t, n.A, t0, "order-1:invoice")
	if c.State != store.EffectAcquired {
		t.Fatalf("claim: %+v", c)
	}
	since := l.barrier(t, n.A)
	if _, err := n.A.CompleteEffect(ctx, &store.CompleteEffectParams{Token: c.Token, Result: []byte("em_1"), Now: t0.Add(time.Second)}); err != nil {
		t.Fatalf("CompleteEffect: %v", err)
	}
	l.expectEffects(t, since, "CompleteEffect through the other node")

	c = claim(t, n.A, t0, "order-2:invoice")
	if c.State != store.EffectAcquired {
		t.Fatalf("claim: %+v", c)
	}
	since = l.barrier(t, n.A)
	if err := n.A.ReleaseEffect(ctx, &store.ReleaseEffectParams{Token: c.Token, Now: t0.Add(time.Second)}); err != nil {
		t.Fatalf("ReleaseEffect: %v", err)
	}
	l.expectEffects(t, since, "ReleaseEffect through the other node")
}

func testListenReturnsOnCancel(t *testing.T, _ Notify, n Nodes) {
	l := listen(t, n.B)
	l.established(t, n.A)
	l.cancel()
	select {
	case <-l.done:
	case <-time.After(notifyWait):
		t.Fatalf("Listen did not return within %v of its context's cancellation", notifyWait)
	}
	// A context cancelled before the call: Listen returns too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.B.(store.Notifier).Listen(ctx, func(string) {}, func() {})
	}()
	select {
	case <-done:
	case <-time.After(notifyWait):
		t.Fatalf("Listen with a cancelled context did not return within %v", notifyWait)
	}
}

// testListenReconnects: after its connection is cut, Listen connects again
// by itself and what the other node writes is heard again.
func testListenReconnects(t *testing.T, _ Notify, n Nodes) {
	l := listen(t, n.B)
	l.established(t, n.A)
	for round := range 2 {
		n.CutListener(t)
		if l.returned() {
			t.Fatal("Listen returned after a lost connection; it must reconnect")
		}
		// Until Listen is back, what is written is not heard: enqueue
		// again every second, up to a bound.
		l.established(t, n.A)
		// Once back, a single write is heard.
		since := l.mark()
		queue := fmt.Sprintf("after-cut-%d", round)
		enqueueOne(t, n.A, t0, job(queue, ""))
		l.expectJobs(t, since, queue, "an enqueue after the listener reconnected")
		c := claim(t, n.A, t0, queue)
		since = l.barrier(t, n.A)
		if _, err := n.A.CompleteEffect(context.Background(), &store.CompleteEffectParams{Token: c.Token, Now: t0}); err != nil {
			t.Fatalf("CompleteEffect: %v", err)
		}
		l.expectEffects(t, since, "CompleteEffect after the listener reconnected")
	}
}
