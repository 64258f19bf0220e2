package server

import (
	"sync"
	"sync/atomic"

	"github.com/sepp-dev/sepp/internal/config"
)

// Metric series carry a queue label value of their own only for a queue
// that is declared in [[queues]], or that exists and is among the first
// limits.max_queue_labels undeclared queues the node found to exist. Every
// other name is counted under the label value "other": calls naming made-up
// queues (refused with UNKNOWN_QUEUE, INVALID_FIELD, ...) and calls that
// store one job on each of thousands of new queues add no series. A queue
// exists once the store has held a job of it: this node stored or
// deduplicated an enqueue on it, a scrape of sepp_jobs listed it, or the
// store released one of its keys.
const otherQueueLabel = "other"

// queueLabels decides the queue label values of the metrics. Its methods
// are on every enqueue's path: a queue that is named or declared, and a
// queue once the bound is full, are answered without a lock.
type queueLabels struct {
	bounds atomic.Pointer[labelBounds]
	// named holds the undeclared queues with a label value of their own;
	// it only grows, up to the bound. Added to under mu, so that n stays
	// exact.
	named sync.Map
	n     atomic.Int64
	mu    sync.Mutex
}

// labelBounds are the declared queues and limits.max_queue_labels.
type labelBounds struct {
	declared func(queue string) bool
	max      int64
}

func newQueueLabels() *queueLabels {
	q := &queueLabels{}
	q.bound(func(string) bool { return false }, config.DefaultMaxQueueLabels)
	return q
}

// bound sets the declared queues and how many undeclared ones get a label
// value of their own (limits.max_queue_labels). New calls it before the
// server serves.
func (q *queueLabels) bound(declared func(queue string) bool, max int) {
	q.bounds.Store(&labelBounds{declared: declared, max: int64(max)})
}

// own reports whether queue has a label value of its own already: it is
// declared, or named.
func (q *queueLabels) own(queue string, b *labelBounds) bool {
	if _, ok := q.named.Load(queue); ok {
		return true
	}
	return b.declared(queue)
}

// of is the label value of queue, which may not exist: queue itself if it
// is declared or already has a label value of its own, else "other".
func (q *queueLabels) of(queue string) string {
	if q.own(queue, q.bounds.Load()) {
		return queue
	}
	return otherQueueLabel
}

// exists records that queue exists and returns its label value: queue
// itself if it is declared, or already named, or there is room for one more
// named queue; else "other".
func (q *queueLabels) exists(queue string) string {
	b := q.bounds.Load()
	if q.own(queue, b) {
		return queue
	}
	if q.n.Load() >= b.max {
		return otherQueueLabel
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.named.Load(queue); ok {
		return queue
	}
	if q.n.Load() >= b.max {
		return otherQueueLabel
	}
	q.named.Store(queue, struct{}{})
	q.n.Add(1)
	return queue
}

// queueLabel is the queue label value for queue, which may not exist.
func (s *Server) queueLabel(queue string) string { return s.metrics.queues.of(queue) }
