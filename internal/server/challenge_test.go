package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// challengeConfig is the payment queue of docs/webhooks.md ("A payment
// queue"): a 24 h window, a key required, a rule on the account and the
// amount for 60 s, and a signed webhook route that takes the payment id
// from the Idempotency-Key header.
const challengeConfig = `
[[queues]]
name = "payments"
dedup_window_ms = 86400000
require_key = true

[[queues.rules]]
name = "same-account-same-amount"
key_fields = ["/account", "/amount"]
window_ms = 60000

[[webhooks]]
path = "/hooks/payments"
queue = "payments"
job_type = "payment"
key_header = "Idempotency-Key"

[webhooks.signature]
scheme = "hmac-sha256"
header = "X-Signature"
prefix = "sha256="
secret_env = "SEPP_TEST_PAYMENTS_SECRET"
`

// TestPaymentChallenge: the same payment id posted three times makes one
// job (202, 200, 200, one id); the same account and amount under another
// payment id within 60 s is refused naming the first job; after the window
// it is taken; a bad signature is a 401 that writes nothing; the lookup of
// the payment id shows its job, state and result.
func TestPaymentChallenge(t *testing.T) {
	t.Setenv("SEPP_TEST_PAYMENTS_SECRET", "whsec-test")
	srv := testserver.Start(t, testserver.Options{Config: challengeConfig})
	c := connectClient(t, srv)
	ctx := context.Background()
	url := srv.URL + "/hooks/payments"
	post := func(paymentID, body, secret string) hookResp {
		return webhookPost(t, "POST", url, body, map[string]string{
			"Idempotency-Key": paymentID, "X-Signature": "sha256=" + hexHMAC(secret, body), "Content-Type": "application/json"})
	}
	body := `{"payment":"pay-1","account":"acc-123","amount":100}`

	first := post("pay-1", body, "whsec-test")
	if first.status != http.StatusAccepted || first.jobID() == "" || first.body["deduplicated"] != false {
		t.Fatalf("first post: %d %s", first.status, first.raw)
	}
	for i := range 2 {
		r := post("pay-1", body, "whsec-test")
		if r.status != http.StatusOK || r.jobID() != first.jobID() || r.body["deduplicated"] != true {
			t.Fatalf("retry %d: %d %s, want 200 with job %s", i+1, r.status, r.raw, first.jobID())
		}
	}

	// Another payment id, the same account and amount, 30 s later.
	srv.Clock.Advance(30 * time.Second)
	other := `{"payment":"pay-2","account":"acc-123","amount":100}`
	r := post("pay-2", other, "whsec-test")
	wantProblem(t, r, http.StatusConflict, "DEDUP_RULE_VIOLATED")
	if r.body["jobId"] != first.jobID() {
		t.Fatalf("the refusal names %v, want the first job %s: %s", r.body["jobId"], first.jobID(), r.raw)
	}
	if l, err := c.LookupIdempotencyKey(ctx, "payments", "pay-2"); err != nil || l.Found {
		t.Fatalf("the refused payment wrote its key: %+v %v", l, err)
	}
	// The same through the API: the error names the rule, the job and when it frees.
	_, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "payments", JobType: "payment", Payload: []byte(other), IdempotencyKey: sepp.Key("pay-2")})
	var se *sepp.Error
	if !errors.Is(err, sepp.ErrDedupRuleViolated) || !errors.As(err, &se) || se.Code != "failed_precondition" ||
		se.Metadata["rule"] != "same-account-same-amount" || se.Metadata["job_id"] != first.jobID() || se.Metadata["frees_at"] == "" {
		t.Fatalf("enqueue under the rule: %v (%+v)", err, se)
	}

	// After the window: taken.
	srv.Clock.Advance(30 * time.Second)
	if r := post("pay-2", other, "whsec-test"); r.status != http.StatusAccepted || r.jobID() == first.jobID() {
		t.Fatalf("after the rule's window: %d %s", r.status, r.raw)
	}

	// A bad signature: 401, nothing written.
	third := `{"payment":"pay-3","account":"acc-9","amount":5}`
	wantProblem(t, post("pay-3", third, "wrong-secret"), http.StatusUnauthorized, "SIGNATURE_INVALID")
	if l, err := c.LookupIdempotencyKey(ctx, "payments", "pay-3"); err != nil || l.Found {
		t.Fatalf("the unsigned payment wrote its key: %+v %v", l, err)
	}

	// Was this already processed? Process pay-1, then look it up.
	jobs, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"payments"}, MaxJobs: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Job.ID == first.jobID() {
			if err := c.Complete(ctx, j.Job.ID, j.LeaseToken, []byte(`{"charge":"ch_1"}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What each policy decided, counted by outcome.
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(raw)
	for _, want := range []string{
		`sepp_dedup_outcomes_total{outcome="created",queue="payments"} 2`,
		`sepp_dedup_outcomes_total{outcome="hit",queue="payments"} 2`,
		`sepp_dedup_outcomes_total{outcome="rule_violated",queue="payments"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	l, err := c.LookupIdempotencyKey(ctx, "payments", "pay-1")
	if err != nil || !l.Found || l.JobID != first.jobID() || l.State != sepp.JobStateCompleted || string(l.Result) != `{"charge":"ch_1"}` || l.Hits != 2 {
		t.Fatalf("lookup of pay-1: %+v %v, want its job completed with its result and 2 hits", l, err)
	}
}
