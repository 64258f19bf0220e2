package config

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Webhook defaults.
const (
	// DefaultWebhookKeyHeader is the header a webhook reads its idempotency
	// key from when key_header is not set (the IETF draft "The
	// Idempotency-Key HTTP Header Field").
	DefaultWebhookKeyHeader = "Idempotency-Key"
	// DefaultSignatureToleranceMs is how far a Stripe signature's timestamp
	// may be from the server's clock: 5 minutes, as Stripe's libraries use.
	DefaultSignatureToleranceMs = 5 * 60 * 1000
)

// The signature schemes of [webhooks.signature].
const (
	// SignatureGitHub: header X-Hub-Signature-256, "sha256=" and the hex
	// HMAC-SHA256 of the body.
	SignatureGitHub = "github"
	// SignatureStripe: header Stripe-Signature, "t=<unix seconds>,v1=<hex>"
	// with the HMAC-SHA256 of "<t>.<body>".
	SignatureStripe = "stripe"
	// SignatureHMACSHA256: a configured header holding a configured prefix
	// and the hex HMAC-SHA256 of the body.
	SignatureHMACSHA256 = "hmac-sha256"
)

// WebhookConfig is one [[webhooks]] entry: an HTTP path on the API port
// whose POSTs enqueue jobs. In Config.Webhooks a zero field means "not set";
// Config.ResolvedWebhooks returns the entries with every default applied.
type WebhookConfig struct {
	// Path is the URL path, like "/hooks/github". Required.
	Path string `toml:"path"`
	// Queue is the queue the jobs are enqueued to. Required.
	Queue string `toml:"queue"`
	// JobType is the job type of the jobs. Required.
	JobType string `toml:"job_type"`
	// KeyHeader is the request header that holds the idempotency key.
	// Default (""): "Idempotency-Key".
	KeyHeader string `toml:"key_header"`
	// RequireKey, when true, answers 400 to a request without the key
	// header; when false such a request enqueues a job without a key.
	// Default (nil): true.
	RequireKey *bool `toml:"require_key"`
	// ForwardHeaders names the request headers copied into the job's
	// headers, under their lower-cased names. Default: none. Do not modify
	// the slice of a loaded config.
	ForwardHeaders []string `toml:"forward_headers"`
	// MaxBodyBytes is the largest request body accepted (413 above it).
	// Default (0): server.max_payload_bytes, which it must not exceed.
	MaxBodyBytes int64 `toml:"max_body_bytes"`
	// Signature says how requests are signed. A zero Signature (no
	// [webhooks.signature] table) checks no signature.
	Signature WebhookSignature `toml:"signature"`
}

// WebhookSignature is a [webhooks.signature] table.
type WebhookSignature struct {
	// Scheme is SignatureGitHub, SignatureStripe or SignatureHMACSHA256.
	// Required in the table.
	Scheme string `toml:"scheme"`
	// SecretEnv names the environment variable that holds the signing
	// secret. Exactly one of SecretEnv and SecretFile is required.
	SecretEnv string `toml:"secret_env"`
	// SecretFile is the path of a file that holds the signing secret (one
	// trailing newline is ignored).
	SecretFile string `toml:"secret_file"`
	// Secret is never accepted: it exists so that a secret written into the
	// file is refused with a message saying where to put it instead.
	Secret string `toml:"secret"`
	// Header is the request header holding the signature, for
	// SignatureHMACSHA256 only (required there).
	Header string `toml:"header"`
	// Prefix is the text before the hex digest in Header, like "sha256=",
	// for SignatureHMACSHA256 only. Default "".
	Prefix string `toml:"prefix"`
	// ToleranceMs is how far the signed timestamp may be from the server's
	// clock, in milliseconds, for SignatureStripe only.
	// Default (0): 300000 (5 minutes).
	ToleranceMs int64 `toml:"timestamp_tolerance_ms"`
}

// Enabled reports whether a signature is checked.
func (s WebhookSignature) Enabled() bool { return s.Scheme != "" }

// KeyRequired is RequireKey with its default (true).
func (w WebhookConfig) KeyRequired() bool { return w.RequireKey == nil || *w.RequireKey }

// ResolvedWebhooks returns the [[webhooks]] entries with every unset field at
// its default: KeyHeader, RequireKey, MaxBodyBytes, Signature.ToleranceMs (for
// SignatureStripe), and ForwardHeaders lower-cased.
func (c *Config) ResolvedWebhooks() []WebhookConfig {
	out := make([]WebhookConfig, len(c.Webhooks))
	for i, w := range c.Webhooks {
		if w.KeyHeader == "" {
			w.KeyHeader = DefaultWebhookKeyHeader
		}
		req := w.KeyRequired()
		w.RequireKey = &req
		if w.MaxBodyBytes == 0 {
			w.MaxBodyBytes = c.Server.MaxPayloadBytes
		}
		if w.Signature.Scheme == SignatureStripe && w.Signature.ToleranceMs == 0 {
			w.Signature.ToleranceMs = DefaultSignatureToleranceMs
		}
		fwd := make([]string, len(w.ForwardHeaders))
		for j, h := range w.ForwardHeaders {
			fwd[j] = strings.ToLower(h)
		}
		w.ForwardHeaders = fwd
		out[i] = w
	}
	return out
}

// reservedWebhookPath returns why p cannot be a webhook path because the
// server serves it itself, or "".
func reservedWebhookPath(p string) string {
	switch {
	case p == "/metrics" || strings.HasPrefix(p, "/metrics/"):
		return "/metrics, the Prometheus metrics"
	case p == "/healthz" || p == "/readyz":
		return "the liveness and readiness probes (/healthz, /readyz)"
	case strings.HasPrefix(p, "/sepp."):
		return "the API's RPC paths (/sepp.v1.JobService/... and the other services)"
	case strings.HasPrefix(p, "/grpc."):
		return "the gRPC health and reflection paths (/grpc.health.v1.Health/...)"
	}
	return ""
}

// checkWebhookPath returns what is wrong with a webhook path, or "".
func checkWebhookPath(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Sprintf(`must start with "/", like "/hooks/github", got %q`, p)
	case !utf8.ValidString(p):
		return "is not valid UTF-8"
	case strings.ContainsFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Sprintf("%q contains a space or a control character", p)
	case strings.ContainsAny(p, "?#{}%"):
		return fmt.Sprintf(`%q contains one of ? # { } %%: write the plain path, like "/hooks/github"`, p)
	case p == "/":
		return `must not be "/", which would take every path of the server; use a path like "/hooks/github"`
	case strings.HasSuffix(p, "/"):
		return fmt.Sprintf("%q ends in a slash: write it without, like %q", p, strings.TrimRight(p, "/"))
	case path.Clean(p) != p:
		return fmt.Sprintf("%q is not a clean path (an empty, . or .. segment); write it as %q", p, path.Clean(p))
	}
	if r := reservedWebhookPath(p); r != "" {
		return fmt.Sprintf("%q is taken by %s; choose another path, like \"/hooks/...\"", p, r)
	}
	return ""
}

// validHeaderName reports whether h is an HTTP field name (RFC 9110 token).
func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validateWebhooks checks the [[webhooks]] entries into v.
func (c *Config) validateWebhooks(v *validator) {
	firstPath := make(map[string]int, len(c.Webhooks))
	for i, w := range c.Webhooks {
		p := fmt.Sprintf("webhooks[%d]", i)
		required := func(key, val, example string) bool {
			if val == "" && !v.has(p+"."+key) {
				v.fail(p+"."+key, "missing: every [[webhooks]] entry needs "+key+", like "+key+" = "+example)
				return false
			}
			return true
		}

		if required("path", w.Path, `"/hooks/github"`) {
			if msg := checkWebhookPath(w.Path); msg != "" {
				v.bad(p+".path", msg)
			} else if j, dup := firstPath[w.Path]; dup {
				first := fmt.Sprintf("webhooks[%d]", j)
				if l := v.line(first + ".path"); l > 0 {
					first = "line " + strconv.Itoa(l)
				}
				v.fail(p+".path", fmt.Sprintf("duplicate path %q (first at %s); each webhook needs its own path", w.Path, first))
			} else {
				firstPath[w.Path] = i
			}
		}

		queueOK := false
		if required("queue", w.Queue, `"github-events"`) {
			switch err := CheckQueueName(w.Queue); {
			case err != nil:
				v.bad(p+".queue", err.Error())
			case c.Server.Strict && !c.declaredIn(w.Queue):
				v.fail(p+".queue", fmt.Sprintf("queue %q is not declared and server.strict = true: add a [[queues]] entry named %q, or fix the queue name", w.Queue, w.Queue))
			default:
				queueOK = true
			}
		}
		if required("job_type", w.JobType, `"github.push"`) {
			switch {
			case len(w.JobType) > 255:
				v.bad(p+".job_type", fmt.Sprintf("is %d bytes; the limit is 255", len(w.JobType)))
			case !utf8.ValidString(w.JobType):
				v.bad(p+".job_type", "is not valid UTF-8")
			case strings.TrimSpace(w.JobType) == "":
				v.bad(p+".job_type", "must not be blank")
			case queueOK && c.declaredIn(w.Queue):
				for _, q := range c.Queues {
					if q.Name == w.Queue && len(q.JobTypes) > 0 && !q.AcceptsJobType(w.JobType) {
						v.fail(p+".job_type", fmt.Sprintf("%q is not accepted by queue %q, whose job_types are %q: add it there, or pick one of those", w.JobType, w.Queue, q.JobTypes))
						break
					}
				}
			}
		}

		if w.KeyHeader != "" || v.has(p+".key_header") {
			if !validHeaderName(w.KeyHeader) {
				v.bad(p+".key_header", fmt.Sprintf("must be an HTTP header name, like %q or \"X-GitHub-Delivery\", got %q", DefaultWebhookKeyHeader, w.KeyHeader))
			}
		}
		seen := map[string]bool{}
		for j, h := range w.ForwardHeaders {
			if !validHeaderName(h) {
				v.bad(p+".forward_headers", fmt.Sprintf("entry %d must be an HTTP header name, like \"X-GitHub-Event\", got %q", j, h))
				break
			}
			if l := strings.ToLower(h); seen[l] {
				v.fail(p+".forward_headers", fmt.Sprintf("lists %q twice (header names are case-insensitive); keep one", h))
				break
			} else {
				seen[l] = true
			}
		}
		if w.MaxBodyBytes != 0 || v.has(p+".max_body_bytes") {
			switch max := c.Server.MaxPayloadBytes; {
			case w.MaxBodyBytes <= 0:
				v.bad(p+".max_body_bytes", fmt.Sprintf("must be > 0, got %d", w.MaxBodyBytes))
			case max > 0 && w.MaxBodyBytes > max:
				v.fail(p+".max_body_bytes", fmt.Sprintf("must be at most server.max_payload_bytes (%d), got %d: the body is the job's payload; lower it or raise max_payload_bytes", max, w.MaxBodyBytes))
			}
		}
		c.validateSignature(v, p+".signature", w.Signature)
	}
}

// declaredIn is Declared without the index, which validate runs before.
func (c *Config) declaredIn(name string) bool {
	for _, q := range c.Queues {
		if q.Name == name {
			return true
		}
	}
	return false
}

func (c *Config) validateSignature(v *validator, p string, s WebhookSignature) {
	if s.Secret != "" || v.has(p+".secret") {
		v.fail(p+".secret", "a secret is never written into the config file: put it in an environment variable and name it with secret_env, or in a file and give its path in secret_file")
		return
	}
	set := v.has(p) || s != (WebhookSignature{})
	if !set {
		return
	}
	switch s.Scheme {
	case SignatureGitHub, SignatureStripe, SignatureHMACSHA256:
	case "":
		if !v.has(p + ".scheme") {
			v.fail(p+".scheme", fmt.Sprintf("missing: a [webhooks.signature] table needs a scheme, %q, %q or %q", SignatureGitHub, SignatureStripe, SignatureHMACSHA256))
			return
		}
		fallthrough
	default:
		v.bad(p+".scheme", fmt.Sprintf("must be %q, %q or %q, got %q", SignatureGitHub, SignatureStripe, SignatureHMACSHA256, s.Scheme))
		return
	}
	v.envOrFile(p, "secret", s.SecretEnv, s.SecretFile, "the signing secret", "GITHUB_WEBHOOK_SECRET", "/etc/sepp/github-secret")
	if s.Scheme == SignatureHMACSHA256 {
		switch {
		case s.Header == "" && !v.has(p+".header"):
			v.fail(p+".header", `missing: scheme = "hmac-sha256" needs the header that holds the signature, like header = "X-Signature"`)
		case !validHeaderName(s.Header):
			v.bad(p+".header", fmt.Sprintf("must be an HTTP header name, like \"X-Signature\", got %q", s.Header))
		}
	} else {
		for _, k := range []string{"header", "prefix"} {
			if v.has(p + "." + k) {
				v.fail(p+"."+k, fmt.Sprintf("is only used with scheme = %q; scheme %q has its own header and format", SignatureHMACSHA256, s.Scheme))
			}
		}
	}
	if s.Scheme == SignatureStripe {
		if s.ToleranceMs != 0 || v.has(p+".timestamp_tolerance_ms") {
			v.millis(p+".timestamp_tolerance_ms", s.ToleranceMs)
		}
	} else if v.has(p+".timestamp_tolerance_ms") || s.ToleranceMs != 0 {
		v.fail(p+".timestamp_tolerance_ms", fmt.Sprintf("is only used with scheme = %q, whose signature carries a timestamp", SignatureStripe))
	}
}

// envOrFile checks a pair of keys NAME_env and NAME_file under p, of which
// exactly one must name where a secret is: an environment variable or a
// file.
func (v *validator) envOrFile(p, name, env, file, what, exampleEnv, exampleFile string) {
	envKey, fileKey := p+"."+name+"_env", p+"."+name+"_file"
	hasEnv := env != "" || v.has(envKey)
	hasFile := file != "" || v.has(fileKey)
	switch {
	case hasEnv && hasFile:
		v.fail(fileKey, "cannot be set together with "+name+"_env; keep one")
	case !hasEnv && !hasFile:
		v.fail(envKey, fmt.Sprintf(`missing: name where %s is, with %s_env = %q (an environment variable) or %s_file = %q (a file)`, what, name, exampleEnv, name, exampleFile))
	case hasEnv && (env == "" || strings.ContainsAny(env, "= \t\x00")):
		v.bad(envKey, fmt.Sprintf("must be an environment variable name, like %q, got %q", exampleEnv, env))
	case hasFile && strings.TrimSpace(file) == "":
		v.bad(fileKey, "must not be empty")
	}
}
