package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

const lease = 30 * time.Second

func reserve(t *testing.T, s store.Store, now time.Time, max int, queues ...string) []store.ReservedJob {
	t.Helper()
	res, err := s.Reserve(context.Background(), &store.ReserveParams{Queues: queues, WorkerID: "w", Max: max, Lease: lease, Now: now})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return res
}

func getJob(t *testing.T, s store.Store, id store.JobID) *store.Job {
	t.Helper()
	j, err := s.GetJob(context.Background(), &store.GetJobParams{ID: id})
	if err != nil {
		t.Fatalf("GetJob: %v", err)
	}
	return j
}

func testReserveOrder(t *testing.T, s store.Store) {
	mk := func(queue string, priority int32, runAt time.Time) store.EnqueueJob {
		j := job(queue, "")
		j.Priority, j.RunAt = priority, runAt
		return j
	}
	// Enqueued in this order; expected delivery: priority, then run-at, then enqueue order.
	res := enqueue(t, s, t0,
		mk("a", 0, t0),                   // 0
		mk("b", 5, t0),                   // 1
		mk("a", 0, t0.Add(-time.Minute)), // 2: run_at in the past counts as now
		mk("a", 5, t0),                   // 3
		mk("b", 0, t0),                   // 4
	)
	later := t0.Add(time.Second)
	got := reserve(t, s, later, 10, "a", "b")
	want := []int{1, 3, 0, 2, 4}
	if len(got) != len(want) {
		t.Fatalf("reserved %d jobs, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Job.ID != res[w].JobID {
			t.Fatalf("delivery %d is job %x, want job %d", i, got[i].Job.ID, w)
		}
		if got[i].Job.State != store.JobStateReserved || got[i].Job.Attempts != 1 {
			t.Fatalf("reserved job: %+v", got[i].Job)
		}
	}
}

func testReserveSkipsFutureAndReserved(t *testing.T, s store.Store) {
	future := job("q", "")
	future.RunAt = t0.Add(time.Hour)
	enqueue(t, s, t0, future, job("q", ""))
	if got := reserve(t, s, t0, 10, "q"); len(got) != 1 {
		t.Fatalf("reserved %d jobs, want 1 (the other runs in an hour)", len(got))
	}
	if got := reserve(t, s, t0.Add(10*time.Second), 10, "q"); len(got) != 0 {
		t.Fatalf("reserved %d jobs; a reserved job or a future one was delivered", len(got))
	}
	// At run_at: the future job, and the first one, whose lease has ended.
	if got := reserve(t, s, t0.Add(time.Hour), 10, "q"); len(got) != 2 {
		t.Fatalf("at run_at: reserved %d jobs, want 2", len(got))
	}
	if got := reserve(t, s, t0.Add(2*time.Hour), 10, "other"); len(got) != 0 {
		t.Fatalf("another queue delivered %d jobs", len(got))
	}
}

func testLeaseFencing(t *testing.T, s store.Store) {
	ctx := context.Background()
	enqueue(t, s, t0, job("q", "k"))
	r := reserve(t, s, t0, 1, "q")[0]
	stale := r.LeaseToken
	stale[0] ^= 0xff
	if err := complete(s, r.Job.ID, stale, nil, t0); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Complete with a wrong token: %v", err)
	}
	if _, err := s.Fail(ctx, &store.FailParams{ID: r.Job.ID, LeaseToken: stale, Now: t0, RetryAt: at(t0)}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Fail with a wrong token: %v", err)
	}
	if _, err := s.ExtendLease(ctx, &store.ExtendLeaseParams{ID: r.Job.ID, LeaseToken: stale, Lease: lease, Now: t0}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("ExtendLease with a wrong token: %v", err)
	}
	if j := getJob(t, s, r.Job.ID); j.State != store.JobStateReserved {
		t.Fatalf("a stale token changed the job: %+v", j)
	}
	if err := complete(s, r.Job.ID, r.LeaseToken, []byte("ok"), t0.Add(time.Second)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	j := getJob(t, s, r.Job.ID)
	if j.State != store.JobStateCompleted || string(j.Result) != "ok" || !j.FinalizedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("completed job: %+v", j)
	}
	other := r.LeaseToken
	other[0] ^= 1
	if err := complete(s, r.Job.ID, other, nil, t0.Add(time.Second)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Complete with another token: %v", err)
	}
	l, err := lookup(t, s, t0, "q", "k")
	if err != nil || l.JobState != store.JobStateCompleted || string(l.Result) != "ok" {
		t.Fatalf("lookup of a completed job: %+v %v", l, err)
	}
}

func testLeaseExpiryRedelivers(t *testing.T, s store.Store) {
	enqueue(t, s, t0, job("q", ""))
	first := reserve(t, s, t0, 1, "q")[0]
	if got := reserve(t, s, t0.Add(lease-time.Millisecond), 1, "q"); len(got) != 0 {
		t.Fatal("redelivered before the lease ended")
	}
	second := reserve(t, s, t0.Add(lease), 1, "q")
	if len(second) != 1 || second[0].Job.ID != first.Job.ID || second[0].Job.Attempts != 2 {
		t.Fatalf("redelivery at lease end: %+v", second)
	}
	// The old lease is fenced off; the job is unchanged by it.
	if err := complete(s, first.Job.ID, first.LeaseToken, nil, t0.Add(lease)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late Complete from the old lease: %v", err)
	}
	if j := getJob(t, s, first.Job.ID); j.State != store.JobStateReserved || j.Attempts != 2 {
		t.Fatalf("job after a late Complete: %+v", j)
	}
	// An expired lease is lost even before anyone reserves the job again.
	third := reserve(t, s, t0.Add(2*lease), 1, "q")[0]
	if err := complete(s, third.Job.ID, third.LeaseToken, nil, t0.Add(3*lease)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Complete after the lease ended: %v", err)
	}
}

func testLeaseExpiryOnLastAttemptIsDead(t *testing.T, s store.Store) {
	one := job("q", "")
	one.MaxAttempts = 1
	res := enqueue(t, s, t0, one)
	reserve(t, s, t0, 1, "q")
	sw, err := s.Sweep(context.Background(), &store.SweepParams{Now: t0.Add(lease), Limit: 100, CompletedRetention: day, DeadRetention: day})
	if err != nil || sw.LeasesExpired != 1 {
		t.Fatalf("sweep: %+v %v", sw, err)
	}
	j := getJob(t, s, res[0].JobID)
	if j.State != store.JobStateDead || j.LastError != "lease expired" || !j.FinalizedAt.Equal(t0.Add(lease)) {
		t.Fatalf("job whose last lease expired: %+v", j)
	}
	if got := reserve(t, s, t0.Add(2*lease), 1, "q"); len(got) != 0 {
		t.Fatal("a dead job was delivered")
	}
}

func testFailRetriesThenDead(t *testing.T, s store.Store) {
	ctx := context.Background()
	j := job("q", "")
	j.MaxAttempts = 3
	id := enqueue(t, s, t0, j)[0].JobID
	now := t0
	for attempt := 1; attempt <= 3; attempt++ {
		got := reserve(t, s, now, 1, "q")
		if len(got) != 1 || got[0].Job.Attempts != int32(attempt) {
			t.Fatalf("attempt %d: %+v", attempt, got)
		}
		retryAt := now.Add(time.Duration(attempt) * time.Minute)
		res, err := s.Fail(ctx, &store.FailParams{ID: id, LeaseToken: got[0].LeaseToken, Error: fmt.Sprint("boom ", attempt), RetryAt: at(retryAt), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if attempt < 3 {
			if res.State != store.JobStateScheduled || !res.NextRunAt.Equal(retryAt) {
				t.Fatalf("attempt %d: %+v", attempt, res)
			}
			if early := reserve(t, s, retryAt.Add(-time.Millisecond), 1, "q"); len(early) != 0 {
				t.Fatal("delivered before its retry time")
			}
			now = retryAt
			continue
		}
		if res.State != store.JobStateDead {
			t.Fatalf("last attempt: %+v", res)
		}
	}
	if got := getJob(t, s, id); got.State != store.JobStateDead || got.LastError != "boom 3" || got.Attempts != 3 {
		t.Fatalf("dead job: %+v", got)
	}
}

func testFailPermanent(t *testing.T, s store.Store) {
	id := enqueue(t, s, t0, job("q", ""))[0].JobID
	r := reserve(t, s, t0, 1, "q")[0]
	res, err := s.Fail(context.Background(), &store.FailParams{ID: id, LeaseToken: r.LeaseToken, Error: "bad input", Permanent: true, RetryAt: at(t0), Now: t0})
	if err != nil || res.State != store.JobStateDead {
		t.Fatalf("permanent failure: %+v %v", res, err)
	}
	if j := getJob(t, s, id); j.State != store.JobStateDead || j.LastError != "bad input" || j.Attempts != 1 {
		t.Fatalf("job: %+v", j)
	}
}

func testExtendLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	enqueue(t, s, t0, job("q", ""))
	r := reserve(t, s, t0, 1, "q")[0]
	until, err := s.ExtendLease(ctx, &store.ExtendLeaseParams{ID: r.Job.ID, LeaseToken: r.LeaseToken, Lease: lease, Now: t0.Add(20 * time.Second)})
	if err != nil || !until.Equal(t0.Add(50*time.Second)) {
		t.Fatalf("extend: %v %v", until, err)
	}
	if got := reserve(t, s, t0.Add(40*time.Second), 1, "q"); len(got) != 0 {
		t.Fatal("redelivered inside the extended lease")
	}
	if err := complete(s, r.Job.ID, r.LeaseToken, nil, t0.Add(45*time.Second)); err != nil {
		t.Fatalf("Complete inside the extended lease: %v", err)
	}
}

func testConcurrentReserveDeliversOnce(t *testing.T, s store.Store) {
	const jobs, workers = 300, 8
	var batch []store.EnqueueJob
	for range jobs {
		batch = append(batch, job("q", ""))
	}
	enqueue(t, s, t0, batch...)
	var mu sync.Mutex
	seen := map[store.JobID]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.Reserve(context.Background(), &store.ReserveParams{Queues: []string{"q"}, WorkerID: "w", Max: 7, Lease: lease, Now: t0})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					seen[r.Job.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != jobs {
		t.Fatalf("%d distinct jobs delivered, want %d", len(seen), jobs)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("job %x delivered %d times within one lease", id, n)
		}
	}
}

// at is a RetryAt that ignores the attempts.
func at(t time.Time) func(string, int32) time.Time { return func(string, int32) time.Time { return t } }

// complete completes one job and returns its own error.
func complete(s store.Store, id store.JobID, token store.LeaseToken, result []byte, now time.Time) error {
	errs, err := s.Complete(context.Background(), &store.CompleteParams{Now: now,
		Jobs: []store.CompletedJob{{ID: id, LeaseToken: token, Result: result}}})
	if err != nil {
		return err
	}
	return errs[0].Err
}

func testCompleteBatch(t *testing.T, s store.Store) {
	enqueue(t, s, t0, job("q", ""), job("q", ""), job("q", ""))
	r := reserve(t, s, t0, 3, "q")
	stale := r[1].LeaseToken
	stale[3] ^= 1
	errs, err := s.Complete(context.Background(), &store.CompleteParams{Now: t0, Jobs: []store.CompletedJob{
		{ID: r[0].Job.ID, LeaseToken: r[0].LeaseToken, Result: []byte("a")},
		{ID: r[1].Job.ID, LeaseToken: stale},
		{ID: r[2].Job.ID, LeaseToken: r[2].LeaseToken},
	}})
	if err != nil || errs[0].Err != nil || !errors.Is(errs[1].Err, store.ErrLeaseLost) || errs[2].Err != nil {
		t.Fatalf("batch complete: %v %v", errs, err)
	}
	want := []store.JobState{store.JobStateCompleted, store.JobStateReserved, store.JobStateCompleted}
	for i, w := range want {
		if j := getJob(t, s, r[i].Job.ID); j.State != w {
			t.Fatalf("job %d: %v, want %v", i, j.State, w)
		}
	}
}
