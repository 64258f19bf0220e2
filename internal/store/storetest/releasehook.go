package storetest

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// ReleaseHookOpener returns a fresh, empty store that calls onKeyReleased
// as its Options.OnKeyReleased: after each committed write that deleted n
// dedup records of queue because their jobs reached a final state their
// release_key_on names. The suite closes the store.
type ReleaseHookOpener func(t *testing.T, onKeyReleased func(queue string, n int)) store.Store

// releases collects a store's OnKeyReleased calls.
type releases struct {
	mu  sync.Mutex
	got map[string]int
	bad []string // calls with n < 1
}

func (r *releases) hook(queue string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n < 1 {
		r.bad = append(r.bad, queue)
	}
	r.got[queue] += n
}

// want checks that the calls since the last check added up to want, by
// queue, and starts counting afresh. A store calls the hook before the
// call whose write it reports returns.
func (r *releases) want(t *testing.T, what string, want map[string]int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Errorf("%s: OnKeyReleased called with n < 1 for %q", what, r.bad)
	}
	if want == nil {
		want = map[string]int{}
	}
	if !maps.Equal(r.got, want) {
		t.Errorf("%s: OnKeyReleased reported %v, want %v", what, r.got, want)
	}
	r.got, r.bad = map[string]int{}, nil
}

// RunReleaseHook checks Options.OnKeyReleased: every path by which a job
// reaches a final state its release_key_on names (Complete, also of several
// jobs, a Fail that dead-letters it, a lease that ends on its last attempt
// in a Sweep or a Reserve, CancelJob) reports the record it deleted, once;
// a state the policy does not name, a job without the policy, a record that
// names a newer job, a repeated call and ReleaseDedup report nothing.
func RunReleaseHook(t *testing.T, open ReleaseHookOpener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, r *releases)
	}{
		{"Completed", testReleaseHookCompleted},
		{"Dead", testReleaseHookDead},
		{"LeaseExpiry", testReleaseHookLeaseExpiry},
		{"Cancelled", testReleaseHookCancelled},
		{"NothingReleased", testReleaseHookNothingReleased},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &releases{got: map[string]int{}}
			s := open(t, r.hook)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tt.fn(t, s, r)
		})
	}
}

func testReleaseHookCompleted(t *testing.T, s store.Store, r *releases) {
	res := enqueue(t, s, t0, releasing("q", "a", store.ReleaseOnCompleted), releasing("q", "b", store.ReleaseOnCompleted),
		releasing("q", "c", store.ReleaseOnCompleted))
	r.want(t, "enqueue", nil)
	got := reserve(t, s, t0, 3, "q")
	if len(got) != 3 {
		t.Fatalf("reserved %d jobs, want 3", len(got))
	}
	tok := map[store.JobID]store.LeaseToken{}
	for _, g := range got {
		tok[g.Job.ID] = g.LeaseToken
	}
	if err := complete(s, res[0].JobID, tok[res[0].JobID], nil, t0); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	r.want(t, "Complete", map[string]int{"q": 1})
	out, err := s.Complete(context.Background(), &store.CompleteParams{Now: t0, Jobs: []store.CompletedJob{
		{ID: res[1].JobID, LeaseToken: tok[res[1].JobID]}, {ID: res[2].JobID, LeaseToken: tok[res[2].JobID]}}})
	if err != nil || out[0].Err != nil || out[1].Err != nil {
		t.Fatalf("Complete of two jobs: %+v %v", out, err)
	}
	r.want(t, "Complete of two jobs", map[string]int{"q": 2})
	out, err = s.Complete(context.Background(), &store.CompleteParams{Now: t0.Add(time.Second),
		Jobs: []store.CompletedJob{{ID: res[0].JobID, LeaseToken: tok[res[0].JobID]}}})
	if err != nil || !out[0].AlreadyCompleted {
		t.Fatalf("repeated Complete: %+v %v", out, err)
	}
	r.want(t, "repeated Complete", nil)
}

func testReleaseHookDead(t *testing.T, s store.Store, r *releases) {
	enqueueOne(t, s, t0, releasing("perm", "k", store.ReleaseOnDead))
	g := reserve(t, s, t0, 1, "perm")[0]
	if res := failJob(t, s, g, true, t0); res.State != store.JobStateDead {
		t.Fatalf("permanent Fail: %+v", res)
	}
	r.want(t, "permanent Fail", map[string]int{"perm": 1})
	res, err := s.Fail(context.Background(), &store.FailParams{ID: g.Job.ID, LeaseToken: g.LeaseToken, Error: "boom",
		Permanent: true, RetryAt: at(t0), Now: t0.Add(time.Second)})
	if err != nil || !res.AlreadyFailed {
		t.Fatalf("repeated Fail: %+v %v", res, err)
	}
	r.want(t, "repeated Fail", nil)

	j := releasing("last", "k", store.ReleaseOnDead)
	j.MaxAttempts = 2
	enqueueOne(t, s, t0, j)
	g = reserve(t, s, t0, 1, "last")[0]
	if res := failJob(t, s, g, false, t0); res.State != store.JobStateScheduled {
		t.Fatalf("Fail with an attempt left: %+v", res)
	}
	r.want(t, "Fail with an attempt left", nil)
	later := t0.Add(time.Minute)
	g = reserve(t, s, later, 1, "last")[0]
	if res := failJob(t, s, g, false, later); res.State != store.JobStateDead {
		t.Fatalf("Fail on the last attempt: %+v", res)
	}
	r.want(t, "Fail on the last attempt", map[string]int{"last": 1})
}

func testReleaseHookLeaseExpiry(t *testing.T, s store.Store, r *releases) {
	one := func(queue, key string) store.EnqueueJob {
		j := releasing(queue, key, store.ReleaseOnDead)
		j.MaxAttempts = 1
		return j
	}
	enqueueOne(t, s, t0, one("a", "k1"))
	enqueueOne(t, s, t0, one("a", "k2"))
	enqueueOne(t, s, t0, one("b", "k"))
	kept := releasing("c", "k", store.ReleaseOnDead) // attempts left: back to the queue
	kept.MaxAttempts = 2
	enqueueOne(t, s, t0, kept)
	reserve(t, s, t0, 2, "a")
	reserve(t, s, t0, 1, "b")
	reserve(t, s, t0, 1, "c")
	sw, err := s.Sweep(context.Background(), &store.SweepParams{Now: t0.Add(lease), Limit: 100, CompletedRetention: day, DeadRetention: day})
	if err != nil || sw.LeasesExpired != 4 {
		t.Fatalf("Sweep: %+v %v", sw, err)
	}
	r.want(t, "Sweep", map[string]int{"a": 2, "b": 1})

	// The same through Reserve, which expires leases before it takes jobs.
	enqueueOne(t, s, t0, one("d", "k"))
	reserve(t, s, t0, 1, "d")
	if got := reserve(t, s, t0.Add(lease), 1, "d"); len(got) != 0 {
		t.Fatalf("Reserve after the last lease ended delivered %+v", got)
	}
	r.want(t, "Reserve", map[string]int{"d": 1})
}

func testReleaseHookCancelled(t *testing.T, s store.Store, r *releases) {
	ctx := context.Background()
	waiting := enqueueOne(t, s, t0, releasing("q", "waiting", store.ReleaseOnCancelled))
	reserved := enqueueOne(t, s, t0, releasing("r", "reserved", store.ReleaseOnCancelled))
	reserve(t, s, t0, 1, "r")
	for _, id := range []store.JobID{waiting.JobID, reserved.JobID} {
		if j, err := s.CancelJob(ctx, &store.CancelJobParams{ID: id, Now: t0}); err != nil || j.State != store.JobStateCancelled {
			t.Fatalf("CancelJob: %+v %v", j, err)
		}
	}
	r.want(t, "CancelJob", map[string]int{"q": 1, "r": 1})
	if _, err := s.CancelJob(ctx, &store.CancelJobParams{ID: waiting.JobID, Now: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	r.want(t, "CancelJob of a cancelled job", nil)
}

func testReleaseHookNothingReleased(t *testing.T, s store.Store, r *releases) {
	ctx := context.Background()
	// States the policy does not name.
	done := enqueueOne(t, s, t0, releasing("named", "done", store.ReleaseOnDead|store.ReleaseOnCancelled))
	g := reserve(t, s, t0, 1, "named")[0]
	if err := complete(s, done.JobID, g.LeaseToken, nil, t0); err != nil {
		t.Fatal(err)
	}
	dead := enqueueOne(t, s, t0, releasing("named", "dead", store.ReleaseOnCompleted|store.ReleaseOnCancelled))
	g = reserve(t, s, t0, 1, "named")[0]
	failJob(t, s, g, true, t0)
	cancelled := enqueueOne(t, s, t0, releasing("named", "cancelled", store.ReleaseOnCompleted|store.ReleaseOnDead))
	if _, err := s.CancelJob(ctx, &store.CancelJobParams{ID: cancelled.JobID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	wantRecord(t, s, t0, "named", "dead", dead.JobID)
	r.want(t, "states the policy does not name", nil)

	// Jobs without the policy.
	res := enqueue(t, s, t0, job("none", "done"), job("none", "dead"), job("none", "cancelled"))
	got := reserve(t, s, t0, 2, "none")
	if len(got) != 2 {
		t.Fatalf("reserved %d jobs, want 2", len(got))
	}
	if err := complete(s, got[0].Job.ID, got[0].LeaseToken, nil, t0); err != nil {
		t.Fatal(err)
	}
	failJob(t, s, got[1], true, t0)
	if _, err := s.CancelJob(ctx, &store.CancelJobParams{ID: res[2].JobID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	r.want(t, "jobs without release_key_on", nil)

	// Records a newer job took over after their window.
	short := func(queue string) store.EnqueueJob {
		j := releasing(queue, "k", store.ReleaseOnCompleted|store.ReleaseOnDead|store.ReleaseOnCancelled)
		j.DedupWindow = time.Second
		return j
	}
	later := t0.Add(2 * time.Second)
	oldDone := enqueueOne(t, s, t0, short("done"))
	enqueueOne(t, s, t0, short("dead"))
	oldCancelled := enqueueOne(t, s, t0, short("cancelled"))
	rDone := reserve(t, s, t0, 1, "done")[0]
	rDead := reserve(t, s, t0, 1, "dead")[0]
	for _, q := range []string{"done", "dead", "cancelled"} {
		if n := enqueueOne(t, s, later, short(q)); n.Deduplicated {
			t.Fatalf("enqueue after the window: %+v, want a new job", n)
		}
	}
	end := later.Add(time.Millisecond)
	if err := complete(s, oldDone.JobID, rDone.LeaseToken, nil, end); err != nil {
		t.Fatal(err)
	}
	failJob(t, s, rDead, true, end)
	if _, err := s.CancelJob(ctx, &store.CancelJobParams{ID: oldCancelled.JobID, Now: end}); err != nil {
		t.Fatal(err)
	}
	r.want(t, "records of newer jobs", nil)

	// ReleaseDedup frees a key by hand: not a release_key_on release.
	if _, err := s.ReleaseDedup(ctx, &store.ReleaseDedupParams{Queue: "named", Key: "dead", Now: end}); err != nil {
		t.Fatalf("ReleaseDedup: %v", err)
	}
	r.want(t, "ReleaseDedup", nil)
}
