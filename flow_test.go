package sepp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

const flowConfig = `
[[queues]]
name = "sync"
when_running = "run_again"

[[queues]]
name = "charges"
[[queues.rules]]
name = "account"
key_fields = ["/account"]
window_ms = 60000
limit = 2

[[queues]]
name = "mails"
[[queues.rules]]
name = "account"
key_fields = ["/account"]
window_ms = 60000
limit = 2
action = "delay"

[[queues]]
name = "api"
[queues.rate]
key_fields = ["/account"]
limit = 2
period_ms = 60000

[[queues]]
name = "accounts"
[queues.concurrency]
key_fields = ["/account"]
limit = 1
ordered = true
`

// TestRunAgain: a trigger while the job runs creates one follow-up, named
// in the ack, that waits (GetJob says for what) and runs once the running
// job completes; triggers meanwhile return the follow-up.
func TestRunAgain(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: flowConfig})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	req := sepp.EnqueueRequest{Queue: "sync", JobType: "rebuild", IdempotencyKey: sepp.Key("cache")}
	first, err := c.Enqueue(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"sync"}, MaxJobs: 10})
	if err != nil || len(rs) != 1 || rs[0].Job.ID != first.JobID {
		t.Fatalf("reserve: %v %+v", err, rs)
	}
	follow, err := c.Enqueue(ctx, req)
	if err != nil || follow.Deduplicated || follow.FollowsJobID != first.JobID || follow.JobID == first.JobID {
		t.Fatalf("trigger while running: %+v %v, want a follow-up of %s", follow, err, first.JobID)
	}
	if again, err := c.Enqueue(ctx, req); err != nil || !again.Deduplicated || again.JobID != follow.JobID || again.FollowsJobID != "" {
		t.Fatalf("trigger while the follow-up waits: %+v %v", again, err)
	}
	j, err := c.GetJob(ctx, follow.JobID)
	if err != nil || j.State != sepp.JobStateScheduled || j.HeldBy != sepp.JobHoldFollowUp || j.FollowsJobID != first.JobID {
		t.Fatalf("the waiting follow-up: %+v %v", j, err)
	}
	qs, err := c.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == "sync" && q.HeldFollowUp != 1 {
			t.Fatalf("queue sync: %+v, want one held follow-up", q)
		}
	}
	if err := c.Complete(ctx, rs[0].Job.ID, rs[0].LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	// Handed over to a waiting Reserve once the original completed.
	rs, err = c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"sync"}, MaxJobs: 10, Wait: 10 * time.Second})
	if err != nil || len(rs) != 1 || rs[0].Job.ID != follow.JobID || rs[0].Job.HeldBy != "" {
		t.Fatalf("after the original completed: %v %+v, want the follow-up", err, rs)
	}
}

// TestRuleLimitAndDelay: a rule with limit 2 refuses the third job of a
// key within its window, with the limit and when it frees; with action =
// "delay" the third is accepted for when the window has room.
func TestRuleLimitAndDelay(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: flowConfig})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	for i := range 2 {
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "charges", JobType: "charge", Payload: []byte(`{"account":"a"}`)}); err != nil {
			t.Fatalf("charge %d: %v", i, err)
		}
	}
	_, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "charges", JobType: "charge", Payload: []byte(`{"account":"a"}`)})
	var se *sepp.Error
	if !errors.Is(err, sepp.ErrDedupRuleViolated) || !errors.As(err, &se) || se.Metadata["rule"] != "account" ||
		se.Metadata["limit"] != "2" || se.Metadata["frees_at"] == "" || se.Metadata["job_id"] != "" {
		t.Fatalf("third charge: %v (%+v)", err, se)
	}
	var acks []*sepp.Ack
	for range 3 {
		a, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "mails", JobType: "mail", Payload: []byte(`{"account":"a"}`)})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, a)
	}
	if !acks[0].DelayedUntil.IsZero() || !acks[1].DelayedUntil.IsZero() || acks[2].DelayedUntil.Sub(srv.Clock.Now()) != time.Minute {
		t.Fatalf("delays: %v %v %v, want none, none, a minute", acks[0].DelayedUntil, acks[1].DelayedUntil, acks[2].DelayedUntil)
	}
	if j, err := c.GetJob(ctx, acks[2].JobID); err != nil || !j.RunAt.Equal(acks[2].DelayedUntil) || j.State != sepp.JobStateScheduled {
		t.Fatalf("the delayed job: %+v %v", j, err)
	}
}

// TestConcurrencyPerKey: with [queues.concurrency] limit 1, a worker gets
// one job per account at a time, in enqueue order; the waiting ones say
// what holds them; completing one hands over the next.
func TestConcurrencyPerKey(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: flowConfig})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	var a []*sepp.Ack
	for _, acct := range []string{"a", "a", "b", "a"} {
		ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "accounts", JobType: "charge", Payload: []byte(`{"account":"` + acct + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		a = append(a, ack)
	}
	rs, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"accounts"}, MaxJobs: 10})
	if err != nil || len(rs) != 2 || rs[0].Job.ID != a[0].JobID || rs[1].Job.ID != a[2].JobID {
		t.Fatalf("reserve: %v %+v, want the first job of each account", err, rs)
	}
	j, err := c.GetJob(ctx, a[1].JobID)
	if err != nil || j.HeldBy != sepp.JobHoldConcurrency || j.ConcurrencyKey != `["a"]` || j.State != sepp.JobStateScheduled {
		t.Fatalf("a job waiting for its account: %+v %v", j, err)
	}
	if err := c.Complete(ctx, rs[0].Job.ID, rs[0].LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	rs, err = c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"accounts"}, MaxJobs: 10, Wait: 10 * time.Second})
	if err != nil || len(rs) != 1 || rs[0].Job.ID != a[1].JobID {
		t.Fatalf("after the first completed: %v %+v, want the second of account a", err, rs)
	}
	// A payload without the field is refused, naming it.
	_, err = c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "accounts", JobType: "charge", Payload: []byte(`{}`)})
	var se *sepp.Error
	if !errors.As(err, &se) || se.Reason != "INVALID_FIELD" || se.Metadata["pointer"] != "/account" {
		t.Fatalf("no account field: %v", err)
	}
}

// TestRatePerKey: with [queues.rate] limit 2 a minute, a third job of an
// account waits, saying until when, and is delivered once the minute has
// passed; another account's job is not held.
func TestRatePerKey(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: flowConfig})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	var a []*sepp.Ack
	for _, acct := range []string{"a", "a", "a", "b"} {
		ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "api", JobType: "call", Payload: []byte(`{"account":"` + acct + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		a = append(a, ack)
	}
	rs, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"api"}, MaxJobs: 10})
	if err != nil || len(rs) != 3 {
		t.Fatalf("reserve: %v %+v, want two of account a and one of b", err, rs)
	}
	for _, r := range rs {
		if err := c.Complete(ctx, r.Job.ID, r.LeaseToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	j, err := c.GetJob(ctx, a[2].JobID)
	if err != nil || j.HeldBy != sepp.JobHoldRate || j.RateKey != `["a"]` || !j.HeldUntil.Equal(srv.Clock.Now().Add(time.Minute)) {
		t.Fatalf("the third job of account a: %+v %v", j, err)
	}
	srv.Clock.Advance(time.Minute)
	rs, err = c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"api"}, MaxJobs: 10})
	if err != nil || len(rs) != 1 || rs[0].Job.ID != a[2].JobID {
		t.Fatalf("a minute later: %v %+v, want the third job of account a", err, rs)
	}
}
