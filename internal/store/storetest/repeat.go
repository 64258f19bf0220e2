package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// A call whose commit succeeded but whose answer was lost (a server killed
// between the two, a dropped connection) is retried by the client with the
// same token. The retry must succeed and change nothing; only another
// token is stale. These cases check that for every call that ends a lease.

// otherToken is a token that differs from tok.
func otherToken(tok store.LeaseToken) store.LeaseToken {
	tok[0] ^= 0xff
	return tok
}

func testRepeatedCompleteSucceeds(t *testing.T, s store.Store) {
	enqueue(t, s, t0, job("q", "k"))
	r := reserve(t, s, t0, 1, "q")[0]
	res, err := s.Complete(context.Background(), &store.CompleteParams{Now: t0.Add(time.Second),
		Jobs: []store.CompletedJob{{ID: r.Job.ID, LeaseToken: r.LeaseToken, Result: []byte("first")}}})
	if err != nil || res[0].Err != nil || res[0].AlreadyCompleted {
		t.Fatalf("first Complete: %+v %v", res, err)
	}
	// The retry comes later, after the lease would have ended, with the same
	// result: it succeeds and the stored job is untouched.
	res, err = s.Complete(context.Background(), &store.CompleteParams{Now: t0.Add(2 * lease),
		Jobs: []store.CompletedJob{{ID: r.Job.ID, LeaseToken: r.LeaseToken, Result: []byte("first")}}})
	if err != nil || res[0].Err != nil || !res[0].AlreadyCompleted {
		t.Fatalf("repeated Complete: %+v %v", res, err)
	}
	j := getJob(t, s, r.Job.ID)
	if j.State != store.JobStateCompleted || string(j.Result) != "first" || !j.FinalizedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("job after a repeated Complete: %+v", j)
	}
	if err := complete(s, r.Job.ID, otherToken(r.LeaseToken), []byte("other"), t0.Add(time.Second)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Complete with another token: %v", err)
	}
	// A token that failed the job may not complete it.
	enqueue(t, s, t0, job("q2", ""))
	f := reserve(t, s, t0, 1, "q2")[0]
	if _, err := s.Fail(context.Background(), &store.FailParams{ID: f.Job.ID, LeaseToken: f.LeaseToken, Error: "boom",
		RetryAt: at(t0.Add(time.Hour)), Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := complete(s, f.Job.ID, f.LeaseToken, nil, t0); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Complete after this token's Fail: %v", err)
	}
}

func testRepeatedCompleteBatchSucceeds(t *testing.T, s store.Store) {
	enqueue(t, s, t0, job("q", ""), job("q", ""))
	r := reserve(t, s, t0, 2, "q")
	batch := []store.CompletedJob{{ID: r[0].Job.ID, LeaseToken: r[0].LeaseToken}, {ID: r[1].Job.ID, LeaseToken: r[1].LeaseToken}}
	if res, err := s.Complete(context.Background(), &store.CompleteParams{Now: t0, Jobs: batch}); err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("first CompleteBatch: %+v %v", res, err)
	}
	batch = append(batch, store.CompletedJob{ID: r[0].Job.ID, LeaseToken: otherToken(r[0].LeaseToken)})
	res, err := s.Complete(context.Background(), &store.CompleteParams{Now: t0.Add(time.Second), Jobs: batch})
	if err != nil || res[0].Err != nil || !res[0].AlreadyCompleted || res[1].Err != nil || !res[1].AlreadyCompleted ||
		!errors.Is(res[2].Err, store.ErrLeaseLost) {
		t.Fatalf("repeated CompleteBatch: %+v %v", res, err)
	}
	for _, x := range r {
		if j := getJob(t, s, x.Job.ID); j.State != store.JobStateCompleted || !j.FinalizedAt.Equal(t0) {
			t.Fatalf("job after a repeated CompleteBatch: %+v", j)
		}
	}
}

func testRepeatedFailSucceeds(t *testing.T, s store.Store) {
	ctx := context.Background()
	j := job("q", "")
	j.MaxAttempts = 3
	enqueue(t, s, t0, j)
	r := reserve(t, s, t0, 1, "q")[0]
	fail := func(tok store.LeaseToken, now time.Time) (*store.FailResult, error) {
		return s.Fail(ctx, &store.FailParams{ID: r.Job.ID, LeaseToken: tok, Error: "boom", RetryAt: at(now.Add(time.Minute)), Now: now})
	}
	first, err := fail(r.LeaseToken, t0)
	if err != nil || first.AlreadyFailed || first.State != store.JobStateScheduled || !first.NextRunAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("first Fail: %+v %v", first, err)
	}
	// Retried after the job came due: it reports the state the first call
	// left, and does not reschedule again.
	again, err := fail(r.LeaseToken, t0.Add(2*time.Minute))
	if err != nil || !again.AlreadyFailed || again.State != store.JobStateScheduled || !again.NextRunAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("repeated Fail: %+v %v", again, err)
	}
	got := getJob(t, s, r.Job.ID)
	if got.Attempts != 1 || !got.RunAt.Equal(t0.Add(time.Minute)) || got.LastError != "boom" {
		t.Fatalf("job after a repeated Fail: %+v", got)
	}
	if _, err := fail(otherToken(r.LeaseToken), t0); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Fail with another token: %v", err)
	}
	// Once redelivered, the job is under a new lease: the old token's Fail
	// was overtaken and is stale, and the new holder is not disturbed.
	next := reserve(t, s, t0.Add(2*time.Minute), 1, "q")[0]
	if _, err := fail(r.LeaseToken, t0.Add(2*time.Minute)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("old token's Fail after redelivery: %v", err)
	}
	if err := complete(s, next.Job.ID, next.LeaseToken, nil, t0.Add(2*time.Minute)); err != nil {
		t.Fatalf("new holder's Complete: %v", err)
	}
}

func testRepeatedFailDeadSucceeds(t *testing.T, s store.Store) {
	enqueue(t, s, t0, job("q", ""))
	r := reserve(t, s, t0, 1, "q")[0]
	p := &store.FailParams{ID: r.Job.ID, LeaseToken: r.LeaseToken, Error: "bad input", Permanent: true, RetryAt: at(t0), Now: t0}
	if res, err := s.Fail(context.Background(), p); err != nil || res.State != store.JobStateDead {
		t.Fatalf("first Fail: %+v %v", res, err)
	}
	p.Now = t0.Add(time.Hour)
	res, err := s.Fail(context.Background(), p)
	if err != nil || !res.AlreadyFailed || res.State != store.JobStateDead {
		t.Fatalf("repeated Fail: %+v %v", res, err)
	}
	if j := getJob(t, s, r.Job.ID); j.State != store.JobStateDead || !j.FinalizedAt.Equal(t0) {
		t.Fatalf("job after a repeated Fail: %+v", j)
	}
}

func testRepeatedCompleteEffectSucceeds(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := claim(t, s, t0, "order-9:invoice")
	first, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Token: a.Token, Result: []byte("em_1"), Now: t0.Add(time.Second)})
	if err != nil || first.AlreadyCompleted || string(first.Result) != "em_1" || !first.CompletedAt.Equal(t0.Add(time.Second)) ||
		!first.ExpiresAt.Equal(t0.Add(time.Second+time.Hour)) {
		t.Fatalf("first CompleteEffect: %+v %v", first, err)
	}
	// The retry, past the claim's lease, answers success with what the first
	// call stored.
	again, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Token: a.Token, Result: []byte("em_1"), Now: t0.Add(2 * lease)})
	if err != nil || !again.AlreadyCompleted || string(again.Result) != "em_1" || !again.CompletedAt.Equal(t0.Add(time.Second)) ||
		!again.ExpiresAt.Equal(first.ExpiresAt) {
		t.Fatalf("repeated CompleteEffect: %+v %v", again, err)
	}
	e, err := s.GetEffect(ctx, &store.GetEffectParams{Scope: "mail.invoice", Key: "order-9:invoice", Now: t0.Add(2 * lease)})
	if err != nil || string(e.Result) != "em_1" || !e.CompletedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("effect after a repeated CompleteEffect: %+v %v", e, err)
	}
	if _, err := s.CompleteEffect(ctx, &store.CompleteEffectParams{Token: otherToken(a.Token), Now: t0.Add(2 * time.Second)}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("CompleteEffect with another token: %v", err)
	}
	// A spent token may not release or extend the completed record.
	if err := s.ReleaseEffect(ctx, &store.ReleaseEffectParams{Token: a.Token, Now: t0.Add(2 * time.Second)}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("ReleaseEffect after completion: %v", err)
	}
	if _, err := s.ExtendEffectLease(ctx, &store.ExtendEffectLeaseParams{Token: a.Token, Lease: lease, Now: t0.Add(2 * time.Second)}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("ExtendEffectLease after completion: %v", err)
	}
}
