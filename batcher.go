package sepp

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"runtime"
	"sync"

	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// batcher coalesces concurrent Enqueue calls into EnqueueBatch RPCs by
// natural batching: at most Config.MaxInFlight RPCs are in flight (in each
// lane, below); calls that arrive while all of them are busy wait in pending
// and go together when one returns. A call that finds a free slot and nothing
// pending sends at once, from its own goroutine, so a lone caller pays no
// added delay.
//
// A sending goroutine is started when calls are pending and a slot frees up;
// it ends as soon as pending is empty.
//
// Calls travel in two lanes, each with its own pending list and its own
// Config.MaxInFlight slots, by the same rules and the same code: repeats, for
// calls whose (queue, key) this client got an ack for recently (seen), and
// fresh, for the others (unkeyed calls among them). A key is seen once its
// ack is in: a repeat sent while the first enqueue is still in flight goes
// fresh. The server answers an enqueue whose every job is a hit on a stored
// record from a read, without a commit; a batch that mixes such repeats with
// new keys is committed as a whole, so the repeats would wait for the new
// keys' sync. Kept apart, they do not. Which lane a call takes changes only
// which RPC carries it, never its answer: the server decides, and a seen key
// that is no longer a hit (released, expired, or on a queue with
// on_duplicate = "replace" or "debounce") is answered as ever, just not
// faster.
type batcher struct {
	c        *Client
	mu       sync.Mutex
	fresh    lane
	repeats  lane
	maxBatch int // c.cfg.MaxBatchSize, lowered if the server's max_batch_size is smaller
	seen     seenKeys
}

// lane is one pending list and its senders. b.mu guards it.
type lane struct {
	pending []*call
	senders int // goroutines sending, and calls sent from their callers' goroutines; at most c.cfg.MaxInFlight
}

// call is one Enqueue waiting in the batcher.
type call struct {
	ctx  context.Context
	req  *seppv1.EnqueueRequest
	ack  *Ack
	err  error
	done chan struct{}
}

func newBatcher(c *Client) *batcher {
	return &batcher{c: c, maxBatch: c.cfg.MaxBatchSize, seen: seenKeys{seed: maphash.MakeSeed()}}
}

// seenCap bounds the seen record. An entry is a 64-bit hash, held in the FIFO
// ring (8 bytes) and in the map (Go's maps keep free slots and split their
// tables as they grow): a full record takes about 2.8 MiB per Client (measured
// with Go 1.26, whatever the keys' length, and no more after any number of
// evictions), reached only after 65,536 distinct keyed acks. Once full, each
// new key evicts the oldest one.
const seenCap = 1 << 16

// seenKeys records the (queue, idempotency key) pairs this client got an ack
// for (created or deduplicated), the last seenCap of them, by hash. Two pairs
// with one hash (about 2^-48 for a lookup in a full record) only send a new
// key in the repeats lane: slower, never wrong. A key acked again keeps its
// place: it leaves 65,536 new keys after it came, and comes back with its
// next ack.
type seenKeys struct {
	seed maphash.Seed
	mu   sync.Mutex
	set  map[uint64]struct{}
	ring []uint64 // the hashes in set, oldest at next once len(ring) == seenCap
	next int
}

func (s *seenKeys) hash(req *seppv1.EnqueueRequest) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	q := req.GetQueue()
	var n [8]byte // the queue's length first, so that no two pairs write the same bytes
	binary.LittleEndian.PutUint64(n[:], uint64(len(q)))
	h.Write(n[:])
	h.WriteString(q)
	h.WriteString(req.GetIdempotencyKey())
	return h.Sum64()
}

// has reports whether req's (queue, key) is recorded. Unkeyed requests never
// are.
func (s *seenKeys) has(req *seppv1.EnqueueRequest) bool {
	if req.IdempotencyKey == nil {
		return false
	}
	h := s.hash(req)
	s.mu.Lock()
	_, ok := s.set[h]
	s.mu.Unlock()
	return ok
}

// add records req's (queue, key), which got an ack. Unkeyed requests are
// not recorded.
func (s *seenKeys) add(req *seppv1.EnqueueRequest) {
	if req.IdempotencyKey == nil {
		return
	}
	h := s.hash(req)
	s.mu.Lock()
	s.addLocked(h)
	s.mu.Unlock()
}

// addAcked records the keyed calls of batch that got an ack.
func (s *seenKeys) addAcked(batch []*call) {
	hs := make([]uint64, 0, len(batch)) // hashed before locking, which has waits for
	for _, cl := range batch {
		if cl.ack != nil && cl.req.IdempotencyKey != nil {
			hs = append(hs, s.hash(cl.req))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range hs {
		s.addLocked(h)
	}
}

func (s *seenKeys) addLocked(h uint64) {
	if _, ok := s.set[h]; ok {
		return
	}
	if s.set == nil {
		s.set = make(map[uint64]struct{})
	}
	if len(s.ring) < seenCap {
		s.ring = append(s.ring, h)
	} else {
		delete(s.set, s.ring[s.next])
		s.ring[s.next] = h
		s.next = (s.next + 1) % seenCap
	}
	s.set[h] = struct{}{}
}

func (b *batcher) enqueue(ctx context.Context, req *seppv1.EnqueueRequest) (*Ack, error) {
	l := &b.fresh
	if b.seen.has(req) {
		l = &b.repeats
	}
	b.mu.Lock()
	if l.senders < b.c.cfg.MaxInFlight && len(l.pending) == 0 {
		// Idle: send this call alone, from the caller's goroutine, and
		// hand the slot to a sender goroutine only if calls queued up
		// meanwhile.
		l.senders++
		b.mu.Unlock()
		ack, err := b.c.enqueueDirect(ctx, req)
		if err == nil {
			b.seen.add(req)
		}
		b.mu.Lock()
		if len(l.pending) > 0 {
			go b.send(l)
		} else {
			l.senders--
		}
		b.mu.Unlock()
		return ack, err
	}
	cl := &call{ctx: ctx, req: req, done: make(chan struct{})}
	l.pending = append(l.pending, cl)
	start := l.senders < b.c.cfg.MaxInFlight
	if start {
		l.senders++
	}
	b.mu.Unlock()
	if start {
		go b.send(l)
	}
	select {
	case <-cl.done:
		return cl.ack, cl.err
	case <-ctx.Done():
		// The job may still be enqueued; a keyed retry is harmless.
		return nil, ctx.Err()
	}
}

// send drains l's pending list, one RPC at a time.
func (b *batcher) send(l *lane) {
	for last := 0; ; {
		if last > 1 {
			// The callers just answered are about to enqueue again; let
			// them run first so they join the next batch instead of
			// following it one by one.
			runtime.Gosched()
		}
		b.mu.Lock()
		batch := b.take(l)
		if len(batch) == 0 {
			l.senders--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.sendBatch(batch)
		last = len(batch)
	}
}

// take removes the next batch from l's pending list, within the size limits.
// Calls whose caller already gave up are answered and left out. b.mu is held.
func (b *batcher) take(l *lane) []*call {
	n, bytes := 0, 0
	for n < len(l.pending) && n < b.maxBatch {
		// The whole job (payload, key, headers), so that a batch stays
		// within the server's limits.max_request_bytes.
		size := proto.Size(l.pending[n].req)
		if n > 0 && bytes+size > b.c.cfg.MaxBatchBytes {
			break
		}
		bytes += size
		n++
	}
	batch := make([]*call, 0, n)
	for _, cl := range l.pending[:n] {
		if err := cl.ctx.Err(); err != nil {
			cl.err = err
			close(cl.done)
			continue
		}
		batch = append(batch, cl)
	}
	l.pending = append(l.pending[:0], l.pending[n:]...)
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
			b.seen.add(batch[0].req) // before the caller hears of it, so its next call finds it
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
	}
	b.seen.addAcked(batch) // before the callers hear of it, so their next calls find it
	for _, cl := range batch {
		close(cl.done)
	}
	return nil
}
