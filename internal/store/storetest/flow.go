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

// again is a job of queue "sync" with key, on a queue whose when_running is
// "run_again".
func again(key string) store.EnqueueJob {
	j := job("sync", key)
	j.RunAgain = true
	return j
}

func completeOne(t *testing.T, s store.Store, now time.Time, r store.ReservedJob) {
	t.Helper()
	if err := complete(s, r.Job.ID, r.LeaseToken, nil, now); err != nil {
		t.Fatalf("Complete: %v", err)
	}
}

func wantReserved(t *testing.T, got []store.ReservedJob, want ...store.JobID) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("reserved %d jobs, want %d (%x)", len(got), len(want), want)
	}
	for i := range want {
		if got[i].Job.ID != want[i] {
			t.Fatalf("reserved job %d is %x, want %x", i, got[i].Job.ID, want[i])
		}
	}
}

// testRunAgainFollowUp: a hit on a reserved original creates one follow-up
// that names it; later hits return the follow-up; the follow-up waits
// (scheduled, never delivered) through the original's retry, and becomes
// deliverable when the original completes.
func testRunAgainFollowUp(t *testing.T, s store.Store) {
	orig := enqueueOne(t, s, t0, again("rebuild"))
	// Not reserved yet: a hit, as on any queue.
	if r := enqueueOne(t, s, t0, again("rebuild")); !r.Deduplicated || r.JobID != orig.JobID || r.FollowsJobID != (store.JobID{}) {
		t.Fatalf("hit on a waiting original: %+v", r)
	}
	got := reserve(t, s, t0.Add(time.Second), 10, "sync")
	wantReserved(t, got, orig.JobID)
	follow := enqueueOne(t, s, t0.Add(2*time.Second), again("rebuild"))
	if follow.Deduplicated || follow.JobID == orig.JobID || follow.FollowsJobID != orig.JobID {
		t.Fatalf("hit on a reserved original: %+v, want a follow-up of %x", follow, orig.JobID)
	}
	for i := range 3 {
		if r := enqueueOne(t, s, t0.Add(3*time.Second), again("rebuild")); !r.Deduplicated || r.JobID != follow.JobID {
			t.Fatalf("hit %d while the follow-up waits: %+v, want the follow-up %x", i, r, follow.JobID)
		}
	}
	if l, err := lookup(t, s, t0.Add(3*time.Second), "sync", "rebuild"); err != nil || l.Record.JobID != follow.JobID || l.JobState != store.JobStateScheduled {
		t.Fatalf("the key's record: %+v %v, want the follow-up, scheduled", l, err)
	}
	j := getJob(t, s, follow.JobID)
	if j.State != store.JobStateScheduled || j.FollowsJobID != orig.JobID {
		t.Fatalf("the follow-up: state %v follows %x, want scheduled following %x", j.State, j.FollowsJobID, orig.JobID)
	}
	wantReserved(t, reserve(t, s, t0.Add(4*time.Second), 10, "sync"))
	// A retry of the original keeps the follow-up waiting.
	if _, err := s.Fail(context.Background(), &store.FailParams{ID: orig.JobID, LeaseToken: got[0].LeaseToken, Error: "boom",
		RetryAt: at(t0.Add(5 * time.Second)), Now: t0.Add(4 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	got = reserve(t, s, t0.Add(6*time.Second), 10, "sync")
	wantReserved(t, got, orig.JobID)
	completeOne(t, s, t0.Add(7*time.Second), got[0])
	j = getJob(t, s, follow.JobID)
	if j.FollowsJobID != (store.JobID{}) {
		t.Fatalf("the follow-up still follows %x after its original completed", j.FollowsJobID)
	}
	got = reserve(t, s, t0.Add(7*time.Second), 10, "sync")
	wantReserved(t, got, follow.JobID)
	// The follow-up runs: a hit on it makes the next follow-up.
	next := enqueueOne(t, s, t0.Add(8*time.Second), again("rebuild"))
	if next.Deduplicated || next.FollowsJobID != follow.JobID {
		t.Fatalf("hit on the running follow-up: %+v", next)
	}
}

// testRunAgainEnds: a follow-up is released by every way its original
// ends (dead by Fail, dead by lease expiry, cancelled); a follow-up
// cancelled while it waits stays cancelled; a hit on a finished original
// within the window is a hit.
func testRunAgainEnds(t *testing.T, s store.Store) {
	ends := []struct {
		name string
		end  func(r store.ReservedJob, now time.Time)
	}{
		{"dead", func(r store.ReservedJob, now time.Time) {
			if _, err := s.Fail(context.Background(), &store.FailParams{ID: r.Job.ID, LeaseToken: r.LeaseToken, Permanent: true, Error: "x", RetryAt: at(now), Now: now}); err != nil {
				t.Fatal(err)
			}
		}},
		{"cancelled", func(r store.ReservedJob, now time.Time) {
			if _, err := s.CancelJob(context.Background(), &store.CancelJobParams{ID: r.Job.ID, Now: now}); err != nil {
				t.Fatal(err)
			}
		}},
		{"lease expired on the last attempt", func(r store.ReservedJob, now time.Time) {
			if _, err := s.Sweep(context.Background(), &store.SweepParams{Now: now.Add(lease), Limit: 100, CompletedRetention: day, DeadRetention: day}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	now := t0
	for _, e := range ends {
		k := "end-" + e.name
		j := again(k)
		j.MaxAttempts = 1
		orig := enqueueOne(t, s, now, j)
		got := reserve(t, s, now, 1, "sync")
		wantReserved(t, got, orig.JobID)
		follow := enqueueOne(t, s, now, again(k))
		if follow.FollowsJobID != orig.JobID {
			t.Fatalf("%s: %+v, want a follow-up", e.name, follow)
		}
		e.end(got[0], now.Add(time.Second))
		now = now.Add(time.Minute)
		got = reserve(t, s, now, 10, "sync")
		if len(got) != 1 || got[0].Job.ID != follow.JobID {
			t.Fatalf("%s: reserved %d jobs (%+v), want the follow-up %x of %x", e.name, len(got), got, follow.JobID, orig.JobID)
		}
		completeOne(t, s, now, got[0])
		now = now.Add(time.Minute)
	}
	// Cancelled while it waits: the original's end leaves it cancelled.
	orig := enqueueOne(t, s, now, again("cancel-follow"))
	got := reserve(t, s, now, 1, "sync")
	follow := enqueueOne(t, s, now, again("cancel-follow"))
	if _, err := s.CancelJob(context.Background(), &store.CancelJobParams{ID: follow.JobID, Now: now}); err != nil {
		t.Fatal(err)
	}
	completeOne(t, s, now, got[0])
	wantReserved(t, reserve(t, s, now.Add(time.Second), 10, "sync"))
	if j := getJob(t, s, follow.JobID); j.State != store.JobStateCancelled {
		t.Fatalf("the cancelled follow-up is %v", j.State)
	}
	// A finished original within the window: a hit.
	if r := enqueueOne(t, s, now.Add(time.Second), again("cancel-follow")); !r.Deduplicated || r.JobID != follow.JobID {
		t.Fatalf("hit after both ended: %+v", r)
	}
	_ = orig
}

// testRunAgainReplacesFollowUp: on a queue that replaces, a hit while the
// follow-up waits gives it the new payload and leaves it waiting.
func testRunAgainReplacesFollowUp(t *testing.T, s store.Store) {
	j := again("r")
	j.Replace = true
	orig := enqueueOne(t, s, t0, j)
	got := reserve(t, s, t0, 1, "sync")
	follow := enqueueOne(t, s, t0, j)
	if follow.FollowsJobID != orig.JobID {
		t.Fatalf("%+v", follow)
	}
	j.Payload = []byte(`{"v":2}`)
	r := enqueueOne(t, s, t0.Add(time.Second), j)
	if !r.Deduplicated || !r.Replaced || r.JobID != follow.JobID {
		t.Fatalf("replacing hit on the follow-up: %+v", r)
	}
	if fj := getJob(t, s, follow.JobID); string(fj.Payload) != `{"v":2}` || fj.State != store.JobStateScheduled || fj.FollowsJobID != orig.JobID {
		t.Fatalf("the replaced follow-up: %+v", fj)
	}
	wantReserved(t, reserve(t, s, t0.Add(2*time.Second), 10, "sync"))
	completeOne(t, s, t0.Add(2*time.Second), got[0])
	wantReserved(t, reserve(t, s, t0.Add(3*time.Second), 10, "sync"), follow.JobID)
}

// testRunAgainConcurrent: many concurrent hits on a reserved original make
// exactly one follow-up, and every caller gets it.
func testRunAgainConcurrent(t *testing.T, s store.Store) {
	orig := enqueueOne(t, s, t0, again("c"))
	reserve(t, s, t0, 1, "sync")
	const n = 48
	ids := make([]store.EnqueueResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Now: t0.Add(time.Second), Jobs: []store.EnqueueJob{again("c")}})
			if err != nil || res[0].Err != nil {
				t.Errorf("enqueue %d: %v %+v", i, err, res)
				return
			}
			ids[i] = res[0]
		})
	}
	wg.Wait()
	follows := map[store.JobID]bool{}
	created := 0
	for _, r := range ids {
		follows[r.JobID] = true
		if !r.Deduplicated {
			created++
			if r.FollowsJobID != orig.JobID {
				t.Fatalf("a created job that is no follow-up: %+v", r)
			}
		}
	}
	if created != 1 || len(follows) != 1 {
		t.Fatalf("%d created, %d distinct ids; want one follow-up for all", created, len(follows))
	}
}

// limited is a job of queue "charges" under rule "account" with rule key
// acct, a limit and a window of a minute, refusing or delaying.
func limited(acct string, limit int, delay bool) store.EnqueueJob {
	j := job("charges", "")
	j.Rules = []store.RuleKey{{Name: "account", Key: acct, Window: time.Minute, Limit: limit, Delay: delay}}
	return j
}

// testRuleLimit: a rule with limit 3 lets 3 jobs take its key within any
// window (a sliding one), and refuses the fourth naming when it frees.
func testRuleLimit(t *testing.T, s store.Store) {
	times := []time.Duration{0, 10 * time.Second, 20 * time.Second}
	for _, d := range times {
		if r := enqueueOne(t, s, t0.Add(d), limited("a", 3, false)); r.Deduplicated || !r.DelayedUntil.IsZero() {
			t.Fatalf("job at %v: %+v", d, r)
		}
	}
	r := enqueue(t, s, t0.Add(30*time.Second), limited("a", 3, false))[0]
	var re *store.RuleViolationError
	if !errors.As(r.Err, &re) || re.Rule != "account" || re.Limit != 3 || !re.FreesAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("fourth job in the window: %+v (%+v), want refused until %v", r, re, t0.Add(time.Minute))
	}
	// Another key has its own window.
	enqueueOne(t, s, t0.Add(30*time.Second), limited("b", 3, false))
	// The window slides: at t0+60s the first job left it; the second and
	// third hold two of three places until 70 s and 80 s.
	enqueueOne(t, s, t0.Add(time.Minute), limited("a", 3, false))
	r = enqueue(t, s, t0.Add(61*time.Second), limited("a", 3, false))[0]
	if !errors.As(r.Err, &re) || !re.FreesAt.Equal(t0.Add(70*time.Second)) {
		t.Fatalf("at 61 s: %+v, want refused until 70 s", r)
	}
	enqueueOne(t, s, t0.Add(70*time.Second), limited("a", 3, false))
}

// testRuleDelay: a delaying rule accepts every job and spreads a burst so
// that no window holds more than its limit; each delayed job's ack says
// until when.
func testRuleDelay(t *testing.T, s store.Store) {
	jobs := make([]store.EnqueueJob, 5)
	for i := range jobs {
		jobs[i] = limited("a", 2, true)
	}
	res := enqueue(t, s, t0, jobs[:3]...)
	res = append(res, enqueue(t, s, t0.Add(time.Second), jobs[3:]...)...)
	want := []time.Time{t0, t0, t0.Add(time.Minute), t0.Add(time.Minute), t0.Add(2 * time.Minute)}
	for i, r := range res {
		if r.Err != nil || !r.RunAt.Equal(want[i]) {
			t.Fatalf("job %d: %+v, want run-at %v", i, r, want[i])
		}
		if delayed := !r.DelayedUntil.IsZero(); delayed != (i >= 2) || (delayed && !r.DelayedUntil.Equal(want[i])) {
			t.Fatalf("job %d: delayed until %v, want %v", i, r.DelayedUntil, want[i])
		}
		if j := getJob(t, s, r.JobID); !j.RunAt.Equal(want[i]) {
			t.Fatalf("job %d runs at %v, want %v", i, j.RunAt, want[i])
		}
	}
	if got := reserve(t, s, t0.Add(time.Second), 10, "charges"); len(got) != 2 {
		t.Fatalf("reserved %d at once, want 2", len(got))
	}
	// A job asking for a later run-at is counted then: delayed only when
	// the window is full at that time.
	for i, w := range []struct{ runAt, want time.Duration }{{10 * time.Minute, 0}, {10 * time.Minute, 0}, {10 * time.Minute, 11 * time.Minute}} {
		j := limited("b", 2, true)
		j.RunAt = t0.Add(w.runAt)
		r := enqueue(t, s, t0, j)[0]
		want := t0.Add(w.runAt)
		if w.want > 0 {
			want = t0.Add(w.want)
		}
		if r.Err != nil || !r.RunAt.Equal(want) || (w.want > 0) == r.DelayedUntil.IsZero() || (w.want > 0 && !r.DelayedUntil.Equal(want)) {
			t.Fatalf("job %d for %v: %+v, want run-at %v", i, w.runAt, r, want)
		}
	}
}

// testRuleLimitConcurrent: concurrent enqueues under one rule key with
// limit 5 create exactly 5 jobs and refuse the rest.
func testRuleLimitConcurrent(t *testing.T, s store.Store) {
	const n = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for i := range n {
		wg.Go(func() {
			res, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Now: t0, Jobs: []store.EnqueueJob{limited("a", 5, false)}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("enqueue %d: %v", i, err)
			case res[0].Err == nil:
				created++
			case errors.Is(res[0].Err, store.ErrDedupRuleViolated):
				refused++
			default:
				t.Errorf("enqueue %d: %v", i, fmt.Sprint(res[0]))
			}
		})
	}
	wg.Wait()
	if created != 5 || refused != n-5 {
		t.Fatalf("%d created, %d refused; want 5 and %d", created, refused, n-5)
	}
}
