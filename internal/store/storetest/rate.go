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

// rated is a job of queue "api" whose rate key is key: at most limit
// reserved per period.
func rated(key string, limit int, period time.Duration) store.EnqueueJob {
	j := job("api", "")
	j.Rate = &store.RateKey{Key: key, Limit: limit, Period: period}
	return j
}

// testRateLimit: Reserve hands out at most limit jobs of a rate key within
// any period, fills the rest from other keys, and delivers the others
// later, never refusing one; a job that waits says until when.
func testRateLimit(t *testing.T, s store.Store) {
	var a []store.EnqueueResult
	for range 5 {
		a = append(a, enqueueOne(t, s, t0, rated("A", 2, time.Minute)))
	}
	b := enqueueOne(t, s, t0, rated("B", 2, time.Minute))
	got := reserve(t, s, t0, 10, "api")
	wantReserved(t, got, a[0].JobID, a[1].JobID, b.JobID)
	for _, r := range got {
		completeOne(t, s, t0, r)
	}
	j := getJob(t, s, a[2].JobID)
	if j.Hold != store.HoldRate || j.State != store.JobStateScheduled || !j.HeldUntil.Equal(t0.Add(time.Minute)) || !j.HasRate || j.RateKey != "A" {
		t.Fatalf("a job waiting for its rate window: %+v", j)
	}
	qs, err := s.ListQueues(context.Background(), &store.ListQueuesParams{Now: t0})
	if err != nil || len(qs) != 1 || qs[0].Held[store.HoldRate] != 3 {
		t.Fatalf("ListQueues: %+v %v, want 3 held by rate", qs, err)
	}
	// Completing frees no place in the window.
	wantReserved(t, reserve(t, s, t0.Add(30*time.Second), 10, "api"))
	// A new job of the key waits behind those that wait.
	late := enqueueOne(t, s, t0.Add(30*time.Second), rated("A", 2, time.Minute))
	got = reserve(t, s, t0.Add(time.Minute), 10, "api")
	wantReserved(t, got, a[2].JobID, a[3].JobID)
	for _, r := range got {
		completeOne(t, s, t0.Add(time.Minute), r)
	}
	got = reserve(t, s, t0.Add(2*time.Minute), 10, "api")
	wantReserved(t, got, a[4].JobID, late.JobID)
	for _, r := range got {
		completeOne(t, s, t0.Add(2*time.Minute), r)
	}
	wantReserved(t, reserve(t, s, t0.Add(3*time.Minute), 10, "api"))
}

// testRateCancelWaiting: a job cancelled while it waits for its rate
// window leaves the key's waiting list; the next one takes its place.
func testRateCancelWaiting(t *testing.T, s store.Store) {
	var a []store.EnqueueResult
	for range 3 {
		a = append(a, enqueueOne(t, s, t0, rated("A", 1, time.Minute)))
	}
	wantReserved(t, reserve(t, s, t0, 10, "api"), a[0].JobID)
	if _, err := s.CancelJob(context.Background(), &store.CancelJobParams{ID: a[1].JobID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	wantReserved(t, reserve(t, s, t0.Add(time.Minute), 10, "api"), a[2].JobID)
}

// testRateConcurrentReserve: workers reserving at once, in one window, get
// exactly limit jobs of a rate key.
func testRateConcurrentReserve(t *testing.T, s store.Store) {
	rateAcross(t, [3]store.Store{s, s, s})
}

// rateAcross enqueues 30 jobs of one rate key with limit 4 an hour and has
// six workers on the nodes n reserve in a loop within the hour: exactly 4
// are reserved.
func rateAcross(t *testing.T, n [3]store.Store) {
	for i := range 30 {
		enqueueOne(t, n[i%3], t0, rated("A", 4, time.Hour))
	}
	var got atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 5 {
				rs, err := n[w%3].Reserve(context.Background(), &store.ReserveParams{Queues: []string{"api"}, WorkerID: fmt.Sprint(w), Max: 3,
					Lease: time.Hour, Now: t0.Add(time.Duration(i) * time.Minute)})
				if err != nil {
					t.Error(err)
					return
				}
				got.Add(int64(len(rs)))
			}
		})
	}
	wg.Wait()
	if g := got.Load(); g != 4 {
		t.Fatalf("%d jobs of a rate key with limit 4 an hour reserved within the hour, want 4", g)
	}
}
