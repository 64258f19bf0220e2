package sepp

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// recordingJobs passes the batcher's RPCs on to the server and records the
// idempotency keys each one carried ("" for an unkeyed job). While gate is
// set, each RPC waits for it to be closed before it goes out.
type recordingJobs struct {
	seppv1.JobServiceClient
	mu   sync.Mutex
	rpcs [][]string
	gate chan struct{}
}

func (r *recordingJobs) record(reqs ...*seppv1.EnqueueRequest) {
	keys := make([]string, len(reqs))
	for i, req := range reqs {
		keys[i] = req.GetIdempotencyKey()
	}
	r.mu.Lock()
	r.rpcs = append(r.rpcs, keys)
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

func (r *recordingJobs) Enqueue(ctx context.Context, in *seppv1.EnqueueRequest, opts ...grpc.CallOption) (*seppv1.EnqueueResponse, error) {
	r.record(in)
	return r.JobServiceClient.Enqueue(ctx, in, opts...)
}

func (r *recordingJobs) EnqueueBatch(ctx context.Context, in *seppv1.EnqueueBatchRequest, opts ...grpc.CallOption) (*seppv1.EnqueueBatchResponse, error) {
	r.record(in.GetJobs()...)
	return r.JobServiceClient.EnqueueBatch(ctx, in, opts...)
}

// since returns the RPCs recorded from the n-th on.
func (r *recordingJobs) since(n int) [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.rpcs[n:]...)
}

func hitsClient(t *testing.T, srv *testserver.Server) (*Client, *recordingJobs) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewClient(ctx, srv.URL, Config{})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	rec := &recordingJobs{JobServiceClient: c.jobs}
	c.jobs = rec // before any call; the batcher sends through c.jobs
	return c, rec
}

// waitBatcher waits until ok, called with b.mu held, holds.
func waitBatcher(t *testing.T, b *batcher, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.mu.Lock()
		done := ok()
		b.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("batcher: gave up waiting for %s after 30 s", what)
		}
		runtime.Gosched()
	}
}

// waitPending waits until the batcher holds fresh and repeats calls waiting
// in its two lanes.
func waitPending(t *testing.T, b *batcher, fresh, repeats int) {
	t.Helper()
	waitBatcher(t, b, fmt.Sprintf("%d fresh and %d repeats pending", fresh, repeats), func() bool {
		return len(b.fresh.pending) == fresh && len(b.repeats.pending) == repeats
	})
}

// TestBatcherMixedRepeats: concurrent Enqueue calls that mix new keys with
// repeats of keys this client has had acked, and with repeats of keys whose
// first enqueue may still be in flight, all get the right acks, and one job
// is created per key.
func TestBatcherMixedRepeats(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	c, rec := hitsClient(t, srv)
	ctx := context.Background()
	const acked, fresh, each, producers = 100, 200, 4, 32

	// The acked keys, concurrently, once each.
	first := make([]string, acked)
	var wg sync.WaitGroup
	errs := make(chan error, acked+fresh*each)
	for k := range acked {
		wg.Go(func() {
			ack, err := c.Enqueue(ctx, EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: Key(fmt.Sprint("a-", k))})
			if err != nil {
				errs <- err
				return
			}
			if ack.Deduplicated {
				errs <- fmt.Errorf("a-%d: first enqueue deduplicated", k)
			}
			first[k] = ack.JobID
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(<-errs)
	}
	mark := len(rec.since(0))

	// Then every acked key again, each of the fresh keys each times, and
	// unkeyed jobs, shuffled, from producers goroutines.
	type job struct {
		key   string
		ack   *Ack
		keyed bool
	}
	var jobs []*job
	for k := range acked {
		jobs = append(jobs, &job{key: fmt.Sprint("a-", k), keyed: true})
	}
	for k := range fresh {
		for range each {
			jobs = append(jobs, &job{key: fmt.Sprint("b-", k), keyed: true})
		}
	}
	for range 50 {
		jobs = append(jobs, &job{})
	}
	rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	next := make(chan *job, len(jobs))
	for _, j := range jobs {
		next <- j
	}
	close(next)
	for range producers {
		wg.Go(func() {
			for j := range next {
				req := EnqueueRequest{Queue: "q", JobType: "t"}
				if j.keyed {
					req.IdempotencyKey = Key(j.key)
				}
				ack, err := c.Enqueue(ctx, req)
				if err != nil {
					errs <- fmt.Errorf("%q: %w", j.key, err)
					return
				}
				j.ack = ack
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	ids := map[string]string{}
	created := map[string]int{}
	calls := map[string]int{}
	allIDs := map[string]bool{}
	for k := range acked {
		key := fmt.Sprint("a-", k)
		ids[key], created[key] = first[k], 1
		calls[key] = 1
	}
	unkeyed := 0
	for _, j := range jobs {
		allIDs[j.ack.JobID] = true
		if !j.keyed {
			unkeyed++
			if j.ack.Deduplicated {
				t.Fatalf("unkeyed job %s deduplicated", j.ack.JobID)
			}
			continue
		}
		calls[j.key]++
		if !j.ack.Deduplicated {
			created[j.key]++
		}
		if id, ok := ids[j.key]; ok && id != j.ack.JobID {
			t.Fatalf("%s: answered with %s and %s", j.key, id, j.ack.JobID)
		}
		ids[j.key] = j.ack.JobID
	}
	for key, n := range created {
		if n != 1 {
			t.Fatalf("%s: created %d times", key, n)
		}
		l, err := c.LookupIdempotencyKey(ctx, "q", key)
		if err != nil || l.JobID != ids[key] || l.Hits != int64(calls[key]-1) {
			t.Fatalf("%s: lookup %+v %v; want job %s with %d hits", key, l, err, ids[key], calls[key]-1)
		}
	}
	if len(created) != acked+fresh || len(allIDs) != acked+fresh+unkeyed {
		t.Fatalf("%d keys created, %d job ids; want %d and %d", len(created), len(allIDs), acked+fresh, acked+fresh+unkeyed)
	}
	// The repeats of the acked keys never shared an RPC with an unkeyed job.
	for _, keys := range rec.since(mark) {
		a, u := 0, 0
		for _, k := range keys {
			switch {
			case k == "":
				u++
			case k[0] == 'a':
				a++
			}
		}
		if a > 0 && u > 0 {
			t.Fatalf("an RPC carried %d repeats of acked keys and %d unkeyed jobs: %q", a, u, keys)
		}
	}
}

// TestBatcherSendsRepeatsApart: calls whose key the client has had acked go in
// RPCs of their own, never with new keys or unkeyed jobs, coalesced as the
// others are, and get the original jobs back. The RPCs are held at the gate
// until every call waits in the batcher, so the lanes' batches are known.
func TestBatcherSendsRepeatsApart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, config string
	}{
		{"default", ""},
		// Batches above the server's limit are split, in both lanes.
		{"server max_batch_size 8", "[server]\nmax_batch_size = 8\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := testserver.Start(t, testserver.Options{Config: tc.config})
			c, rec := hitsClient(t, srv)
			ctx := context.Background()
			const acked, repeats, fresh, unkeyed = 20, 40, 40, 5
			first := map[string]string{}
			for k := range acked {
				key := fmt.Sprint("a-", k)
				ack, err := c.Enqueue(ctx, EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: Key(key)})
				if err != nil {
					t.Fatal(err)
				}
				first[key] = ack.JobID
			}
			mark := len(rec.since(0))

			gate := make(chan struct{})
			rec.mu.Lock()
			rec.gate = gate
			rec.mu.Unlock()
			type result struct {
				key string
				ack *Ack
				err error
			}
			results := make(chan result, repeats+fresh+unkeyed)
			var wg sync.WaitGroup
			send := func(key string) {
				wg.Go(func() {
					req := EnqueueRequest{Queue: "q", JobType: "t"}
					if key != "" {
						req.IdempotencyKey = Key(key)
					}
					ack, err := c.Enqueue(ctx, req)
					results <- result{key, ack, err}
				})
			}
			for i := range repeats {
				send(fmt.Sprint("a-", i%acked))
			}
			for i := range fresh {
				send(fmt.Sprint("b-", i))
			}
			for range unkeyed {
				send("")
			}
			// Every call is held at the gate (the MaxInFlight calls of
			// each lane) or waits in the batcher.
			b := c.batcher
			waitBatcher(t, b, "every call held at the gate or waiting", func() bool {
				return len(b.fresh.pending)+len(b.repeats.pending)+len(rec.since(mark)) == repeats+fresh+unkeyed
			})
			close(gate)
			wg.Wait()
			close(results)

			for r := range results {
				if r.err != nil {
					t.Fatalf("%q: %v", r.key, r.err)
				}
				switch {
				case r.key == "" || r.key[0] == 'b':
					if r.ack.Deduplicated {
						t.Fatalf("%q: new job deduplicated: %+v", r.key, r.ack)
					}
				case !r.ack.Deduplicated || r.ack.JobID != first[r.key]:
					t.Fatalf("%q: %+v; want a hit on %s", r.key, r.ack, first[r.key])
				}
			}

			sizes := map[string][]int{}
			for _, keys := range rec.since(mark) {
				a, other := 0, 0
				for _, k := range keys {
					if k != "" && k[0] == 'a' {
						a++
					} else {
						other++
					}
				}
				if a > 0 && other > 0 {
					t.Fatalf("an RPC carried %d repeats of acked keys with %d new or unkeyed jobs: %q", a, other, keys)
				}
				if a > 0 {
					sizes["repeats"] = append(sizes["repeats"], a)
				} else {
					sizes["fresh"] = append(sizes["fresh"], other)
				}
			}
			if tc.config == "" {
				// Two calls alone from their callers' goroutines, then
				// the ones that waited, together.
				for lane, want := range map[string]int{"repeats": repeats - 2, "fresh": fresh + unkeyed - 2} {
					got := sizes[lane]
					if len(got) != 3 || got[0] != 1 || got[1] != 1 || got[2] != want {
						t.Fatalf("%s lane RPC sizes %v; want [1 1 %d]", lane, got, want)
					}
				}
			}
		})
	}
}

// TestBatcherRepeatCancelled: a repeat whose caller's context has ended gets
// the context's error, as any call does.
func TestBatcherRepeatCancelled(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	c, rec := hitsClient(t, srv)
	req := EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: Key("k")}
	if _, err := c.Enqueue(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Enqueue(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("repeat with a cancelled context: %v", err)
	}
	// And one that waits in the repeats lane behind busy slots.
	mark := len(rec.since(0))
	gate := make(chan struct{})
	rec.mu.Lock()
	rec.gate = gate
	rec.mu.Unlock()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { c.Enqueue(context.Background(), req) })
	}
	waitBatcher(t, c.batcher, "both repeats slots busy", func() bool { return c.batcher.repeats.senders == 2 })
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Enqueue(ctx, req)
		done <- err
	}()
	waitPending(t, c.batcher, 0, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting repeat with a cancelled context: %v", err)
	}
	close(gate)
	wg.Wait()
	// The sender that takes the cancelled call answers it and leaves it out.
	waitBatcher(t, c.batcher, "idle repeats lane", func() bool {
		return len(c.batcher.repeats.pending) == 0 && c.batcher.repeats.senders == 0
	})
	if n := len(rec.since(mark)); n != 2 {
		t.Fatalf("%d RPCs for the two calls at the gate; the cancelled call was sent", n)
	}
}

// TestSeenKeysBounded: the record holds the last seenCap keys, and evicts
// the oldest first; unkeyed requests are never in it.
func TestSeenKeysBounded(t *testing.T) {
	t.Parallel()
	s := seenKeys{seed: maphash.MakeSeed()}
	req := func(i int) *seppv1.EnqueueRequest {
		k := fmt.Sprint("k-", i)
		return &seppv1.EnqueueRequest{Queue: "q", IdempotencyKey: &k}
	}
	const extra = 10
	for i := range seenCap + extra {
		s.add(req(i))
		s.add(req(i)) // a repeat takes no second slot
	}
	if len(s.set) != seenCap || len(s.ring) != seenCap {
		t.Fatalf("%d keys in the set, %d in the ring; want %d", len(s.set), len(s.ring), seenCap)
	}
	for i := range extra {
		if s.has(req(i)) {
			t.Fatalf("key %d not evicted", i)
		}
	}
	for _, i := range []int{extra, seenCap, seenCap + extra - 1} {
		if !s.has(req(i)) {
			t.Fatalf("key %d evicted", i)
		}
	}
	if s.has(&seppv1.EnqueueRequest{Queue: "q"}) {
		t.Fatal("an unkeyed request is seen")
	}
	k := "k-" + fmt.Sprint(seenCap)
	if s.has(&seppv1.EnqueueRequest{Queue: "other", IdempotencyKey: &k}) {
		t.Fatal("a key is seen on another queue")
	}
	// The queue and the key are hashed apart: ("ab", "c") is not ("a", "bc").
	ab, c, a, bc := "ab", "c", "a", "bc"
	s.add(&seppv1.EnqueueRequest{Queue: ab, IdempotencyKey: &c})
	if s.has(&seppv1.EnqueueRequest{Queue: a, IdempotencyKey: &bc}) {
		t.Fatal(`("a", "bc") is seen after ("ab", "c")`)
	}
}
