package config

import (
	"reflect"
	"testing"
)

const webhookFile = `[server]
strict = true
max_payload_bytes = 4096

[[queues]]
name = "github-events"

[[webhooks]]
path = "/hooks/github"
queue = "github-events"
job_type = "github.event"
key_header = "X-GitHub-Delivery"
forward_headers = ["X-GitHub-Event", "X-GitHub-Hook-ID"]

[webhooks.signature]
scheme = "github"
secret_env = "GITHUB_WEBHOOK_SECRET"

[[webhooks]]
path = "/hooks/stripe"
queue = "github-events"
job_type = "stripe.event"
require_key = false
max_body_bytes = 1024
signature = { scheme = "stripe", secret_file = "/etc/sepp/stripe", timestamp_tolerance_ms = 60000 }

[[webhooks]]
path = "/hooks/other"
queue = "github-events"
job_type = "other"
[webhooks.signature]
scheme = "hmac-sha256"
header = "X-Signature"
prefix = "sha256="
secret_env = "OTHER_SECRET"
`

func TestWebhooksParse(t *testing.T) {
	c, err := Parse("sepp.toml", []byte(webhookFile))
	if err != nil {
		t.Fatal(err)
	}
	ws := c.ResolvedWebhooks()
	if len(ws) != 3 {
		t.Fatalf("got %d webhooks", len(ws))
	}
	yes, no := true, false
	want0 := WebhookConfig{Path: "/hooks/github", Queue: "github-events", JobType: "github.event", KeyHeader: "X-GitHub-Delivery",
		RequireKey: &yes, ForwardHeaders: []string{"x-github-event", "x-github-hook-id"}, MaxBodyBytes: 4096,
		Signature: WebhookSignature{Scheme: "github", SecretEnv: "GITHUB_WEBHOOK_SECRET"}}
	if !reflect.DeepEqual(ws[0], want0) {
		t.Errorf("webhooks[0] = %+v\nwant %+v", ws[0], want0)
	}
	want1 := WebhookConfig{Path: "/hooks/stripe", Queue: "github-events", JobType: "stripe.event", KeyHeader: "Idempotency-Key",
		RequireKey: &no, ForwardHeaders: []string{}, MaxBodyBytes: 1024,
		Signature: WebhookSignature{Scheme: "stripe", SecretFile: "/etc/sepp/stripe", ToleranceMs: 60000}}
	if !reflect.DeepEqual(ws[1], want1) {
		t.Errorf("webhooks[1] = %+v\nwant %+v", ws[1], want1)
	}
	if s := ws[2].Signature; s.Header != "X-Signature" || s.Prefix != "sha256=" || s.ToleranceMs != 0 {
		t.Errorf("webhooks[2].signature = %+v", s)
	}
	// The raw entries keep what the file says.
	if c.Webhooks[0].RequireKey != nil || c.Webhooks[1].KeyHeader != "" {
		t.Errorf("raw entries were changed: %+v", c.Webhooks)
	}
}

func TestWebhooksStripeDefaultTolerance(t *testing.T) {
	c, err := Parse("sepp.toml", []byte("[[webhooks]]\npath = \"/s\"\nqueue = \"q\"\njob_type = \"t\"\n[webhooks.signature]\nscheme = \"stripe\"\nsecret_env = \"S\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ResolvedWebhooks()[0].Signature.ToleranceMs; got != DefaultSignatureToleranceMs {
		t.Fatalf("timestamp_tolerance_ms = %d", got)
	}
}

func TestWebhooksBad(t *testing.T) {
	const head = "[[webhooks]]\n"
	ok := "path = \"/h\"\nqueue = \"q\"\njob_type = \"t\"\n"
	tests := []struct {
		name, doc, want string
	}{
		{"missing path", head + "queue = \"q\"\njob_type = \"t\"\n",
			`sepp.toml:1: webhooks[0].path: missing: every [[webhooks]] entry needs path, like path = "/hooks/github"`},
		{"missing queue", head + "path = \"/h\"\njob_type = \"t\"\n",
			`sepp.toml:1: webhooks[0].queue: missing: every [[webhooks]] entry needs queue, like queue = "github-events"`},
		{"missing job_type", head + "path = \"/h\"\nqueue = \"q\"\n",
			`sepp.toml:1: webhooks[0].job_type: missing: every [[webhooks]] entry needs job_type, like job_type = "github.push"`},
		{"path without slash", head + "path = \"hooks\"\nqueue = \"q\"\njob_type = \"t\"\n",
			`sepp.toml:2: webhooks[0].path: must start with "/", like "/hooks/github", got "hooks" (the URL path the webhook is served at, like "/hooks/github"; required)`},
		{"path metrics", head + "path = \"/metrics\"\nqueue = \"q\"\njob_type = \"t\"\n",
			`sepp.toml:2: webhooks[0].path: "/metrics" is taken by /metrics, the Prometheus metrics; choose another path, like "/hooks/..." (the URL path the webhook is served at, like "/hooks/github"; required)`},
		{"path readyz", head + "path = \"/readyz\"\nqueue = \"q\"\njob_type = \"t\"\n",
			`sepp.toml:2: webhooks[0].path: "/readyz" is taken by the liveness and readiness probes (/healthz, /readyz); choose another path, like "/hooks/..." (the URL path the webhook is served at, like "/hooks/github"; required)`},
		{"path rpc", head + "path = \"/sepp.v1.JobService/Enqueue\"\nqueue = \"q\"\njob_type = \"t\"\n",
			`sepp.toml:2: webhooks[0].path: "/sepp.v1.JobService/Enqueue" is taken by the API's RPC paths (/sepp.v1.JobService/... and the other services); choose another path, like "/hooks/..." (the URL path the webhook is served at, like "/hooks/github"; required)`},
		{"path grpc", head + "path = \"/grpc.health.v1.Health/Check\"\nqueue = \"q\"\njob_type = \"t\"\n",
			`sepp.toml:2: webhooks[0].path: "/grpc.health.v1.Health/Check" is taken by the gRPC health and reflection paths (/grpc.health.v1.Health/...); choose another path, like "/hooks/..." (the URL path the webhook is served at, like "/hooks/github"; required)`},
		{"path trailing slash", head + "path = \"/h/\"\nqueue = \"q\"\njob_type = \"t\"\n",
			`sepp.toml:2: webhooks[0].path: "/h/" ends in a slash: write it without, like "/h" (the URL path the webhook is served at, like "/hooks/github"; required)`},
		{"path duplicate", head + ok + head + ok,
			`sepp.toml:6: webhooks[1].path: duplicate path "/h" (first at line 2); each webhook needs its own path`},
		{"strict undeclared", "[server]\nstrict = true\n" + head + ok,
			`sepp.toml:5: webhooks[0].queue: queue "q" is not declared and server.strict = true: add a [[queues]] entry named "q", or fix the queue name`},
		{"job type not accepted", "[[queues]]\nname = \"q\"\njob_types = [\"a\"]\n" + head + ok,
			`sepp.toml:7: webhooks[0].job_type: "t" is not accepted by queue "q", whose job_types are ["a"]: add it there, or pick one of those`},
		{"bad key header", head + ok + "key_header = \"X Key\"\n",
			`sepp.toml:5: webhooks[0].key_header: must be an HTTP header name, like "Idempotency-Key" or "X-GitHub-Delivery", got "X Key" (the request header holding the idempotency key; default "Idempotency-Key")`},
		{"forward twice", head + ok + "forward_headers = [\"A\", \"a\"]\n",
			`sepp.toml:5: webhooks[0].forward_headers: lists "a" twice (header names are case-insensitive); keep one`},
		{"body too big", "[server]\nmax_payload_bytes = 100\n" + head + ok + "max_body_bytes = 101\n",
			`sepp.toml:7: webhooks[0].max_body_bytes: must be at most server.max_payload_bytes (100), got 101: the body is the job's payload; lower it or raise max_payload_bytes`},
		{"body zero", head + ok + "max_body_bytes = 0\n",
			`sepp.toml:5: webhooks[0].max_body_bytes: must be > 0, got 0 (the largest request body accepted, in bytes; default server.max_payload_bytes)`},
		{"inline secret", head + ok + "[webhooks.signature]\nscheme = \"github\"\nsecret = \"hunter2\"\n",
			`sepp.toml:7: webhooks[0].signature.secret: a secret is never written into the config file: put it in an environment variable and name it with secret_env, or in a file and give its path in secret_file`},
		{"no scheme", head + ok + "[webhooks.signature]\nsecret_env = \"S\"\n",
			`sepp.toml:5: webhooks[0].signature.scheme: missing: a [webhooks.signature] table needs a scheme, "github", "stripe" or "hmac-sha256"`},
		{"bad scheme", head + ok + "[webhooks.signature]\nscheme = \"md5\"\nsecret_env = \"S\"\n",
			`sepp.toml:6: webhooks[0].signature.scheme: must be "github", "stripe" or "hmac-sha256", got "md5" (the signature scheme, "github", "stripe" or "hmac-sha256"; required in [webhooks.signature])`},
		{"no secret", head + ok + "[webhooks.signature]\nscheme = \"github\"\n",
			`sepp.toml:5: webhooks[0].signature.secret_env: missing: name where the signing secret is, with secret_env = "GITHUB_WEBHOOK_SECRET" (an environment variable) or secret_file = "/etc/sepp/github-secret" (a file)`},
		{"both secrets", head + ok + "[webhooks.signature]\nscheme = \"github\"\nsecret_env = \"S\"\nsecret_file = \"/f\"\n",
			`sepp.toml:8: webhooks[0].signature.secret_file: cannot be set together with secret_env; keep one`},
		{"hmac without header", head + ok + "[webhooks.signature]\nscheme = \"hmac-sha256\"\nsecret_env = \"S\"\n",
			`sepp.toml:5: webhooks[0].signature.header: missing: scheme = "hmac-sha256" needs the header that holds the signature, like header = "X-Signature"`},
		{"header with github", head + ok + "[webhooks.signature]\nscheme = \"github\"\nsecret_env = \"S\"\nheader = \"X\"\n",
			`sepp.toml:8: webhooks[0].signature.header: is only used with scheme = "hmac-sha256"; scheme "github" has its own header and format`},
		{"tolerance with github", head + ok + "[webhooks.signature]\nscheme = \"github\"\nsecret_env = \"S\"\ntimestamp_tolerance_ms = 5\n",
			`sepp.toml:8: webhooks[0].signature.timestamp_tolerance_ms: is only used with scheme = "stripe", whose signature carries a timestamp`},
		{"tolerance negative", head + ok + "[webhooks.signature]\nscheme = \"stripe\"\nsecret_env = \"S\"\ntimestamp_tolerance_ms = -1\n",
			`sepp.toml:8: webhooks[0].signature.timestamp_tolerance_ms: must be > 0, got -1 (how far a signed timestamp may be from the server's clock, in milliseconds, with scheme = "stripe"; default 300000)`},
		{"unknown key", head + ok + "secret_env = \"S\"\n",
			`sepp.toml:5: webhooks[0].secret_env: unknown key in [[webhooks]] (it belongs in [[auth.tokens]] or [webhooks.signature])`},
		{"type", head + ok + "require_key = \"yes\"\n",
			`sepp.toml:5: webhooks[0].require_key: must be true or false, got the string "yes" (true answers 400 to a request without the key header; default true)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("sepp.toml", []byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.doc)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
