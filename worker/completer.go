package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sepp-dev/sepp"
)

// completer coalesces the completions of concurrent handlers into
// CompleteBatch RPCs by natural batching: one RPC in flight, the completions
// that arrive meanwhile go together in the next. Each caller waits for its
// own completion to be durable. The sending goroutine is started by a
// completion that finds the completer idle and ends when nothing is pending.
type completer struct {
	client  *sepp.Client
	mu      sync.Mutex
	pending []*completion
	sending bool
	max     int // the server's batch limit once learned; 0: maxCompletions
}

type completion struct {
	c    sepp.Completion
	err  error
	done chan struct{}
}

// maxCompletions bounds one CompleteBatch (the server's default
// max_batch_size).
const maxCompletions = 1000

// complete completes one job, durably, or returns why not.
func (k *completer) complete(ctx context.Context, c sepp.Completion) error {
	cm := &completion{c: c, done: make(chan struct{})}
	k.mu.Lock()
	k.pending = append(k.pending, cm)
	start := !k.sending
	k.sending = true
	k.mu.Unlock()
	if start {
		go k.send()
	}
	select {
	case <-cm.done:
		return cm.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (k *completer) send() {
	for {
		k.mu.Lock()
		n := min(len(k.pending), k.limit())
		if n == 0 {
			k.sending = false
			k.mu.Unlock()
			return
		}
		batch := append([]*completion(nil), k.pending[:n]...)
		k.pending = append(k.pending[:0], k.pending[n:]...)
		k.mu.Unlock()

		cs := make([]sepp.Completion, len(batch))
		for i, cm := range batch {
			cs[i] = cm.c
		}
		errs, err := k.completeBatch(cs)
		for i, cm := range batch {
			if err != nil {
				cm.err = err
			} else {
				cm.err = errs[i]
			}
			close(cm.done)
		}
	}
}

// limit is the batch size the server accepts, as far as the completer knows.
func (k *completer) limit() int {
	if k.max == 0 {
		return maxCompletions
	}
	return k.max
}

// completeBatch sends cs, splitting it when the server's max_batch_size is
// below the batch (and remembering the smaller size).
func (k *completer) completeBatch(cs []sepp.Completion) ([]error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	errs, err := k.client.CompleteBatch(ctx, cs)
	cancel()
	if !errors.Is(err, sepp.ErrBatchTooLarge) || len(cs) == 1 {
		return errs, err
	}
	half := len(cs) / 2
	k.mu.Lock()
	k.max = half
	k.mu.Unlock()
	a, err := k.completeBatch(cs[:half])
	if err != nil {
		return nil, err
	}
	b, err := k.completeBatch(cs[half:])
	if err != nil {
		return nil, err
	}
	return append(a, b...), nil
}
