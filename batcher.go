package sepp

import (
	"context"
	"errors"
	"runtime"
	"sync"

	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// batcher coalesces concurrent Enqueue calls into EnqueueBatch RPCs by
// natural batching: at most Config.MaxInFlight RPCs are in flight; calls that
// arrive while all of them are busy wait in pending and go together when one
// returns. A call that finds a free slot and nothing pending sends at once,
// from its own goroutine, so a lone caller pays no added delay.
//
// A sending goroutine is started when calls are pending and a slot frees up;
// it ends as soon as pending is empty.
type batcher struct {
	c        *Client
	mu       sync.Mutex
	pending  []*call
	senders  int // goroutines sending; at most c.cfg.MaxInFlight
	maxBatch int // c.cfg.MaxBatchSize, lowered if the server's max_batch_size is smaller
}

// call is one Enqueue waiting in the batcher.
type call struct {
	ctx  context.Context
	req  *seppv1.EnqueueRequest
	ack  *Ack
	err  error
	done chan struct{}
}

func newBatcher(c *Client) *batcher { return &batcher{c: c, maxBatch: c.cfg.MaxBatchSize} }

func (b *batcher) enqueue(ctx context.Context, req *seppv1.EnqueueRequest) (*Ack, error) {
	b.mu.Lock()
	if b.senders < b.c.cfg.MaxInFlight && len(b.pending) == 0 {
		// Idle: send this call alone, from the caller's goroutine, and
		// hand the slot to a sender goroutine only if calls queued up
		// meanwhile.
		b.senders++
		b.mu.Unlock()
		ack, err := b.c.enqueueDirect(ctx, req)
		b.mu.Lock()
		if len(b.pending) > 0 {
			go b.send()
		} else {
			b.senders--
		}
		b.mu.Unlock()
		return ack, err
	}
	cl := &call{ctx: ctx, req: req, done: make(chan struct{})}
	b.pending = append(b.pending, cl)
	start := b.senders < b.c.cfg.MaxInFlight
	if start {
		b.senders++
	}
	b.mu.Unlock()
	if start {
		go b.send()
	}
	select {
	case <-cl.done:
		return cl.ack, cl.err
	case <-ctx.Done():
		// The job may still be enqueued; a keyed retry is harmless.
		return nil, ctx.Err()
	}
}

// send drains pending, one RPC at a time.
func (b *batcher) send() {
	for last := 0; ; {
		if last > 1 {
			// The callers just answered are about to enqueue again; let
			// them run first so they join the next batch instead of
			// following it one by one.
			runtime.Gosched()
		}
		b.mu.Lock()
		batch := b.take()
		if len(batch) == 0 {
			b.senders--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.sendBatch(batch)
		last = len(batch)
	}
}

// take removes the next batch from pending, within the size limits. Calls
// whose caller already gave up are answered and left out. b.mu is held.
func (b *batcher) take() []*call {
	n, bytes := 0, 0
	for n < len(b.pending) && n < b.maxBatch {
		// The whole job (payload, key, headers), so that a batch stays
		// within the server's limits.max_request_bytes.
		size := proto.Size(b.pending[n].req)
		if n > 0 && bytes+size > b.c.cfg.MaxBatchBytes {
			break
		}
		bytes += size
		n++
	}
	batch := make([]*call, 0, n)
	for _, cl := range b.pending[:n] {
		if err := cl.ctx.Err(); err != nil {
			cl.err = err
			close(cl.done)
			continue
		}
		batch = append(batch, cl)
	}
	b.pending = append(b.pending[:0], b.pending[n:]...)
	return batch
}

// sendBatch sends one batch and answers its calls. Keyed calls whose fate is
// unknown after a transport error are resent with their keys; unkeyed ones
// get the error, since resending them could create duplicates.
func (b *batcher) sendBatch(batch []*call) {
	for attempt := 0; len(batch) > 0; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), b.c.cfg.RPCTimeout)
		err := b.rpc(ctx, batch)
		cancel()
		if err == nil {
			return
		}
		if errors.Is(err, ErrBatchTooLarge) && len(batch) > 1 {
			// The server's max_batch_size is below ours: learn it and
			// send the halves.
			half := len(batch) / 2
			b.mu.Lock()
			b.maxBatch = min(b.maxBatch, half)
			b.mu.Unlock()
			b.sendBatch(batch[:half])
			b.sendBatch(batch[half:])
			return
		}
		var again []*call
		for _, cl := range batch {
			if cl.req.IdempotencyKey != nil && retryable(err) && attempt < b.c.cfg.EnqueueRetries && cl.ctx.Err() == nil {
				again = append(again, cl)
				continue
			}
			cl.err = err
			close(cl.done)
		}
		// The wait is the batch's, not any one caller's: a caller that gives
		// up meanwhile is dropped on the next pass.
		if len(again) > 0 && !b.c.shouldRetry(context.Background(), true, err, attempt) {
			for _, cl := range again {
				cl.err = err
				close(cl.done)
			}
			return
		}
		batch = again
	}
}

// rpc sends batch as one RPC. On success every call is answered; on a
// transport error, or when the batch is too large for the server, none is.
func (b *batcher) rpc(ctx context.Context, batch []*call) error {
	if len(batch) == 1 {
		res, err := b.c.jobs.Enqueue(ctx, batch[0].req)
		if err != nil {
			err = fromRPC(nil, err)
			if retryable(err) {
				return err
			}
			batch[0].err = err
		} else {
			batch[0].ack = ackFromProto(res)
		}
		close(batch[0].done)
		return nil
	}
	reqs := make([]*seppv1.EnqueueRequest, len(batch))
	for i, cl := range batch {
		reqs[i] = cl.req
	}
	res, err := b.c.jobs.EnqueueBatch(ctx, &seppv1.EnqueueBatchRequest{Jobs: reqs})
	if err == nil && len(res.GetResults()) != len(batch) {
		err = &Error{Code: "internal", Reason: ErrInternal.Error(), Message: "server answered a batch with the wrong number of results", Index: -1}
	}
	if err != nil {
		err = fromRPC(nil, err)
		if retryable(err) || errors.Is(err, ErrBatchTooLarge) {
			return err
		}
		for _, cl := range batch {
			cl.err = err
			close(cl.done)
		}
		return nil
	}
	for i, r := range res.GetResults() {
		br := batchResultFromProto(r)
		batch[i].ack, batch[i].err = br.Ack, br.Err
		close(batch[i].done)
	}
	return nil
}
