package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	seppclient "github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

func TestCLIWebhookTest(t *testing.T) {
	t.Setenv("SEPP_TEST_PAYMENTS_SECRET", "whsec_cli")
	t.Setenv("SEPP_TEST_GITHUB_SECRET", "gh_cli")
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: `
[[webhooks]]
path = "/hooks/payments"
queue = "payments"
job_type = "stripe.event"
[webhooks.signature]
scheme = "stripe"
secret_env = "SEPP_TEST_PAYMENTS_SECRET"

[[webhooks]]
path = "/hooks/github"
queue = "github"
job_type = "github.event"
key_header = "X-GitHub-Delivery"
forward_headers = ["X-GitHub-Event"]
[webhooks.signature]
scheme = "github"
secret_env = "SEPP_TEST_GITHUB_SECRET"

[[webhooks]]
path = "/hooks/custom"
queue = "custom"
job_type = "custom.event"
[webhooks.signature]
scheme = "hmac-sha256"
header = "X-Signature"
prefix = "sha256="
secret_env = "SEPP_TEST_GITHUB_SECRET"
`})
	addr := "--addr=" + srv.URL
	bodyFile := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(bodyFile, []byte(`{"id":"evt_9"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stripe := []string{"webhook", "test", addr, "--path", "/hooks/payments", "--key", "evt_9", "--body", "@" + bodyFile,
		"--scheme", "stripe", "--secret-env", "SEPP_TEST_PAYMENTS_SECRET"}
	out, _, err := cli(t, stripe...)
	if err != nil || !strings.Contains(out, "202 Accepted") || !strings.Contains(out, `"deduplicated":false`) || !strings.Contains(out, "Sepp-Job-Id: ") {
		t.Fatalf("first: %v\n%s", err, out)
	}
	out, _, err = cli(t, stripe...)
	if err != nil || !strings.Contains(out, "200 OK") || !strings.Contains(out, `"deduplicated":true`) {
		t.Fatalf("retry: %v\n%s", err, out)
	}

	// Signed with another secret: 401, printed, exit 1.
	stripe[len(stripe)-1] = "SEPP_TEST_GITHUB_SECRET"
	out, _, err = cli(t, stripe...)
	if err != exitCode(1) || !strings.Contains(out, "401 Unauthorized") || !strings.Contains(out, "SIGNATURE_INVALID") || !strings.Contains(out, "application/problem+json") {
		t.Fatalf("wrong secret: %v\n%s", err, out)
	}

	// GitHub, with its key header and a forwarded header.
	out, _, err = cli(t, "webhook", "test", addr, "--path", "/hooks/github", "--key-header", "X-GitHub-Delivery", "--key", "d-1",
		"--body", `{"zen":"Keep it logically awesome."}`, "--scheme", "github", "--secret-env", "SEPP_TEST_GITHUB_SECRET",
		"--send-header", "X-GitHub-Event=ping")
	if err != nil || !strings.Contains(out, "202 Accepted") {
		t.Fatalf("github: %v\n%s", err, out)
	}
	c, err := seppclient.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.LookupIdempotencyKey(ctx, "github", "d-1")
	if err != nil || !l.Found {
		t.Fatalf("lookup: %+v %v", l, err)
	}
	job, err := c.GetJob(ctx, l.JobID)
	if err != nil || job.Headers["x-github-event"] != "ping" || string(job.Payload) != `{"zen":"Keep it logically awesome."}` {
		t.Fatalf("job: %+v %v", job, err)
	}

	// hmac-sha256 with its header and prefix.
	out, _, err = cli(t, "webhook", "test", addr, "--path", "/hooks/custom", "--key", "c-1", "--body", "plain text",
		"--scheme", "hmac-sha256", "--secret-env", "SEPP_TEST_GITHUB_SECRET", "--header", "X-Signature", "--prefix", "sha256=")
	if err != nil || !strings.Contains(out, "202 Accepted") {
		t.Fatalf("hmac-sha256: %v\n%s", err, out)
	}

	// Unsigned: 401 too.
	out, _, err = cli(t, "webhook", "test", addr, "--path", "/hooks/custom", "--key", "c-2", "--body", "x")
	if err != exitCode(1) || !strings.Contains(out, "401") {
		t.Fatalf("unsigned: %v\n%s", err, out)
	}

	// sepp serve --check-config reads the secrets as serve does.
	cfgFile := filepath.Join(t.TempDir(), "sepp.toml")
	if err := os.WriteFile(cfgFile, []byte("[[webhooks]]\npath = \"/hooks/a\"\nqueue = \"q\"\njob_type = \"t\"\n[webhooks.signature]\nscheme = \"github\"\nsecret_env = \"SEPP_TEST_CHECK_SECRET\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SEPP_TEST_CHECK_SECRET", "")
	if _, _, err := cli(t, "serve", "--check-config", "--config", cfgFile); err == nil || !strings.Contains(err.Error(), "webhook /hooks/a: the environment variable SEPP_TEST_CHECK_SECRET") {
		t.Fatalf("--check-config without the secret: %v", err)
	}
	t.Setenv("SEPP_TEST_CHECK_SECRET", "set")
	if out, _, err := cli(t, "serve", "--check-config", "--config", cfgFile); err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("--check-config with the secret: %v %q", err, out)
	}

	// Usage errors.
	if _, stderr, err := cli(t, "webhook", "test", addr); err != exitCode(2) || !strings.Contains(stderr, "--path is required") || !strings.Contains(stderr, "Run 'sepp webhook test --help' for usage.") {
		t.Fatalf("no --path: %v %q", err, stderr)
	}
	if _, _, err := cli(t, "webhook", "test", addr, "--path", "/hooks/custom", "--scheme", "github"); err == nil || !strings.Contains(err.Error(), "--secret-env") {
		t.Fatalf("--scheme without --secret-env: %v", err)
	}
	if _, _, err := cli(t, "webhook", "test", addr, "--path", "/hooks/custom", "--scheme", "hmac-sha256", "--secret-env", "SEPP_TEST_GITHUB_SECRET"); err == nil || !strings.Contains(err.Error(), "--header") {
		t.Fatalf("hmac-sha256 without --header: %v", err)
	}
}
