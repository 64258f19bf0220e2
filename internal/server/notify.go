package server

import "sync"

// notifier wakes long-polling Reserve calls when jobs become deliverable on
// one of their queues, so a job enqueued while a worker waits is handed over
// at once rather than at the next poll.
type notifier struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
}

// wait registers for a wake-up on any of queues. Register before looking
// for jobs, so a notification between the look and the wait is not lost.
// The returned function unregisters.
func (n *notifier) wait(queues []string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	n.mu.Lock()
	if n.waiters == nil {
		n.waiters = map[string]map[chan struct{}]struct{}{}
	}
	for _, q := range queues {
		if n.waiters[q] == nil {
			n.waiters[q] = map[chan struct{}]struct{}{}
		}
		n.waiters[q][ch] = struct{}{}
	}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, q := range queues {
			delete(n.waiters[q], ch)
			if len(n.waiters[q]) == 0 {
				delete(n.waiters, q)
			}
		}
	}
}

// notify wakes every waiter on queue.
func (n *notifier) notify(queue string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters[queue] {
		close(ch)
		for _, set := range n.waiters {
			delete(set, ch)
		}
	}
	delete(n.waiters, queue)
}
