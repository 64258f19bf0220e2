package sepp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

const policyConfig = `
[[queues]]
name = "payments"
require_key = true
on_duplicate = "reject"

[[queues]]
name = "transfers"
key_fields = ["/account", "/amount"]
require_key = true
`

// TestRequireKey: a queue with require_key refuses an enqueue without a key,
// given or derived, with IDEMPOTENCY_KEY_REQUIRED, and takes one with a key.
func TestRequireKey(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: policyConfig})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	_, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "payments", JobType: "charge", Payload: []byte(`{}`)})
	var se *sepp.Error
	if !errors.Is(err, sepp.ErrIdempotencyKeyRequired) || !errors.As(err, &se) || se.Code != "invalid_argument" {
		t.Fatalf("no key on a require_key queue: %v", err)
	}
	if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "payments", JobType: "charge", IdempotencyKey: sepp.Key("pay-1")}); err != nil {
		t.Fatalf("with a key: %v", err)
	}
	// Other queues take jobs without keys.
	if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "emails", JobType: "receipt"}); err != nil {
		t.Fatalf("a queue without require_key: %v", err)
	}
}

// TestOnDuplicateReject: a hit on a queue with on_duplicate = "reject" fails
// with DUPLICATE_JOB naming the original job; in a batch it fails that item,
// in an atomic batch the whole batch, at its index.
func TestOnDuplicateReject(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: policyConfig})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	req := func(k string) sepp.EnqueueRequest {
		return sepp.EnqueueRequest{Queue: "payments", JobType: "charge", Payload: []byte(`{"amount":100}`), IdempotencyKey: sepp.Key(k)}
	}
	first, err := c.Enqueue(ctx, req("pay-1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Enqueue(ctx, req("pay-1"))
	var se *sepp.Error
	if !errors.Is(err, sepp.ErrDuplicateJob) || !errors.As(err, &se) || se.Code != "already_exists" || se.Metadata["job_id"] != first.JobID {
		t.Fatalf("a duplicate on a reject queue: %v (%+v), want DUPLICATE_JOB naming %s", err, se, first.JobID)
	}
	l, err := c.LookupIdempotencyKey(ctx, "payments", "pay-1")
	if err != nil || !l.Found || l.JobID != first.JobID || l.Hits != 0 {
		t.Fatalf("lookup: %+v %v, want the original with 0 hits", l, err)
	}
	res, err := c.EnqueueBatch(ctx, []sepp.EnqueueRequest{req("pay-2"), req("pay-1")}, sepp.BatchOptions{})
	if err != nil || res[0].Err != nil || !errors.Is(res[1].Err, sepp.ErrDuplicateJob) {
		t.Fatalf("batch: %+v %v", res, err)
	}
	_, err = c.EnqueueBatch(ctx, []sepp.EnqueueRequest{req("pay-3"), req("pay-2")}, sepp.BatchOptions{Atomic: true})
	if !errors.Is(err, sepp.ErrDuplicateJob) || !errors.As(err, &se) || se.Index != 1 {
		t.Fatalf("atomic batch: %v, want DUPLICATE_JOB at index 1", err)
	}
	if l, err := c.LookupIdempotencyKey(ctx, "payments", "pay-3"); err != nil || l.Found {
		t.Fatalf("the failed atomic batch wrote pay-3: %+v %v", l, err)
	}
}

// TestKeyFields: a queue with key_fields derives the key of a job enqueued
// without one from those payload fields, the same key sepp.DeriveKey
// computes; a payload without a field, or not a JSON object, is refused
// naming the pointer; an explicit key still wins.
func TestKeyFields(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: policyConfig})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	payload := []byte(`{"amount": 100, "account": "acc-123", "note": "first"}`)
	first, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "transfers", JobType: "move", Payload: payload})
	if err != nil || first.Deduplicated {
		t.Fatalf("first: %+v %v", first, err)
	}
	key, err := sepp.DeriveKey(payload, "/account", "/amount")
	if err != nil || key != `["acc-123",100]` {
		t.Fatalf("DeriveKey: %q %v", key, err)
	}
	l, err := c.LookupIdempotencyKey(ctx, "transfers", key)
	if err != nil || !l.Found || l.JobID != first.JobID || l.Policy != `require_key=true key_fields=["/account","/amount"]` {
		t.Fatalf("lookup of the derived key: %+v %v", l, err)
	}
	// Another note, fields in another order: the same key, a hit.
	again, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "transfers", JobType: "move", Payload: []byte(`{"account":"acc-123","note":"retry","amount":100}`)})
	if err != nil || !again.Deduplicated || again.JobID != first.JobID || !again.PayloadMismatch {
		t.Fatalf("same fields again: %+v %v", again, err)
	}
	for _, bad := range []struct{ payload, pointer string }{
		{`{"account":"acc-123"}`, "/amount"},
		{`[1,2]`, ""},
		{`not json`, ""},
	} {
		_, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "transfers", JobType: "move", Payload: []byte(bad.payload)})
		var se *sepp.Error
		if !errors.Is(err, sepp.ErrInvalidField) || !errors.As(err, &se) || se.Metadata["pointer"] != bad.pointer {
			t.Fatalf("payload %s: %v (%+v), want INVALID_FIELD naming pointer %q", bad.payload, err, se, bad.pointer)
		}
	}
	// An explicit key is used as given.
	own, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "transfers", JobType: "move", Payload: payload, IdempotencyKey: sepp.Key("transfer-9")})
	if err != nil || own.Deduplicated {
		t.Fatalf("explicit key: %+v %v", own, err)
	}
}

// TestServerSaysTheKey: the ack names the key an enqueue was judged by,
// given or derived, and a lookup or release may give the payload in place
// of the key on a queue with key_fields: a client needs no copy of the
// derivation.
func TestServerSaysTheKey(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: policyConfig})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	payload := []byte(`{"amount": 100, "account": "acc-123"}`)
	ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "transfers", JobType: "move", Payload: payload})
	if err != nil || ack.IdempotencyKey != `["acc-123",100]` {
		t.Fatalf("derived: %+v %v", ack, err)
	}
	given, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "payments", JobType: "charge", IdempotencyKey: sepp.Key("pay-7")})
	if err != nil || given.IdempotencyKey != "pay-7" {
		t.Fatalf("given: %+v %v", given, err)
	}
	none, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "plain", JobType: "x"})
	if err != nil || none.IdempotencyKey != "" {
		t.Fatalf("unkeyed: %+v %v", none, err)
	}
	// Fields in another order and another note: the same key.
	l, err := c.LookupIdempotencyKeyByPayload(ctx, "transfers", []byte(`{"note":"n","account":"acc-123","amount":100}`))
	if err != nil || !l.Found || l.JobID != ack.JobID || l.IdempotencyKey != ack.IdempotencyKey {
		t.Fatalf("lookup by payload: %+v %v", l, err)
	}
	if l, err := c.LookupIdempotencyKey(ctx, "payments", "pay-7"); err != nil || l.IdempotencyKey != "pay-7" {
		t.Fatalf("lookup by key: %+v %v", l, err)
	}
	// Refused: a queue without key_fields, and a payload without the fields.
	var se *sepp.Error
	if _, err := c.LookupIdempotencyKeyByPayload(ctx, "payments", payload); !errors.Is(err, sepp.ErrInvalidField) || !errors.As(err, &se) || se.Metadata["queue"] != "payments" {
		t.Fatalf("payload on a queue without key_fields: %v", err)
	}
	if _, _, _, err := c.ReleaseIdempotencyKeyByPayload(ctx, "transfers", []byte(`{"account":"acc-123"}`)); !errors.Is(err, sepp.ErrInvalidField) || !errors.As(err, &se) || se.Metadata["pointer"] != "/amount" {
		t.Fatalf("payload without /amount: %v", err)
	}
	released, jobID, key, err := c.ReleaseIdempotencyKeyByPayload(ctx, "transfers", payload)
	if err != nil || !released || jobID != ack.JobID || key != ack.IdempotencyKey {
		t.Fatalf("release by payload: %v %q %q %v", released, jobID, key, err)
	}
	if l, err := c.LookupIdempotencyKeyByPayload(ctx, "transfers", payload); err != nil || l.Found || l.IdempotencyKey != ack.IdempotencyKey {
		t.Fatalf("after release: %+v %v", l, err)
	}
}

// TestOnDuplicateReplaceAndDebounce: through the API, a hit on a replacing
// queue says replaced and the waiting job takes the new payload; on a
// debouncing queue the job's run-at moves with each hit, up to the longest
// wait.
func TestOnDuplicateReplaceAndDebounce(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: `
[[queues]]
name = "profile-sync"
on_duplicate = "replace"

[[queues]]
name = "digest"
on_duplicate = "debounce"
debounce_ms = 10000
debounce_max_wait_ms = 25000
`})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	first, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "profile-sync", JobType: "sync", Payload: []byte(`{"v":1}`), IdempotencyKey: sepp.Key("user-7")})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "profile-sync", JobType: "sync", Payload: []byte(`{"v":2}`), IdempotencyKey: sepp.Key("user-7")})
	if err != nil || !again.Deduplicated || !again.Replaced || again.JobID != first.JobID {
		t.Fatalf("replace: %+v %v", again, err)
	}
	if j, err := c.GetJob(ctx, first.JobID); err != nil || string(j.Payload) != `{"v":2}` {
		t.Fatalf("the replaced job: %+v %v", j, err)
	}

	d, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "digest", JobType: "mail", IdempotencyKey: sepp.Key("digest-user-7")})
	if err != nil {
		t.Fatal(err)
	}
	t0 := srv.Clock.Now()
	for _, step := range []time.Duration{5 * time.Second, 7 * time.Second, 8 * time.Second} {
		srv.Clock.Advance(step)
		a, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "digest", JobType: "mail", IdempotencyKey: sepp.Key("digest-user-7")})
		if err != nil || !a.Replaced || a.JobID != d.JobID {
			t.Fatalf("debounce: %+v %v", a, err)
		}
		want := min(srv.Clock.Now().Add(10*time.Second).Sub(t0), 25*time.Second)
		if j, err := c.GetJob(ctx, d.JobID); err != nil || !j.RunAt.Equal(t0.Add(want)) {
			t.Fatalf("debounced run-at %v, want %v: %+v %v", j.RunAt, t0.Add(want), j, err)
		}
	}
}
