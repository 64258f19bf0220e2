// Package idempotency makes the handlers of an app's own HTTP API safe to
// retry, following the IETF draft "The Idempotency-Key HTTP Header Field":
// a request that carries an Idempotency-Key runs its handler once, across
// any number of app instances, and its repeats get the stored response.
//
//	mux.Handle("POST /orders", idempotency.Middleware(client, idempotency.Options{
//		Scope: "api.orders", Required: true,
//	})(createOrder))
//
// The keys are Sepp effect keys (scope Options.Scope): the first request
// with a key claims it, runs the handler and stores its response (status,
// the headers Options.ReplayHeaders names, the body) as the effect's
// result for Options.TTL. Then:
//
//   - a repeat with the same method, route and body gets the stored
//     response, with the header Idempotent-Replayed: true, and the handler
//     does not run;
//   - a repeat while the first still runs gets 409 Conflict;
//   - the same key with another method, route or body gets 422;
//   - a request without the header on a route that requires one gets 400;
//   - a handler that answers 5xx or panics releases the key, so a retry
//     runs it again; 2xx, 3xx and 4xx answers are stored.
//
// Errors are application/problem+json (RFC 9457) with a reason member. It
// fails closed: when Sepp cannot be reached the handler does not run and
// the client gets 503 with Retry-After.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/sepp-dev/sepp"
)

// Options configure Middleware. Scope is required.
type Options struct {
	// Scope is the effect scope the keys live under, like "api.orders":
	// keys are unique per scope. Required.
	Scope string
	// Required refuses a request without the header with 400.
	Required bool
	// TTL is how long a stored response is replayed. Zero: 24 h.
	TTL time.Duration
	// Header names the request header. Zero: "Idempotency-Key".
	Header string
	// Methods are the methods the middleware applies to; others pass
	// through. Zero: POST and PATCH.
	Methods []string
	// MaxBodyBytes bounds the request body (read to fingerprint it; a
	// larger one gets 413) and the stored response body (a larger response
	// is sent, not stored, and its key released). Zero: 1 MiB.
	MaxBodyBytes int64
	// ReplayHeaders are the response headers stored and replayed. Zero:
	// Content-Type and Location.
	ReplayHeaders []string
	// Lease is how long a claim holds while the handler runs; it is
	// extended every third of it until the handler returns. Zero: 30 s.
	Lease time.Duration
	// Route names the request's route in its fingerprint. Zero: the URL's
	// path.
	Route func(*http.Request) string
	// Timeout bounds the handler: its request's context ends after it. A
	// handler that then returns without an answer, or with a 5xx, has its
	// key released, and the client gets 504 (or the 5xx) and may retry; one
	// that answers 2xx, 3xx or 4xx anyway did its work, and that answer is
	// stored. Zero: no bound but the client's own.
	Timeout time.Duration
}

// ReplayedHeader marks a replayed response.
const ReplayedHeader = "Idempotent-Replayed"

func (o *Options) defaults() {
	if o.TTL == 0 {
		o.TTL = 24 * time.Hour
	}
	if o.Header == "" {
		o.Header = "Idempotency-Key"
	}
	if len(o.Methods) == 0 {
		o.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.ReplayHeaders == nil {
		o.ReplayHeaders = []string{"Content-Type", "Location"}
	}
	if o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	if o.Route == nil {
		o.Route = func(r *http.Request) string { return r.URL.Path }
	}
}

// stored is the result kept under a key: the request's fingerprint and the
// response.
type stored struct {
	Fingerprint string              `json:"fingerprint"`
	Status      int                 `json:"status"`
	Header      map[string][]string `json:"header,omitempty"`
	Body        []byte              `json:"body,omitempty"`
}

// Middleware returns the middleware that guards handlers with c's effect
// keys under opts. It panics when opts.Scope is empty.
func Middleware(c *sepp.Client, opts Options) func(http.Handler) http.Handler {
	if opts.Scope == "" {
		panic("idempotency: Options.Scope is required")
	}
	opts.defaults()
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			serve(c, &opts, next, w, r)
		})
	}
}

func serve(c *sepp.Client, o *Options, next http.Handler, w http.ResponseWriter, r *http.Request) {
	if !slices.Contains(o.Methods, r.Method) {
		next.ServeHTTP(w, r)
		return
	}
	key := r.Header.Get(o.Header)
	switch {
	case key == "" && !o.Required:
		next.ServeHTTP(w, r)
		return
	case key == "":
		problem(w, http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED", fmt.Sprintf("this route requires an %s header: a unique value per operation, like a UUID, sent again unchanged on every retry", o.Header))
		return
	case len(key) > 256 || !utf8.ValidString(key):
		problem(w, http.StatusBadRequest, "IDEMPOTENCY_KEY_INVALID", fmt.Sprintf("the %s header must be 1 to 256 bytes of UTF-8, got %d bytes", o.Header, len(key)))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, o.MaxBodyBytes+1))
	if err != nil {
		problem(w, http.StatusBadRequest, "BODY_UNREADABLE", "the request body could not be read: "+err.Error())
		return
	}
	if int64(len(body)) > o.MaxBodyBytes {
		problem(w, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", fmt.Sprintf("the request body is larger than %d bytes", o.MaxBodyBytes))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	fp := fingerprint(r.Method, o.Route(r), body)
	claim, err := c.ClaimEffect(r.Context(), sepp.ClaimEffectRequest{Scope: o.Scope, Key: key, TTL: o.TTL, Lease: o.Lease})
	if err != nil {
		unavailable(w, err)
		return
	}
	switch claim.State {
	case sepp.EffectInProgress:
		problem(w, http.StatusConflict, "IDEMPOTENCY_KEY_IN_FLIGHT", "a request with this key is still being processed; retry after it completes")
	case sepp.EffectCompleted:
		replay(w, claim.Result, fp)
	default:
		run(c, o, next, w, r, claim.Token, fp)
	}
}

// fingerprint is the request's identity under its key: method, route and
// the SHA-256 of its body.
func fingerprint(method, route string, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s%d:%s", len(method), method, len(route), route)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func replay(w http.ResponseWriter, result []byte, fp string) {
	var s stored
	if err := json.Unmarshal(result, &s); err != nil {
		problem(w, http.StatusInternalServerError, "IDEMPOTENCY_RECORD_UNREADABLE", "the response stored under this key cannot be read: "+err.Error())
		return
	}
	if s.Fingerprint != fp {
		problem(w, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED", "this key was used with another request (method, route or body); use a new key for a new request")
		return
	}
	for k, vs := range s.Header {
		w.Header()[k] = vs
	}
	w.Header().Set(ReplayedHeader, "true")
	w.WriteHeader(s.Status)
	w.Write(s.Body)
}

// run runs the handler under the claim token, extending its lease while it
// runs, and stores its answer, or releases the key for a 5xx or a panic.
func run(c *sepp.Client, o *Options, next http.Handler, w http.ResponseWriter, r *http.Request, token, fp string) {
	ctx := context.WithoutCancel(r.Context())
	if o.Timeout > 0 {
		hctx, cancel := context.WithTimeout(r.Context(), o.Timeout)
		defer cancel()
		r = r.WithContext(hctx)
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(o.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.ExtendEffectLease(ctx, token, o.Lease)
			}
		}
	}()
	rec := &recorder{header: http.Header{}, status: http.StatusOK, limit: o.MaxBodyBytes}
	func() {
		defer func() {
			if p := recover(); p != nil {
				close(stop)
				c.ReleaseEffect(ctx, token)
				panic(p)
			}
		}()
		next.ServeHTTP(rec, r)
	}()
	close(stop)
	// A handler that returned without answering after its context ended
	// (Timeout, or the client gone) did not finish: its key is released.
	if !rec.wrote && r.Context().Err() != nil {
		c.ReleaseEffect(ctx, token)
		problem(w, http.StatusGatewayTimeout, "IDEMPOTENCY_HANDLER_TIMEOUT", "the handler did not answer in time; nothing was stored under this key, so a retry runs it again")
		return
	}
	if rec.status >= 500 || rec.over {
		c.ReleaseEffect(ctx, token)
	} else {
		s := stored{Fingerprint: fp, Status: rec.status, Header: map[string][]string{}, Body: rec.body.Bytes()}
		for _, h := range o.ReplayHeaders {
			if vs := rec.header.Values(h); len(vs) > 0 {
				s.Header[http.CanonicalHeaderKey(h)] = vs
			}
		}
		b, err := json.Marshal(s)
		if err == nil {
			_, err = c.CompleteEffect(ctx, token, b)
		}
		if err != nil {
			// The answer was not stored: a retry runs the handler again
			// once the lease ends. Say so rather than pretend.
			c.ReleaseEffect(ctx, token)
			unavailable(w, err)
			return
		}
	}
	for k, vs := range rec.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
}

// recorder captures a handler's answer.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
	limit  int64
	over   bool // the body passed limit: sent, not stored
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if int64(r.body.Len()+len(b)) > r.limit {
		r.over = true
	}
	return r.body.Write(b)
}

func unavailable(w http.ResponseWriter, err error) {
	var se *sepp.Error
	if errors.As(err, &se) && se.Reason != sepp.ErrUnavailable.Error() {
		problem(w, http.StatusInternalServerError, se.Reason, "the idempotency record could not be used: "+se.Message)
		return
	}
	w.Header().Set("Retry-After", "1")
	problem(w, http.StatusServiceUnavailable, sepp.ErrUnavailable.Error(), "the idempotency records are unreachable, so the request was not run; retry it with the same key")
}

// problem writes an RFC 9457 problem with a reason member.
func problem(w http.ResponseWriter, status int, reason, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail, "reason": reason,
	})
}
