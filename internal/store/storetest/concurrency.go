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

// gated is a job of queue "acct" whose concurrency key is key, with limit
// and order.
func gated(key string, limit int, ordered bool) store.EnqueueJob {
	j := job("acct", "")
	j.Concurrency = &store.ConcurrencyKey{Key: key, Limit: limit, Ordered: ordered}
	return j
}

// testConcurrencyLimit: Reserve hands out at most limit jobs of a key at
// once and fills the rest from other keys; a job that waits says so; a
// slot frees when its job completes, or, unordered, when it waits for its
// retry or its lease expires.
func testConcurrencyLimit(t *testing.T, s store.Store) {
	var a, b []store.EnqueueResult
	for range 5 {
		a = append(a, enqueueOne(t, s, t0, gated("A", 2, false)))
	}
	for range 2 {
		b = append(b, enqueueOne(t, s, t0, gated("B", 2, false)))
	}
	got := reserve(t, s, t0, 10, "acct")
	wantReserved(t, got, a[0].JobID, a[1].JobID, b[0].JobID, b[1].JobID)
	wantReserved(t, reserve(t, s, t0, 10, "acct"))
	if j := getJob(t, s, a[2].JobID); j.Hold != store.HoldConcurrency || j.State != store.JobStateScheduled || !j.HasConcurrency || j.ConcurrencyKey != "A" {
		t.Fatalf("a job waiting for a slot: %+v", j)
	}
	qs, err := s.ListQueues(context.Background(), &store.ListQueuesParams{Now: t0})
	if err != nil || len(qs) != 1 || qs[0].Held[store.HoldConcurrency] != 3 {
		t.Fatalf("ListQueues: %+v %v, want 3 held by concurrency", qs, err)
	}
	completeOne(t, s, t0, got[0])
	wantReserved(t, reserve(t, s, t0.Add(time.Second), 10, "acct"), a[2].JobID)
	// A retry frees the slot of an unordered job.
	if _, err := s.Fail(context.Background(), &store.FailParams{ID: got[1].Job.ID, LeaseToken: got[1].LeaseToken, Error: "x",
		RetryAt: at(t0.Add(time.Minute)), Now: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	wantReserved(t, reserve(t, s, t0.Add(2*time.Second), 10, "acct"), a[3].JobID)
	// So does an expired lease: when a[2]'s and a[3]'s end, the freed slots
	// go to a[4], which waited, and to a[2], redelivered; a[3] waits (and
	// the B jobs, their leases ended too, come back).
	wantReserved(t, reserve(t, s, t0.Add(2*time.Second+lease), 10, "acct"), a[4].JobID, a[2].JobID, b[0].JobID, b[1].JobID)
}

// testConcurrencyOrdered: with ordered, a key's jobs are delivered in
// enqueue order, one at a time with limit 1, and a job waiting for its
// retry holds the later ones until it completes; a cancelled waiting job
// is skipped; other keys are not held.
func testConcurrencyOrdered(t *testing.T, s store.Store) {
	var a []store.EnqueueResult
	for range 3 {
		a = append(a, enqueueOne(t, s, t0, gated("A", 1, true)))
	}
	b := enqueueOne(t, s, t0, gated("B", 1, true))
	got := reserve(t, s, t0, 10, "acct")
	wantReserved(t, got, a[0].JobID, b.JobID)
	completeOne(t, s, t0, got[1])
	if _, err := s.Fail(context.Background(), &store.FailParams{ID: a[0].JobID, LeaseToken: got[0].LeaseToken, Error: "x",
		RetryAt: at(t0.Add(time.Minute)), Now: t0}); err != nil {
		t.Fatal(err)
	}
	wantReserved(t, reserve(t, s, t0.Add(time.Second), 10, "acct"))
	if j := getJob(t, s, a[1].JobID); j.Hold != store.HoldConcurrency {
		t.Fatalf("the second job while the first waits for its retry: %+v", j)
	}
	got = reserve(t, s, t0.Add(time.Minute), 10, "acct")
	wantReserved(t, got, a[0].JobID)
	if _, err := s.CancelJob(context.Background(), &store.CancelJobParams{ID: a[1].JobID, Now: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	completeOne(t, s, t0.Add(time.Minute), got[0])
	got = reserve(t, s, t0.Add(time.Minute), 10, "acct")
	wantReserved(t, got, a[2].JobID)
	completeOne(t, s, t0.Add(time.Minute), got[0])
	// A job enqueued for later still keeps its place: the next one waits.
	later := gated("C", 1, true)
	later.RunAt = t0.Add(time.Hour)
	c1 := enqueueOne(t, s, t0.Add(time.Minute), later)
	c2 := enqueueOne(t, s, t0.Add(time.Minute), gated("C", 1, true))
	wantReserved(t, reserve(t, s, t0.Add(2*time.Minute), 10, "acct"))
	got = reserve(t, s, t0.Add(time.Hour), 10, "acct")
	wantReserved(t, got, c1.JobID)
	completeOne(t, s, t0.Add(time.Hour), got[0])
	wantReserved(t, reserve(t, s, t0.Add(time.Hour), 10, "acct"), c2.JobID)
}

// testConcurrencyHotKey: one key holding most of the ready jobs does not
// keep Reserve from filling its batch from the other keys.
func testConcurrencyHotKey(t *testing.T, s store.Store) {
	var hot []store.EnqueueJob
	for range 300 {
		hot = append(hot, gated("hot", 1, false))
	}
	enqueue(t, s, t0, hot...)
	var cold []store.EnqueueJob
	for i := range 20 {
		cold = append(cold, gated(fmt.Sprint("cold-", i), 1, false))
	}
	enqueue(t, s, t0, cold...)
	got := reserve(t, s, t0, 21, "acct")
	keys := map[string]int{}
	for _, r := range got {
		keys[r.Job.ConcurrencyKey]++
	}
	if len(got) != 21 || keys["hot"] != 1 || len(keys) != 21 {
		t.Fatalf("reserved %d jobs over keys %v, want one of each of 21 keys", len(got), keys)
	}
	wantReserved(t, reserve(t, s, t0, 21, "acct"))
}

// testConcurrencyConcurrentReserve: workers reserving and completing at
// once never hold more than limit jobs of a key, and with ordered get them
// in enqueue order.
func testConcurrencyConcurrentReserve(t *testing.T, s store.Store) {
	for _, ordered := range []bool{false, true} {
		concurrentDeliveries(t, []store.Store{s}, 60, 2, ordered)
	}
}

// concurrentDeliveries enqueues n jobs of one concurrency key with limit
// and order on the nodes, and has six workers spread over them reserve and
// complete in a loop until all are done: never more than limit are held
// at once, and with ordered the jobs are first delivered in enqueue order:
// no job's first Reserve call started after the call that first returned a
// later job had ended.
func concurrentDeliveries(t *testing.T, nodes []store.Store, n, limit int, ordered bool) {
	key := fmt.Sprint("k-", limit, "-", ordered)
	pos := map[store.JobID]int{}
	for i := range n {
		pos[enqueueOne(t, nodes[i%len(nodes)], t0, gated(key, limit, ordered)).JobID] = i
	}
	var held, peak, done, clock atomic.Int64
	var mu sync.Mutex
	// The ticks of the Reserve call that first returned each job.
	started, ended := make([]int64, n), make([]int64, n)
	delivered := 0
	var wg sync.WaitGroup
	for w := range 6 {
		s := nodes[w%len(nodes)]
		wg.Go(func() {
			for done.Load() < int64(n) {
				start := clock.Add(1)
				rs, err := s.Reserve(context.Background(), &store.ReserveParams{Queues: []string{"acct"}, WorkerID: fmt.Sprint(w), Max: 3, Lease: time.Hour, Now: t0})
				end := clock.Add(1)
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range rs {
					if h := held.Add(1); h > peak.Load() {
						peak.Store(h)
					}
					mu.Lock()
					if i := pos[r.Job.ID]; started[i] == 0 {
						started[i], ended[i] = start, end
						delivered++
					}
					mu.Unlock()
				}
				for _, r := range rs {
					held.Add(-1)
					if err := complete(s, r.Job.ID, r.LeaseToken, nil, t0); err != nil {
						t.Error(err)
					}
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > int64(limit) {
		t.Fatalf("ordered=%v: %d jobs of one key held at once, limit %d", ordered, p, limit)
	}
	if delivered != n {
		t.Fatalf("ordered=%v: %d deliveries, want %d", ordered, delivered, n)
	}
	if ordered {
		for k := range n {
			for j := range k {
				if started[j] > ended[k] {
					t.Fatalf("ordered: job %d was first delivered before job %d", k, j)
				}
			}
		}
	}
}
