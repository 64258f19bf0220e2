package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// webhookConfig has one webhook of each kind the tests need.
const webhookConfig = `
[[queues]]
name = "strict-payments"
key_reuse = "reject_mismatch"

[[webhooks]]
path = "/hooks/plain"
queue = "events"
job_type = "plain.event"
forward_headers = ["X-Event-Type", "X-Multi"]

[[webhooks]]
path = "/hooks/strict"
queue = "strict-payments"
job_type = "payment"

[[webhooks]]
path = "/hooks/optional"
queue = "events"
job_type = "optional"
require_key = false

[[webhooks]]
path = "/hooks/small"
queue = "events"
job_type = "small"
max_body_bytes = 16
`

// hookResp is one webhook answer.
type hookResp struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r hookResp) jobID() string { s, _ := r.body["jobId"].(string); return s }

// webhookPost sends one request over HTTP/1.1, as webhook senders do.
func webhookPost(t *testing.T, method, url, body string, headers map[string]string) hookResp {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := hookResp{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %q", method, url, raw)
		}
	}
	return out
}

// wantProblem checks an RFC 9457 answer.
func wantProblem(t *testing.T, r hookResp, status int, reason string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	if r.body["reason"] != reason || r.body["status"] != float64(status) ||
		r.body["type"] != "tag:sepp.dev,2026:"+reason || r.body["title"] == "" || r.body["detail"] == "" {
		t.Fatalf("problem %s, want reason %s status %d with type, title and detail", r.raw, reason, status)
	}
}

func connectClient(t *testing.T, srv *testserver.Server) *sepp.Client {
	t.Helper()
	c, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestWebhookAnswers(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: webhookConfig})
	url := srv.URL + "/hooks/plain"
	key := map[string]string{"Idempotency-Key": "delivery-1", "Content-Type": "application/json"}

	// One key posted three times: one job.
	first := webhookPost(t, "POST", url, `{"n":1}`, key)
	if first.status != http.StatusAccepted || first.jobID() == "" || first.body["deduplicated"] != false ||
		first.header.Get("Sepp-Job-Id") != first.jobID() || first.header.Get("Content-Type") != "application/json" {
		t.Fatalf("first: %d %v %s", first.status, first.header, first.raw)
	}
	for i := range 2 {
		r := webhookPost(t, "POST", url, `{"n":1}`, key)
		if r.status != http.StatusOK || r.jobID() != first.jobID() || r.body["deduplicated"] != true || r.header.Get("Sepp-Job-Id") != first.jobID() {
			t.Fatalf("retry %d: %d %s", i, r.status, r.raw)
		}
	}
	c := connectClient(t, srv)
	job, err := c.GetJob(context.Background(), first.jobID())
	if err != nil || string(job.Payload) != `{"n":1}` || job.JobType != "plain.event" || job.Queue != "events" || job.IdempotencyKey != "delivery-1" {
		t.Fatalf("job: %+v %v", job, err)
	}

	// The same key with another body.
	r := webhookPost(t, "POST", url, `{"n":2}`, key)
	wantProblem(t, r, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_CONFLICT")
	if r.body["jobId"] != first.jobID() {
		t.Fatalf("422 does not name the original job: %s", r.raw)
	}
	// ... on a reject_mismatch queue: the store refuses it.
	strict := srv.URL + "/hooks/strict"
	if r := webhookPost(t, "POST", strict, "a", key); r.status != http.StatusAccepted {
		t.Fatalf("strict first: %d %s", r.status, r.raw)
	}
	if r := webhookPost(t, "POST", strict, "a", key); r.status != http.StatusOK {
		t.Fatalf("strict retry: %d %s", r.status, r.raw)
	}
	wantProblem(t, webhookPost(t, "POST", strict, "b", key), http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_CONFLICT")

	// A key written as a quoted string, as the Idempotency-Key draft defines
	// it, is the same key.
	if r := webhookPost(t, "POST", url, `{"n":1}`, map[string]string{"Idempotency-Key": `"delivery-1"`}); r.status != http.StatusOK || r.jobID() != first.jobID() {
		t.Fatalf("quoted key: %d %s", r.status, r.raw)
	}

	// No key.
	wantProblem(t, webhookPost(t, "POST", url, "x", nil), http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED")
	// A key that is too long is the enqueue's own error.
	wantProblem(t, webhookPost(t, "POST", url, "x", map[string]string{"Idempotency-Key": strings.Repeat("k", 257)}),
		http.StatusBadRequest, "IDEMPOTENCY_KEY_TOO_LONG")
	// A malformed quoted key.
	wantProblem(t, webhookPost(t, "POST", url, "x", map[string]string{"Idempotency-Key": `"abc`}), http.StatusBadRequest, "INVALID_FIELD")

	// require_key = false: without a key every request is a new job.
	opt := srv.URL + "/hooks/optional"
	a, b := webhookPost(t, "POST", opt, "same", nil), webhookPost(t, "POST", opt, "same", nil)
	if a.status != http.StatusAccepted || b.status != http.StatusAccepted || a.jobID() == b.jobID() {
		t.Fatalf("unkeyed: %d %s / %d %s", a.status, a.raw, b.status, b.raw)
	}

	// Only POST.
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		r := webhookPost(t, m, url, "", key)
		wantProblem(t, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		if r.header.Get("Allow") != "POST" {
			t.Fatalf("%s: Allow %q", m, r.header.Get("Allow"))
		}
	}

	// Too large, with a Content-Length and without one (chunked).
	small := srv.URL + "/hooks/small"
	big := strings.Repeat("x", 17)
	wantProblem(t, webhookPost(t, "POST", small, big, key), http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
	req, _ := http.NewRequest("POST", small, io.MultiReader(strings.NewReader(big)))
	req.Header.Set("Idempotency-Key", "chunked")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || req.ContentLength != 0 {
		t.Fatalf("chunked too large: %d (content length %d)", resp.StatusCode, req.ContentLength)
	}
	http.DefaultClient.CloseIdleConnections()
	if r := webhookPost(t, "POST", small, strings.Repeat("x", 16), map[string]string{"Idempotency-Key": "small-1"}); r.status != http.StatusAccepted {
		t.Fatalf("at the limit: %d %s", r.status, r.raw)
	}
	if l, err := c.LookupIdempotencyKey(context.Background(), "events", "chunked"); err != nil || l.Found {
		t.Fatalf("a refused body was enqueued: %+v %v", l, err)
	}

	// The counter.
	mresp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	for _, want := range []string{
		`sepp_webhook_requests_total{path="/hooks/plain",status="202"} 1`,
		`sepp_webhook_requests_total{path="/hooks/plain",status="200"} 3`,
		`sepp_webhook_requests_total{path="/hooks/plain",status="422"} 1`,
		`sepp_webhook_requests_total{path="/hooks/plain",status="405"} 3`,
		`sepp_webhook_requests_total{path="/hooks/small",status="413"} 2`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestWebhookForwardHeaders(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: webhookConfig})
	req, _ := http.NewRequest("POST", srv.URL+"/hooks/plain", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "fwd")
	req.Header.Set("X-Event-Type", "push")
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	req.Header.Set("X-Not-Forwarded", "no")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d", resp.StatusCode)
	}
	job, err := connectClient(t, srv).GetJob(context.Background(), resp.Header.Get("Sepp-Job-Id"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"x-event-type": "push", "x-multi": "a, b"}
	if fmt.Sprint(job.Headers) != fmt.Sprint(want) {
		t.Fatalf("headers %v, want %v", job.Headers, want)
	}
}

func TestWebhookConcurrentOneKey(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: webhookConfig})
	const n = 64
	var wg sync.WaitGroup
	results := make([]hookResp, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = webhookPost(t, "POST", srv.URL+"/hooks/plain", "same body", map[string]string{"Idempotency-Key": "storm"})
		}()
	}
	wg.Wait()
	created, retries := 0, 0
	id := results[0].jobID()
	for _, r := range results {
		switch r.status {
		case http.StatusAccepted:
			created++
		case http.StatusOK:
			retries++
		default:
			t.Fatalf("status %d: %s", r.status, r.raw)
		}
		if r.jobID() != id {
			t.Fatalf("two job ids: %s and %s", id, r.jobID())
		}
	}
	if created != 1 || retries != n-1 {
		t.Fatalf("%d created, %d retries; want 1 and %d", created, retries, n-1)
	}
	jobs, err := connectClient(t, srv).ListJobs(context.Background(), sepp.ListJobsRequest{Queue: "events"})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Jobs) != 1 {
		t.Fatalf("%d jobs in the queue, want 1", len(jobs.Jobs))
	}
}

func hexHMAC(secret, msg string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func TestWebhookGitHubSignature(t *testing.T) {
	t.Setenv("SEPP_TEST_GITHUB_SECRET", "It's a Secret to Everybody")
	srv := testserver.Start(t, testserver.Options{Config: `
[[webhooks]]
path = "/hooks/github"
queue = "github"
job_type = "github.event"
key_header = "X-GitHub-Delivery"
forward_headers = ["X-GitHub-Event"]
[webhooks.signature]
scheme = "github"
secret_env = "SEPP_TEST_GITHUB_SECRET"
`})
	url := srv.URL + "/hooks/github"
	body := "Hello, World!"
	// The example of GitHub's documentation ("Validating webhook deliveries").
	const docSig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got := "sha256=" + hexHMAC("It's a Secret to Everybody", body); got != docSig {
		t.Fatalf("test's HMAC %s, want GitHub's %s", got, docSig)
	}
	hdr := func(delivery, sig string) map[string]string {
		h := map[string]string{"X-GitHub-Delivery": delivery, "X-GitHub-Event": "push"}
		if sig != "" {
			h["X-Hub-Signature-256"] = sig
		}
		return h
	}
	c := connectClient(t, srv)
	refused := map[string]string{
		"wrong":     "sha256=" + hexHMAC("another secret", body),
		"missing":   "",
		"no prefix": hexHMAC("It's a Secret to Everybody", body),
		"sha1":      "sha1=" + strings.Repeat("0", 40),
		"not hex":   "sha256=" + strings.Repeat("z", 64),
	}
	for name, sig := range refused {
		delivery := "refused-" + strings.ReplaceAll(name, " ", "-")
		wantProblem(t, webhookPost(t, "POST", url, body, hdr(delivery, sig)), http.StatusUnauthorized, "SIGNATURE_INVALID")
		if l, err := c.LookupIdempotencyKey(context.Background(), "github", delivery); err != nil || l.Found {
			t.Fatalf("%s: a refused request was enqueued: %+v %v", name, l, err)
		}
	}
	// A body changed on the way.
	wantProblem(t, webhookPost(t, "POST", url, body+"!", hdr("changed", docSig)), http.StatusUnauthorized, "SIGNATURE_INVALID")

	r := webhookPost(t, "POST", url, body, hdr("72d3162e-cc78-11e3-81ab-4c9367dc0958", docSig))
	if r.status != http.StatusAccepted {
		t.Fatalf("signed: %d %s", r.status, r.raw)
	}
	// Upper-case hex is the same digest.
	if r2 := webhookPost(t, "POST", url, body, hdr("72d3162e-cc78-11e3-81ab-4c9367dc0958", "sha256="+strings.ToUpper(docSig[7:]))); r2.status != http.StatusOK || r2.jobID() != r.jobID() {
		t.Fatalf("upper-case hex retry: %d %s", r2.status, r2.raw)
	}
	job, err := c.GetJob(context.Background(), r.jobID())
	if err != nil || string(job.Payload) != body || job.Headers["x-github-event"] != "push" || job.IdempotencyKey != "72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Fatalf("job %+v %v", job, err)
	}
}

func stripeHeader(secret string, ts int64, body string) string {
	return fmt.Sprintf("t=%d,v1=%s", ts, hexHMAC(secret, strconv.FormatInt(ts, 10)+"."+body))
}

func TestWebhookStripeSignature(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "stripe-secret")
	const secret = "whsec_test_secret"
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, testserver.Options{Config: fmt.Sprintf(`
[[webhooks]]
path = "/hooks/stripe"
queue = "stripe"
job_type = "stripe.event"
[webhooks.signature]
scheme = "stripe"
secret_file = %q
timestamp_tolerance_ms = 300000
`, secretFile)})
	url := srv.URL + "/hooks/stripe"
	body := `{"id":"evt_1","type":"charge.succeeded"}`
	now := srv.Clock.Now().Unix()
	c := connectClient(t, srv)
	post := func(key, sig string) hookResp {
		h := map[string]string{"Idempotency-Key": key}
		if sig != "" {
			h["Stripe-Signature"] = sig
		}
		return webhookPost(t, "POST", url, body, h)
	}
	refused := map[string]string{
		"wrong secret": stripeHeader("whsec_other", now, body),
		"missing":      "",
		"stale":        stripeHeader(secret, now-301, body),
		"future":       stripeHeader(secret, now+301, body),
		"no t":         "v1=" + hexHMAC(secret, body),
		"no v1":        fmt.Sprintf("t=%d,v0=%s", now, hexHMAC(secret, fmt.Sprintf("%d.%s", now, body))),
		"t changed":    strings.Replace(stripeHeader(secret, now, body), fmt.Sprintf("t=%d", now), fmt.Sprintf("t=%d", now-1), 1),
	}
	for name, sig := range refused {
		key := "evt-" + strings.ReplaceAll(name, " ", "-")
		wantProblem(t, post(key, sig), http.StatusUnauthorized, "SIGNATURE_INVALID")
		if l, err := c.LookupIdempotencyKey(context.Background(), "stripe", key); err != nil || l.Found {
			t.Fatalf("%s: a refused request was enqueued: %+v %v", name, l, err)
		}
	}

	// Right, within the tolerance, with a second v1 of a rolled secret and a v0.
	sig := stripeHeader(secret, now-299, body) + ",v1=" + hexHMAC("whsec_old", "x") + ",v0=abc"
	if r := post("evt_1", sig); r.status != http.StatusAccepted {
		t.Fatalf("signed: %d %s", r.status, r.raw)
	}
	// The same signed request replayed once the server's clock has moved
	// past the tolerance is refused.
	fresh := stripeHeader(secret, now, body)
	if r := post("evt_1", fresh); r.status != http.StatusOK {
		t.Fatalf("retry: %d %s", r.status, r.raw)
	}
	srv.Clock.Advance(5*time.Minute + time.Second)
	wantProblem(t, post("evt_1", fresh), http.StatusUnauthorized, "SIGNATURE_INVALID")
	if l, err := c.LookupIdempotencyKey(context.Background(), "stripe", "evt_1"); err != nil || !l.Found || l.Hits != 1 {
		t.Fatalf("lookup: %+v %v (want one hit: the stale replay wrote nothing)", l, err)
	}
}

func TestWebhookHMACSignature(t *testing.T) {
	t.Setenv("SEPP_TEST_HMAC_SECRET", "s3cret")
	srv := testserver.Start(t, testserver.Options{Config: `
[[webhooks]]
path = "/hooks/custom"
queue = "custom"
job_type = "custom.event"
[webhooks.signature]
scheme = "hmac-sha256"
header = "X-Signature"
prefix = "hmac-sha256="
secret_env = "SEPP_TEST_HMAC_SECRET"
`})
	url := srv.URL + "/hooks/custom"
	good := "hmac-sha256=" + hexHMAC("s3cret", "payload")
	if r := webhookPost(t, "POST", url, "payload", map[string]string{"Idempotency-Key": "k1", "X-Signature": good}); r.status != http.StatusAccepted {
		t.Fatalf("signed: %d %s", r.status, r.raw)
	}
	for _, bad := range []string{"", hexHMAC("s3cret", "payload"), "hmac-sha256=" + hexHMAC("other", "payload")} {
		h := map[string]string{"Idempotency-Key": "k2"}
		if bad != "" {
			h["X-Signature"] = bad
		}
		wantProblem(t, webhookPost(t, "POST", url, "payload", h), http.StatusUnauthorized, "SIGNATURE_INVALID")
	}
	// The signature is checked before the key: an unsigned request without
	// a key is a 401, not a 400.
	wantProblem(t, webhookPost(t, "POST", url, "payload", nil), http.StatusUnauthorized, "SIGNATURE_INVALID")
}
