package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// RunFlowNodes runs the per-key flow control cases on three stores that
// share their data, as three nodes on one database: open returns them.
func RunFlowNodes(t *testing.T, open func(t *testing.T) [3]store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, n [3]store.Store)
	}{
		{"FollowUpAcrossNodes", testFollowUpAcrossNodes},
		{"ConcurrencyAcrossNodes", testConcurrencyAcrossNodes},
		{"RuleLimitAcrossNodes", testRuleLimitAcrossNodes},
		{"RateAcrossNodes", rateAcross},
		{"RateWakesOtherNodes", testRateWakesOtherNodes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nodes := open(t)
			for _, s := range nodes {
				t.Cleanup(func() {
					if err := s.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
			}
			tt.fn(t, nodes)
		})
	}
}

// testFollowUpAcrossNodes: a follow-up created on one node, of a job
// reserved on another, becomes deliverable on a third when the original
// completes on the second; concurrent triggers on all three nodes make one
// follow-up.
func testFollowUpAcrossNodes(t *testing.T, n [3]store.Store) {
	orig := enqueueOne(t, n[0], t0, again("x"))
	got := reserve(t, n[1], t0, 1, "sync")
	wantReserved(t, got, orig.JobID)
	var wg sync.WaitGroup
	res := make([]store.EnqueueResult, 30)
	for i := range res {
		wg.Go(func() { res[i] = enqueueOne(t, n[i%3], t0.Add(time.Second), again("x")) })
	}
	wg.Wait()
	created := 0
	var follow store.JobID
	for _, r := range res {
		if !r.Deduplicated {
			created++
			follow = r.JobID
			if r.FollowsJobID != orig.JobID {
				t.Fatalf("created job is no follow-up of %x: %+v", orig.JobID, r)
			}
		}
	}
	if created != 1 {
		t.Fatalf("%d follow-ups from concurrent triggers on three nodes, want 1", created)
	}
	wantReserved(t, reserve(t, n[2], t0.Add(2*time.Second), 10, "sync"))
	completeOne(t, n[1], t0.Add(2*time.Second), got[0])
	wantReserved(t, reserve(t, n[2], t0.Add(3*time.Second), 10, "sync"), follow)
}

// testConcurrencyAcrossNodes: three nodes reserving and completing in a
// loop never hold more than the limit (1) of a key at once, and with
// ordered deliver its jobs in enqueue order.
func testConcurrencyAcrossNodes(t *testing.T, n [3]store.Store) {
	for _, ordered := range []bool{false, true} {
		concurrentDeliveries(t, n[:], 45, 1, ordered)
	}
}

// testRuleLimitAcrossNodes: concurrent enqueues on three nodes under one
// rule key with limit 4 create exactly 4 jobs.
func testRuleLimitAcrossNodes(t *testing.T, n [3]store.Store) {
	var created atomic.Int64
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			res, err := n[i%3].EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Now: t0, Jobs: []store.EnqueueJob{limited("a", 4, false)}})
			if err != nil {
				t.Error(err)
				return
			}
			if res[0].Err == nil {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	if c := created.Load(); c != 4 {
		t.Fatalf("%d created across three nodes, want 4", c)
	}
}

// testRateWakesOtherNodes: a Reserve on one node that finds nothing to
// deliver is told when the rate window another node held jobs for has
// room, so that its long poll looks again then.
func testRateWakesOtherNodes(t *testing.T, n [3]store.Store) {
	a := enqueueOne(t, n[0], t0, rated("A", 1, time.Minute))
	enqueueOne(t, n[0], t0, rated("A", 1, time.Minute))
	wantReserved(t, reserve(t, n[0], t0, 10, "api"), a.JobID)
	var wakes []time.Time
	rs, err := n[1].Reserve(context.Background(), &store.ReserveParams{Queues: []string{"api"}, WorkerID: "b", Max: 10, Lease: time.Hour,
		Now: t0.Add(time.Second), WakeAt: func(queue string, at time.Time) {
			if queue == "api" {
				wakes = append(wakes, at)
			}
		}})
	if err != nil || len(rs) != 0 {
		t.Fatalf("reserve on another node: %v %+v", err, rs)
	}
	if len(wakes) == 0 || !wakes[0].Equal(t0.Add(time.Minute)) {
		t.Fatalf("wake-ups %v, want one at %v", wakes, t0.Add(time.Minute))
	}
}
