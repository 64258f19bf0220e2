package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// The release_key_on cases: a job whose release_key_on names the final
// state it reaches deletes its dedup record in the same write, so the next
// enqueue of the key creates a new job; a record that names another job
// (replaced after its expiry) stays; a job without the policy, or reaching
// a state the policy does not name, keeps its record for the whole window.

func releasing(queue, key string, on store.ReleaseOn) store.EnqueueJob {
	j := job(queue, key)
	j.ReleaseKeyOn = on
	return j
}

// wantReleased checks that (queue, key) has no live record at now and that
// an enqueue of it then creates a job other than old, whose record it is.
func wantReleased(t *testing.T, s store.Store, now time.Time, queue, key string, old store.JobID) store.JobID {
	t.Helper()
	if l, err := lookup(t, s, now, queue, key); !errors.Is(err, store.ErrDedupNotFound) {
		t.Fatalf("lookup of a released key: %+v %v, want ErrDedupNotFound", l, err)
	}
	r := enqueueOne(t, s, now, job(queue, key))
	if r.Deduplicated || r.JobID == old {
		t.Fatalf("enqueue of a released key: %+v, want a new job", r)
	}
	wantRecord(t, s, now, queue, key, r.JobID)
	return r.JobID
}

// wantRecord checks that (queue, key) has a live record naming id.
func wantRecord(t *testing.T, s store.Store, now time.Time, queue, key string, id store.JobID) {
	t.Helper()
	l, err := lookup(t, s, now, queue, key)
	if err != nil || l.Record.JobID != id {
		t.Fatalf("lookup of %q: %+v %v, want the record of job %x", key, l, err, id)
	}
}

func failJob(t *testing.T, s store.Store, r store.ReservedJob, permanent bool, now time.Time) *store.FailResult {
	t.Helper()
	res, err := s.Fail(context.Background(), &store.FailParams{ID: r.Job.ID, LeaseToken: r.LeaseToken, Error: "boom",
		Permanent: permanent, RetryAt: at(now.Add(time.Minute)), Now: now})
	if err != nil {
		t.Fatalf("Fail: %v", err)
	}
	return res
}

// testReleaseOnCompleted: Complete and a Complete of several jobs release
// their keys; the repeated Complete of the same token deletes nothing again
// (the record of the job enqueued since stays).
func testReleaseOnCompleted(t *testing.T, s store.Store) {
	res := enqueue(t, s, t0, releasing("q", "a", store.ReleaseOnCompleted), releasing("q", "b", store.ReleaseOnCompleted),
		releasing("q", "c", store.ReleaseOnCompleted))
	got := reserve(t, s, t0, 3, "q")
	if len(got) != 3 {
		t.Fatalf("reserved %d jobs, want 3", len(got))
	}
	tok := map[store.JobID]store.LeaseToken{}
	for _, r := range got {
		tok[r.Job.ID] = r.LeaseToken
	}
	now := t0.Add(time.Second)
	if err := complete(s, res[0].JobID, tok[res[0].JobID], nil, now); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	newA := wantReleased(t, s, now, "q", "a", res[0].JobID)
	out, err := s.Complete(context.Background(), &store.CompleteParams{Now: now, Jobs: []store.CompletedJob{
		{ID: res[1].JobID, LeaseToken: tok[res[1].JobID]}, {ID: res[2].JobID, LeaseToken: tok[res[2].JobID]}}})
	if err != nil || out[0].Err != nil || out[1].Err != nil {
		t.Fatalf("Complete of two jobs: %+v %v", out, err)
	}
	wantReleased(t, s, now, "q", "b", res[1].JobID)
	wantReleased(t, s, now, "q", "c", res[2].JobID)

	// The retry of the first Complete changes nothing: the new record stays.
	out, err = s.Complete(context.Background(), &store.CompleteParams{Now: now.Add(time.Second),
		Jobs: []store.CompletedJob{{ID: res[0].JobID, LeaseToken: tok[res[0].JobID]}}})
	if err != nil || !out[0].AlreadyCompleted {
		t.Fatalf("repeated Complete: %+v %v", out, err)
	}
	wantRecord(t, s, now.Add(time.Second), "q", "a", newA)
}

// testReleaseOnDeadFail: a permanent Fail and a Fail on the last attempt
// release the key, a Fail with attempts left does not; the repeated Fail
// deletes nothing again, and requeueing the dead job brings no record back.
func testReleaseOnDeadFail(t *testing.T, s store.Store) {
	ctx := context.Background()
	perm := enqueueOne(t, s, t0, releasing("q", "perm", store.ReleaseOnDead))
	r := reserve(t, s, t0, 1, "q")[0]
	if res := failJob(t, s, r, true, t0); res.State != store.JobStateDead {
		t.Fatalf("permanent Fail: %+v", res)
	}
	newPerm := wantReleased(t, s, t0, "q", "perm", perm.JobID)
	res, err := s.Fail(ctx, &store.FailParams{ID: r.Job.ID, LeaseToken: r.LeaseToken, Error: "boom", Permanent: true,
		RetryAt: at(t0), Now: t0.Add(time.Second)})
	if err != nil || !res.AlreadyFailed {
		t.Fatalf("repeated Fail: %+v %v", res, err)
	}
	wantRecord(t, s, t0.Add(time.Second), "q", "perm", newPerm)

	j := releasing("r", "last", store.ReleaseOnDead)
	j.MaxAttempts = 2
	last := enqueueOne(t, s, t0, j)
	r = reserve(t, s, t0, 1, "r")[0]
	if res := failJob(t, s, r, false, t0); res.State != store.JobStateScheduled {
		t.Fatalf("Fail with an attempt left: %+v", res)
	}
	wantRecord(t, s, t0, "r", "last", last.JobID)
	later := t0.Add(time.Minute)
	r = reserve(t, s, later, 1, "r")[0]
	if res := failJob(t, s, r, false, later); res.State != store.JobStateDead {
		t.Fatalf("Fail on the last attempt: %+v", res)
	}
	newLast := wantReleased(t, s, later, "r", "last", last.JobID)

	n, err := s.RequeueDead(ctx, &store.DeadJobsParams{Queue: "r", Now: later.Add(time.Second)})
	if err != nil || n.N != 1 {
		t.Fatalf("RequeueDead: %+v %v", n, err)
	}
	wantRecord(t, s, later.Add(time.Second), "r", "last", newLast)
	if l, err := lookup(t, s, later.Add(time.Second), "r", "last"); err != nil || l.Record.JobID == last.JobID {
		t.Fatalf("the requeued job got its record back: %+v %v", l, err)
	}
}

// testReleaseOnDeadLeaseExpiry: a lease that ends on the last attempt
// releases the key, whether a Sweep or a Reserve expires it.
func testReleaseOnDeadLeaseExpiry(t *testing.T, s store.Store) {
	one := func(queue, key string) store.EnqueueJob {
		j := releasing(queue, key, store.ReleaseOnDead)
		j.MaxAttempts = 1
		return j
	}
	swept := enqueueOne(t, s, t0, one("a", "k"))
	reserved := enqueueOne(t, s, t0, one("b", "k"))
	reserve(t, s, t0, 1, "a")
	reserve(t, s, t0, 1, "b")
	sw, err := s.Sweep(context.Background(), &store.SweepParams{Now: t0.Add(lease), Limit: 100, CompletedRetention: day, DeadRetention: day})
	if err != nil || sw.LeasesExpired != 2 {
		t.Fatalf("Sweep: %+v %v", sw, err)
	}
	if j := getJob(t, s, swept.JobID); j.State != store.JobStateDead {
		t.Fatalf("job whose last lease expired: %+v", j)
	}
	wantReleased(t, s, t0.Add(lease), "a", "k", swept.JobID)
	wantReleased(t, s, t0.Add(lease), "b", "k", reserved.JobID)

	// The same through Reserve, which expires leases before it takes jobs.
	viaReserve := enqueueOne(t, s, t0, one("c", "k"))
	reserve(t, s, t0, 1, "c")
	if got := reserve(t, s, t0.Add(lease), 1, "c"); len(got) != 0 {
		t.Fatalf("Reserve after the last lease ended delivered %+v", got)
	}
	if j := getJob(t, s, viaReserve.JobID); j.State != store.JobStateDead {
		t.Fatalf("job whose last lease expired: %+v", j)
	}
	wantReleased(t, s, t0.Add(lease), "c", "k", viaReserve.JobID)
}

// testReleaseOnCancelled: cancelling a waiting or a reserved job releases
// its key; cancelling a finished job changes nothing.
func testReleaseOnCancelled(t *testing.T, s store.Store) {
	ctx := context.Background()
	cancel := func(id store.JobID, now time.Time) {
		t.Helper()
		j, err := s.CancelJob(ctx, &store.CancelJobParams{ID: id, Now: now})
		if err != nil || j.State != store.JobStateCancelled {
			t.Fatalf("CancelJob: %+v %v", j, err)
		}
	}
	waiting := enqueueOne(t, s, t0, releasing("q", "waiting", store.ReleaseOnCancelled))
	cancel(waiting.JobID, t0)
	newWaiting := wantReleased(t, s, t0, "q", "waiting", waiting.JobID)
	cancel(waiting.JobID, t0.Add(time.Second)) // already cancelled: nothing changes
	wantRecord(t, s, t0.Add(time.Second), "q", "waiting", newWaiting)

	reserved := enqueueOne(t, s, t0, releasing("r", "reserved", store.ReleaseOnCancelled))
	reserve(t, s, t0, 1, "r")
	cancel(reserved.JobID, t0)
	wantReleased(t, s, t0, "r", "reserved", reserved.JobID)
}

// testReleaseOnlyNamedStates: a state the policy does not name keeps the
// record for its whole window.
func testReleaseOnlyNamedStates(t *testing.T, s store.Store) {
	ctx := context.Background()
	done := enqueueOne(t, s, t0, releasing("q", "done", store.ReleaseOnDead|store.ReleaseOnCancelled))
	r := reserve(t, s, t0, 1, "q")[0]
	if err := complete(s, done.JobID, r.LeaseToken, nil, t0); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	wantRecord(t, s, t0, "q", "done", done.JobID)
	if again := enqueueOne(t, s, t0, job("q", "done")); !again.Deduplicated || again.JobID != done.JobID {
		t.Fatalf("enqueue after a completion the policy does not name: %+v", again)
	}

	cancelled := enqueueOne(t, s, t0, releasing("r", "cancelled", store.ReleaseOnCompleted|store.ReleaseOnDead))
	if _, err := s.CancelJob(ctx, &store.CancelJobParams{ID: cancelled.JobID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	wantRecord(t, s, t0, "r", "cancelled", cancelled.JobID)

	dead := enqueueOne(t, s, t0, releasing("d", "dead", store.ReleaseOnCompleted|store.ReleaseOnCancelled))
	r = reserve(t, s, t0, 1, "d")[0]
	failJob(t, s, r, true, t0)
	wantRecord(t, s, t0, "d", "dead", dead.JobID)
	// Until the window ends.
	if _, err := lookup(t, s, t0.Add(day), "d", "dead"); !errors.Is(err, store.ErrDedupNotFound) {
		t.Fatalf("lookup after the window: %v", err)
	}
}

// testReleaseWithoutPolicy: a job enqueued without release_key_on releases
// nothing, whatever state it reaches.
func testReleaseWithoutPolicy(t *testing.T, s store.Store) {
	res := enqueue(t, s, t0, job("q", "done"), job("q", "dead"), job("q", "cancelled"))
	got := reserve(t, s, t0, 2, "q")
	if len(got) != 2 {
		t.Fatalf("reserved %d jobs, want 2", len(got))
	}
	if err := complete(s, got[0].Job.ID, got[0].LeaseToken, nil, t0); err != nil {
		t.Fatal(err)
	}
	failJob(t, s, got[1], true, t0)
	if _, err := s.CancelJob(context.Background(), &store.CancelJobParams{ID: res[2].JobID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{"done", "dead", "cancelled"} {
		wantRecord(t, s, t0, "q", k, res[i].JobID)
	}
}

// testReleaseKeepsReplacedRecord: once a record has expired and a newer job
// of the key has taken it over, the old job's end deletes nothing.
func testReleaseKeepsReplacedRecord(t *testing.T, s store.Store) {
	short := func(queue string) store.EnqueueJob {
		j := releasing(queue, "k", store.ReleaseOnCompleted|store.ReleaseOnDead|store.ReleaseOnCancelled)
		j.DedupWindow = time.Second
		return j
	}
	later := t0.Add(2 * time.Second) // past the window, within the lease
	oldDone := enqueueOne(t, s, t0, short("done"))
	oldDead := enqueueOne(t, s, t0, short("dead"))
	oldCancelled := enqueueOne(t, s, t0, short("cancelled"))
	rDone := reserve(t, s, t0, 1, "done")[0]
	rDead := reserve(t, s, t0, 1, "dead")[0]
	newDone := enqueueOne(t, s, later, short("done"))
	newDead := enqueueOne(t, s, later, short("dead"))
	newCancelled := enqueueOne(t, s, later, short("cancelled"))
	for _, r := range []store.EnqueueResult{newDone, newDead, newCancelled} {
		if r.Deduplicated {
			t.Fatalf("enqueue after the window: %+v, want a new job", r)
		}
	}
	end := later.Add(time.Millisecond)
	if err := complete(s, oldDone.JobID, rDone.LeaseToken, nil, end); err != nil {
		t.Fatal(err)
	}
	failJob(t, s, rDead, true, end)
	if _, err := s.CancelJob(context.Background(), &store.CancelJobParams{ID: oldCancelled.JobID, Now: end}); err != nil {
		t.Fatal(err)
	}
	wantRecord(t, s, end, "done", "k", newDone.JobID)
	wantRecord(t, s, end, "dead", "k", newDead.JobID)
	wantRecord(t, s, end, "cancelled", "k", newCancelled.JobID)
	if j := getJob(t, s, oldDead.JobID); j.State != store.JobStateDead {
		t.Fatalf("old job: %+v", j)
	}
}

// RunReleaseNodes runs the release_key_on cases across two handles on one
// store, as two `sepp serve` nodes sharing a database: what one node's
// worker ends frees the key for the other node's enqueue. open returns two
// fresh handles on one new, empty store (CutListener is not used); the
// suite closes both.
func RunReleaseNodes(t *testing.T, open func(t *testing.T) Nodes) {
	tests := []struct {
		name string
		fn   func(t *testing.T, a, b store.Store)
	}{
		{"CompleteOnOtherNode", testReleaseCompleteOnOtherNode},
		{"LeaseExpiryOnOtherNode", testReleaseLeaseExpiryOnOtherNode},
		{"CancelOnOtherNode", testReleaseCancelOnOtherNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nodes := open(t)
			for _, s := range []store.Store{nodes.A, nodes.B} {
				t.Cleanup(func() {
					if err := s.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
			}
			tt.fn(t, nodes.A, nodes.B)
		})
	}
}

func testReleaseCompleteOnOtherNode(t *testing.T, a, b store.Store) {
	first := enqueueOne(t, a, t0, releasing("q", "k", store.ReleaseOnCompleted))
	r := reserve(t, b, t0, 1, "q")[0]
	if err := complete(b, first.JobID, r.LeaseToken, nil, t0); err != nil {
		t.Fatal(err)
	}
	second := wantReleased(t, a, t0, "q", "k", first.JobID)
	wantRecord(t, b, t0, "q", "k", second)
}

func testReleaseLeaseExpiryOnOtherNode(t *testing.T, a, b store.Store) {
	j := releasing("q", "k", store.ReleaseOnDead)
	j.MaxAttempts = 1
	first := enqueueOne(t, a, t0, j)
	reserve(t, a, t0, 1, "q")
	if _, err := b.Sweep(context.Background(), &store.SweepParams{Now: t0.Add(lease), Limit: 100, CompletedRetention: day, DeadRetention: day}); err != nil {
		t.Fatal(err)
	}
	wantReleased(t, a, t0.Add(lease), "q", "k", first.JobID)
}

func testReleaseCancelOnOtherNode(t *testing.T, a, b store.Store) {
	first := enqueueOne(t, a, t0, releasing("q", "k", store.ReleaseOnCancelled))
	if _, err := b.CancelJob(context.Background(), &store.CancelJobParams{ID: first.JobID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	second := wantReleased(t, b, t0, "q", "k", first.JobID)
	wantRecord(t, a, t0, "q", "k", second)
}
