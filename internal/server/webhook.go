package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/config"
)

// Webhook ingest: each [[webhooks]] entry is an http.Handler on the server's
// HTTP mux. A POST's body becomes a job's payload byte for byte, its key
// header the idempotency key, and the request goes through the Enqueue RPC's
// own path (jobService.Enqueue), so the queue's dedup rules apply exactly as
// for any enqueue. Answers follow the IETF draft "The Idempotency-Key HTTP
// Header Field"; errors are application/problem+json (RFC 9457) with a
// "reason" member holding Sepp's reason code. docs/webhooks.md is the user's
// side of this file.

// The reasons only webhooks answer with (the others are errors.go's).
var (
	// ReasonSignatureInvalid: the request's signature is missing, malformed,
	// wrong, or (Stripe) its timestamp is outside the tolerance. Nothing was
	// written.
	ReasonSignatureInvalid = seppv1.Reason_SIGNATURE_INVALID.String()
	// ReasonMethodNotAllowed: a webhook path answers POST only.
	ReasonMethodNotAllowed = seppv1.Reason_METHOD_NOT_ALLOWED.String()
)

// The signature headers of the fixed schemes.
const (
	githubSignatureHeader = "X-Hub-Signature-256"
	githubSignaturePrefix = "sha256="
	stripeSignatureHeader = "Stripe-Signature"
)

// webhookRetryAfter is the Retry-After of a 503: the store is unreachable or
// the server is stopping, and a retry with the same key is safe.
const webhookRetryAfter = "1"

// signatureError says why a signature was refused. Its text goes into the
// 401's detail: it names what is wrong with the request, never the secret
// or the expected digest.
type signatureError struct{ msg string }

func (e *signatureError) Error() string { return e.msg }

func sigErr(format string, args ...any) error {
	return &signatureError{msg: fmt.Sprintf(format, args...)}
}

// webhookHandler serves one [[webhooks]] entry.
type webhookHandler struct {
	s      *Server
	jobs   *jobService
	cfg    config.WebhookConfig // resolved: every default applied
	secret []byte               // nil when no signature is checked
}

// mountWebhooks reads each webhook's secret and mounts its handler on mux.
// A secret that cannot be read is an error naming the webhook's path and
// what to set, so the server does not start.
func (s *Server) mountWebhooks(mux *http.ServeMux, jobs *jobService) (err error) {
	for _, wc := range s.cfg.ResolvedWebhooks() {
		h := &webhookHandler{s: s, jobs: jobs, cfg: wc}
		if wc.Signature.Enabled() {
			if h.secret, err = readWebhookSecret(wc); err != nil {
				return err
			}
		} else {
			s.log.Warn("webhook has no [webhooks.signature]: anyone who can reach it can enqueue jobs", "path", wc.Path, "queue", wc.Queue)
		}
		if err := mountHandler(mux, wc.Path, h); err != nil {
			return err
		}
		s.metrics.webhookRequests.WithLabelValues(wc.Path, "202") // the series exists before the first request
	}
	return nil
}

// CheckWebhookSecrets reads the secret of every webhook of cfg as the server
// does at start, for sepp serve --check-config; the error is the one the
// server would stop with.
func CheckWebhookSecrets(cfg *config.Config) error {
	for _, wc := range cfg.ResolvedWebhooks() {
		if wc.Signature.Enabled() {
			if _, err := readWebhookSecret(wc); err != nil {
				return err
			}
		}
	}
	return nil
}

// mountHandler is mux.Handle, with a conflicting pattern (a config built in
// code and not validated) returned as an error instead of a panic.
func mountHandler(mux *http.ServeMux, path string, h http.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("webhook %s: cannot be served: %v; choose another path", path, r)
		}
	}()
	mux.Handle(path, h)
	return nil
}

// readWebhookSecret reads the signing secret of wc from its environment
// variable or file.
func readWebhookSecret(wc config.WebhookConfig) ([]byte, error) {
	sig := wc.Signature
	if sig.SecretEnv != "" {
		v := os.Getenv(sig.SecretEnv)
		if v == "" {
			return nil, fmt.Errorf("webhook %s: the environment variable %s, which secret_env names, is not set or empty: set it to the %s signing secret, or point secret_file at a file holding it", wc.Path, sig.SecretEnv, sig.Scheme)
		}
		return []byte(v), nil
	}
	if sig.SecretFile != "" {
		b, err := os.ReadFile(sig.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("webhook %s: cannot read secret_file %s: %v; make the file readable by sepp, or name an environment variable with secret_env", wc.Path, sig.SecretFile, errText(err))
		}
		b = trimNewline(b)
		if len(b) == 0 {
			return nil, fmt.Errorf("webhook %s: secret_file %s is empty: write the %s signing secret into it", wc.Path, sig.SecretFile, sig.Scheme)
		}
		return b, nil
	}
	return nil, fmt.Errorf("webhook %s: [webhooks.signature] names no secret: set secret_env or secret_file", wc.Path)
}

// trimNewline drops one trailing "\n" or "\r\n", as an editor or echo
// leaves it.
func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// webhookAck is the body of a 202 or a 200.
type webhookAck struct {
	JobID        string `json:"jobId"`
	Deduplicated bool   `json:"deduplicated"`
}

// problem is an RFC 9457 problem details object, with Sepp's reason code.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Reason string `json:"reason"`
	// JobID names the job a conflicting key belongs to, when there is one.
	JobID string `json:"jobId,omitempty"`
}

func (h *webhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status := http.StatusInternalServerError
	defer func() {
		// As the RPC interceptors do: one bad request cannot take the node
		// down, and the panic is logged with its stack.
		if p := recover(); p != nil {
			h.s.log.Error("handler panicked", "method", "webhook "+h.cfg.Path, "panic", p, "stack", string(debug.Stack()))
			h.problemJob(w, status, ReasonInternal, "", fmt.Sprintf("internal error: the handler panicked (%v); this is a bug, please report it", p))
		}
		h.s.metrics.webhookRequests.WithLabelValues(h.cfg.Path, strconv.Itoa(status)).Inc()
	}()
	status = h.serve(w, r)
}

// serve answers r and returns the status it wrote.
func (h *webhookHandler) serve(w http.ResponseWriter, r *http.Request) int {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return h.problemJob(w, http.StatusMethodNotAllowed, ReasonMethodNotAllowed, "",
			fmt.Sprintf("%s answers POST only, got %s", h.cfg.Path, r.Method))
	}
	limit := h.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return h.tooLarge(w, r.ContentLength)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return h.tooLarge(w, -1)
		}
		return h.problemJob(w, http.StatusBadRequest, ReasonInvalidField, "", "the request body could not be read: "+err.Error())
	}
	if h.secret != nil {
		if err := verifySignature(h.cfg.Signature, r.Header, body, h.secret, h.s.now()); err != nil {
			h.s.log.Info("webhook signature refused", "path", h.cfg.Path, "remote", r.RemoteAddr, "why", err.Error())
			return h.problemJob(w, http.StatusUnauthorized, ReasonSignatureInvalid, "", err.Error()+"; nothing was enqueued")
		}
	}
	key, present, err := parseKeyHeader(r.Header.Values(h.cfg.KeyHeader))
	if err != nil {
		return h.problemJob(w, http.StatusBadRequest, ReasonInvalidField, "", h.cfg.KeyHeader+": "+err.Error())
	}
	if !present && h.cfg.KeyRequired() {
		return h.problemJob(w, http.StatusBadRequest, ReasonIdempotencyKeyRequired, "",
			fmt.Sprintf("the request has no %s header; this webhook requires one (require_key = true): send the delivery's unique id in it", h.cfg.KeyHeader))
	}
	req := &seppv1.EnqueueRequest{
		Queue:   h.cfg.Queue,
		JobType: h.cfg.JobType,
		Payload: body,
		Headers: forwardHeaders(r.Header, h.cfg.ForwardHeaders),
	}
	if present {
		req.IdempotencyKey = &key
	}
	ack, err := h.jobs.Enqueue(r.Context(), req)
	if err != nil {
		return h.enqueueError(w, toAPIError(err))
	}
	w.Header().Set("Sepp-Job-Id", ack.GetJobId())
	switch {
	case ack.GetPayloadMismatch():
		what := fmt.Sprintf("the key %q", key)
		if !present {
			what = "the key the queue derived from this body"
		}
		return h.problemJob(w, http.StatusUnprocessableEntity, ReasonIdempotencyKeyConflict, ack.GetJobId(),
			fmt.Sprintf("%s was already used on queue %q with another body, by job %s; the job was not changed: send a new key for a new delivery, or resend the original body", what, h.cfg.Queue, ack.GetJobId()))
	case ack.GetDeduplicated():
		return writeJSON(w, http.StatusOK, "application/json", webhookAck{JobID: ack.GetJobId(), Deduplicated: true})
	}
	return writeJSON(w, http.StatusAccepted, "application/json", webhookAck{JobID: ack.GetJobId()})
}

func (h *webhookHandler) tooLarge(w http.ResponseWriter, n int64) int {
	what := "the request body is larger"
	if n >= 0 {
		what = fmt.Sprintf("the request body is %d bytes, larger", n)
	}
	return h.problemJob(w, http.StatusRequestEntityTooLarge, ReasonPayloadTooLarge, "",
		fmt.Sprintf("%s than the limit of %d bytes (max_body_bytes of webhook %s); raise max_body_bytes (up to server.max_payload_bytes) or send less", what, h.cfg.MaxBodyBytes, h.cfg.Path))
}

// enqueueError answers an error of the enqueue itself.
func (h *webhookHandler) enqueueError(w http.ResponseWriter, e *apiError) int {
	status := webhookStatus(e)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", webhookRetryAfter)
	}
	jobID := e.metadata["job_id"]
	if jobID != "" {
		w.Header().Set("Sepp-Job-Id", jobID)
	}
	return h.problemJob(w, status, e.reason, jobID, e.msg)
}

// webhookStatus is the HTTP status of an enqueue error: by its reason where
// the Idempotency-Key draft or HTTP has a better answer than the Connect
// code's, else by the Connect code as Connect maps it.
func webhookStatus(e *apiError) int {
	switch e.reason {
	case ReasonIdempotencyKeyConflict:
		return http.StatusUnprocessableEntity // the draft's answer to a key reused with another body
	case ReasonPayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case ReasonUnavailable:
		return http.StatusServiceUnavailable // a webhook sender retries a 503; a cut-off request is safe to resend
	case ReasonDedupRuleViolated, ReasonDuplicateJob:
		return http.StatusConflict // the same request again, under another key: the job it names stands
	}
	switch e.code {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAlreadyExists, connect.CodeAborted:
		return http.StatusConflict
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeCanceled:
		return http.StatusServiceUnavailable
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

var problemTitles = map[string]string{
	ReasonSignatureInvalid:       "Signature missing or invalid",
	ReasonMethodNotAllowed:       "Method not allowed",
	ReasonIdempotencyKeyRequired: "Idempotency key required",
	ReasonIdempotencyKeyConflict: "Idempotency key reused with another body",
	ReasonDedupRuleViolated:      "A uniqueness rule matched an earlier job",
	ReasonDuplicateJob:           "Duplicate job",
	ReasonPayloadTooLarge:        "Request body too large",
	ReasonUnavailable:            "Store unavailable",
	ReasonInternal:               "Internal error",
}

func (h *webhookHandler) problemJob(w http.ResponseWriter, status int, reason, jobID, detail string) int {
	title := problemTitles[reason]
	if title == "" {
		title = http.StatusText(status)
	}
	return writeJSON(w, status, "application/problem+json", problem{
		Type: problemType(reason), Title: title, Status: status, Detail: detail, Reason: reason, JobID: jobID,
	})
}

// problemType is the problem's type URI: a tag URI (RFC 4151) per reason,
// stable and not meant to be fetched; docs/errors.md and docs/webhooks.md
// describe each reason.
func problemType(reason string) string { return "tag:sepp.dev,2026:" + reason }

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) int {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen with the types above
		status, b = http.StatusInternalServerError, []byte(`{"status":500}`)
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return status
}

// forwardHeaders copies the named headers (lower-cased names) of h into a
// job's headers; several values are joined with ", ". nil when none is
// present.
func forwardHeaders(h http.Header, names []string) map[string]string {
	var out map[string]string
	for _, name := range names {
		vals := h.Values(name)
		if len(vals) == 0 {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(names))
		}
		out[strings.ToLower(name)] = strings.Join(vals, ", ")
	}
	return out
}

// parseKeyHeader reads the idempotency key from the values of the key
// header. present is false when there is none (or only empty ones). A value
// written as a Structured Fields string (RFC 8941), as the Idempotency-Key
// draft defines it ("8e03978e-..." in double quotes), is unquoted; any
// other value is the key as sent, without surrounding spaces. Several
// non-empty values are an error: the sender's id is ambiguous.
func parseKeyHeader(values []string) (key string, present bool, err error) {
	for _, v := range values {
		v = strings.Trim(v, " \t")
		if v == "" {
			continue
		}
		if present {
			return "", false, errors.New("sent more than once: send one key per request")
		}
		if strings.HasPrefix(v, `"`) {
			if v, err = parseSFString(v); err != nil {
				return "", false, err
			}
		}
		key, present = v, true
	}
	return key, present, nil
}

// parseSFString parses a Structured Fields string (RFC 8941, 3.3.3):
// printable ASCII in double quotes, with \" and \\ the only escapes.
func parseSFString(v string) (string, error) {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return "", errors.New(`starts with a double quote but does not end with one: send the key bare, or as a quoted string like "8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	}
	in := v[1 : len(v)-1]
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '\\':
			if i+1 == len(in) || (in[i+1] != '"' && in[i+1] != '\\') {
				return "", errors.New(`has a backslash that escapes neither " nor \ in its quoted string`)
			}
			i++
			b.WriteByte(in[i])
		case c == '"':
			return "", errors.New(`has an unescaped double quote inside its quoted string`)
		case c < 0x20 || c > 0x7e:
			return "", errors.New("has a character outside printable ASCII in its quoted string")
		default:
			b.WriteByte(c)
		}
	}
	if b.Len() == 0 {
		return "", errors.New(`is an empty quoted string ""`)
	}
	return b.String(), nil
}

// verifySignature checks the signature of body under sig's scheme against
// secret, at the time now (Stripe's timestamp). It compares digests with
// hmac.Equal, in constant time.
func verifySignature(sig config.WebhookSignature, h http.Header, body, secret []byte, now time.Time) error {
	switch sig.Scheme {
	case config.SignatureGitHub:
		v, err := oneHeader(h, githubSignatureHeader)
		if err != nil {
			return err
		}
		got, err := parsePrefixedHex(v, githubSignaturePrefix)
		if err != nil {
			return sigErr("%s %v", githubSignatureHeader, err)
		}
		if !hmac.Equal(got, hmacSHA256(secret, body)) {
			return sigErr("%s does not match the body: the secret differs from the sender's, or the body was changed on the way", githubSignatureHeader)
		}
		return nil
	case config.SignatureStripe:
		v, err := oneHeader(h, stripeSignatureHeader)
		if err != nil {
			return err
		}
		ts, sigs, err := parseStripeSignature(v)
		if err != nil {
			return sigErr("%s %v", stripeSignatureHeader, err)
		}
		tol := time.Duration(sig.ToleranceMs) * time.Millisecond
		if tol <= 0 {
			tol = config.DefaultSignatureToleranceMs * time.Millisecond
		}
		signedAt := time.Unix(ts, 0)
		if d := now.Sub(signedAt); d > tol || d < -tol {
			return sigErr("%s was made at %s, %s from the server's clock, more than the tolerance of %s (timestamp_tolerance_ms): a replayed request, or a clock that is off", stripeSignatureHeader, signedAt.UTC().Format(time.RFC3339), d.Round(time.Second), tol)
		}
		want := hmacSHA256(secret, stripeSignedPayload(ts, body))
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				return nil
			}
		}
		return sigErr("no v1 signature in %s matches the body: the secret differs from the endpoint's signing secret, or the body was changed on the way", stripeSignatureHeader)
	case config.SignatureHMACSHA256:
		v, err := oneHeader(h, sig.Header)
		if err != nil {
			return err
		}
		got, err := parsePrefixedHex(v, sig.Prefix)
		if err != nil {
			return sigErr("%s %v", sig.Header, err)
		}
		if !hmac.Equal(got, hmacSHA256(secret, body)) {
			return sigErr("%s does not match the body: the secret differs from the sender's, or the body was changed on the way", sig.Header)
		}
		return nil
	}
	return sigErr("unknown signature scheme %q", sig.Scheme)
}

// oneHeader returns the single value of header name.
func oneHeader(h http.Header, name string) (string, error) {
	vals := h.Values(name)
	switch {
	case len(vals) == 0 || (len(vals) == 1 && strings.TrimSpace(vals[0]) == ""):
		return "", sigErr("the request has no %s header", name)
	case len(vals) > 1:
		return "", sigErr("the request has %d %s headers; a signed request has one", len(vals), name)
	}
	return strings.Trim(vals[0], " \t"), nil
}

func hmacSHA256(secret, msg []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return m.Sum(nil)
}

// stripeSignedPayload is what Stripe signs: "<t>.<body>".
func stripeSignedPayload(ts int64, body []byte) []byte {
	p := strconv.AppendInt(nil, ts, 10)
	p = append(p, '.')
	return append(p, body...)
}

// parsePrefixedHex parses prefix followed by a hex SHA-256 digest (either
// case).
func parsePrefixedHex(v, prefix string) ([]byte, error) {
	rest, ok := strings.CutPrefix(v, prefix)
	if !ok {
		return nil, fmt.Errorf("must start with %q", prefix)
	}
	return parseDigest(rest)
}

// parseDigest parses a hex SHA-256 digest: 64 hex digits.
func parseDigest(s string) ([]byte, error) {
	if len(s) != 2*sha256.Size {
		return nil, fmt.Errorf("must hold a hex SHA-256 digest of %d digits, got %d characters", 2*sha256.Size, len(s))
	}
	d, err := hex.DecodeString(s)
	if err != nil {
		return nil, errors.New("must hold a hex SHA-256 digest, got characters that are not hex digits")
	}
	return d, nil
}

// maxStripeSignatures bounds the v1 entries one Stripe-Signature header may
// carry (Stripe sends one per active secret, two while a secret rolls).
const maxStripeSignatures = 8

// parseStripeSignature parses "t=<unix seconds>,v1=<hex>[,v1=<hex>...]";
// other schemes (v0) are ignored, as Stripe's libraries do.
func parseStripeSignature(v string) (ts int64, sigs [][]byte, err error) {
	haveT := false
	for _, item := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.Trim(item, " \t"), "=")
		if !ok {
			return 0, nil, fmt.Errorf("has an entry %q that is not key=value: the format is t=<unix seconds>,v1=<hex>", shortText(item))
		}
		switch k {
		case "t":
			if haveT {
				return 0, nil, errors.New("has t= twice")
			}
			n, perr := strconv.ParseInt(val, 10, 64)
			if perr != nil || n <= 0 || val[0] == '+' {
				return 0, nil, fmt.Errorf("has t=%q, not a Unix time in seconds", shortText(val))
			}
			ts, haveT = n, true
		case "v1":
			if len(sigs) == maxStripeSignatures {
				return 0, nil, fmt.Errorf("has more than %d v1 signatures", maxStripeSignatures)
			}
			d, derr := parseDigest(val)
			if derr != nil {
				return 0, nil, fmt.Errorf("v1 %v", derr)
			}
			sigs = append(sigs, d)
		}
	}
	switch {
	case !haveT:
		return 0, nil, errors.New("has no timestamp t=")
	case len(sigs) == 0:
		return 0, nil, errors.New("has no v1= signature")
	}
	return ts, sigs, nil
}

// shortText cuts s for a message.
func shortText(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
