// Package sepp is the Go client of Sepp, a job queue whose retries never
// become duplicates.
//
//	c, err := sepp.Connect(ctx, "http://localhost:50051")
//	ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{
//		Queue: "emails", JobType: "receipt", IdempotencyKey: sepp.Key("receipt-order-8a3f"),
//	})
//	// ack.Deduplicated is true when the key was already recorded: ack.JobID
//	// then names the original job.
//
// An https:// address connects over TLS (Config.TLS for a private CA or a
// client certificate); Config.Token is sent as a bearer token on every RPC.
//
// A Client is safe for concurrent use. Concurrent Enqueue calls are coalesced
// into EnqueueBatch RPCs (natural batching: while the batches in flight, two
// at most by default, are busy, the next calls gather and go together when one
// returns; an idle client sends at once), and each caller still gets its own
// ack or error. Keyed enqueues whose
// fate is unknown after a transport error are resent with the same key, which
// makes the retry harmless.
//
// An Enqueue or EnqueueBatch whose ctx carries an OpenTelemetry span runs in
// a producer span "sepp.enqueue <queue>" and writes its W3C trace context
// into the jobs' headers (traceparent, tracestate), so the worker's span of
// the job continues the trace (docs/observability.md, "Tracing").
package sepp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// Config tunes a Client. The zero value is the default.
type Config struct {
	// DisableBatching sends every Enqueue as its own RPC instead of
	// coalescing concurrent calls. Default false.
	DisableBatching bool
	// MaxInFlight bounds the coalesced EnqueueBatch RPCs in flight at once.
	// Calls wait only while all of them are busy. Two keep the server's
	// writer busy while the next batch travels. Default 2. Enqueues of a
	// (queue, key) this client recently had acked travel apart, in RPCs of
	// their own with their own MaxInFlight slots, so up to twice as many
	// RPCs may be in flight.
	MaxInFlight int
	// MaxBatchSize bounds the jobs of one coalesced EnqueueBatch RPC. Keep it
	// at or below the server's max_batch_size. Default 1000.
	MaxBatchSize int
	// MaxBatchBytes bounds the bytes of the jobs (payloads, keys, headers)
	// of one coalesced RPC.
	// Default 4 MiB.
	MaxBatchBytes int
	// MaxIdempotencyKeyBytes is the key length the client checks before
	// sending (the server checks again and decides). Set it to the server's
	// max_idempotency_key_bytes if you change that. Default 256; -1 turns the
	// local check off.
	MaxIdempotencyKeyBytes int
	// EnqueueRetries is how many times a keyed enqueue is resent after a
	// transport error. Unkeyed enqueues are never resent, since a resend
	// could create a duplicate. Complete, CompleteBatch, Fail and
	// CompleteEffect are resent as often: the server answers a repeat of a
	// committed call with success. Default 5; -1 turns retries off. Each
	// resend waits a random delay below a ceiling that doubles from 50 ms to
	// 2 s (full jitter), the policy every Sepp client shares.
	EnqueueRetries int
	// RPCTimeout bounds each RPC the client sends on behalf of coalesced
	// calls. Default 30 s.
	RPCTimeout time.Duration
	// FailFast makes Connect check the server once and fail at once when it
	// does not answer or is not serving. Default false: Connect waits,
	// retrying with backoff (up to ConnectMaxBackoff between tries) and
	// logging each wait, until the server serves or ctx ends, so a worker
	// may start before its server (compose, Kubernetes).
	FailFast bool
	// ConnectMaxBackoff caps the wait between Connect's tries. Default 5 s.
	ConnectMaxBackoff time.Duration
	// Logger receives the client's own log lines (Connect's waits).
	// Default slog.Default().
	Logger *slog.Logger
	// TLS configures the TLS connection to an https:// address: a custom
	// CA (RootCAs), a client certificate for mutual TLS (Certificates), a
	// ServerName. Default nil: an https:// address is verified against the
	// system's roots. Setting it for an http:// address is an error.
	TLS *tls.Config
	// Token is sent as "authorization: Bearer <token>" metadata on every
	// RPC, the health check included, over https:// and http:// alike.
	// Default "": none.
	Token string
}

func (c Config) withDefaults() Config {
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 2
	}
	if c.MaxBatchSize <= 0 {
		c.MaxBatchSize = 1000
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 4 << 20
	}
	if c.MaxIdempotencyKeyBytes == 0 {
		c.MaxIdempotencyKeyBytes = 256
	}
	if c.EnqueueRetries == 0 {
		c.EnqueueRetries = defaultRetries
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = 30 * time.Second
	}
	if c.ConnectMaxBackoff <= 0 {
		c.ConnectMaxBackoff = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// maxMessageBytes is the largest message the client sends or accepts; it
// matches the server's limit.
const maxMessageBytes = 64 << 20

// Client talks to one Sepp server (or a load balancer in front of several).
type Client struct {
	cfg     Config
	conn    *grpc.ClientConn
	jobs    seppv1.JobServiceClient
	workers seppv1.WorkerServiceClient
	admin   seppv1.AdminServiceClient
	effects seppv1.EffectServiceClient
	batcher *batcher // nil when batching is off
}

// Connect connects to the server at addr ("http://localhost:50051") with the
// default Config: it waits until the server answers its health check as
// serving, retrying with backoff and logging each wait, or until ctx ends.
func Connect(ctx context.Context, addr string) (*Client, error) {
	return NewClient(ctx, addr, Config{})
}

// NewClient is Connect with a Config.
func NewClient(ctx context.Context, addr string, cfg Config) (*Client, error) {
	target, secure, err := dialTarget(addr)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	switch {
	case secure:
		tc := cfg.TLS.Clone()
		if tc == nil {
			tc = &tls.Config{}
		}
		creds = credentials.NewTLS(tc)
	case cfg.TLS != nil:
		return nil, fmt.Errorf("sepp: address %q: Config.TLS is set but the address is not https://; use https://host:port", addr)
	}
	var auth []grpc.DialOption
	if cfg.Token != "" {
		auth = withToken(cfg.Token)
	}
	conn, err := grpc.NewClient(target, append(auth,
		grpc.WithTransportCredentials(creds),
		// Reconnect quickly after a server restart; gRPC's default starts
		// at 1 s.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		// Fixed flow-control windows: no bandwidth-probing PING and
		// WINDOW_UPDATE frames with each answer (see the server's).
		grpc.WithInitialWindowSize(maxMessageBytes), grpc.WithInitialConnWindowSize(maxMessageBytes),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)))...)
	if err != nil {
		return nil, fmt.Errorf("sepp: connect to %s: %w", addr, err)
	}
	cfg = cfg.withDefaults()
	if err := awaitServing(ctx, conn, addr, cfg); err != nil {
		conn.Close()
		return nil, err
	}
	c := &Client{cfg: cfg, conn: conn, jobs: seppv1.NewJobServiceClient(conn),
		workers: seppv1.NewWorkerServiceClient(conn), admin: seppv1.NewAdminServiceClient(conn),
		effects: seppv1.NewEffectServiceClient(conn)}
	if !c.cfg.DisableBatching {
		c.batcher = newBatcher(c)
	}
	return c, nil
}

// awaitServing checks the server's health until it answers SERVING. With
// cfg.FailFast it checks once.
func awaitServing(ctx context.Context, conn *grpc.ClientConn, addr string, cfg Config) error {
	health := healthpb.NewHealthClient(conn)
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := health.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			if attempt > 1 {
				cfg.Logger.Info("sepp: server is up", "addr", addr, "tries", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("sepp: connect to %s: %w", addr, ctx.Err())
		}
		why := "the server is not serving (its store cannot be read)"
		var failure error = &Error{Code: "unavailable", Reason: ErrUnavailable.Error(), Index: -1,
			Message: fmt.Sprintf("cannot reach the server at %s: %s", addr, why)}
		if err != nil {
			failure = fromRPC(ctx, err)
			if e, ok := failure.(*Error); ok {
				why = e.Message
				e.Message = fmt.Sprintf("cannot reach the server at %s: %s", addr, e.Message)
			}
		}
		if cfg.FailFast {
			return failure
		}
		cfg.Logger.Warn("sepp: waiting for the server", "addr", addr, "try", attempt, "retry_in", wait, "err", why)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("sepp: connect to %s: %w (last: %s)", addr, ctx.Err(), why)
		}
		wait = min(wait*2, cfg.ConnectMaxBackoff)
	}
}

// dialTarget turns "http://host:port" (or a bare "host:port") into a gRPC
// target; secure reports an "https://host:port", which TLS protects.
func dialTarget(addr string) (target string, secure bool, err error) {
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" {
		if u2, err2 := url.Parse("http://" + addr); err2 == nil && u2.Host != "" && u2.Path == "" {
			return u2.Host, false, nil
		}
		return "", false, fmt.Errorf("sepp: address %q: want http://host:port or https://host:port", addr)
	}
	switch u.Scheme {
	case "http", "h2c", "grpc":
	case "https", "grpcs":
		secure = true
	default:
		return "", false, fmt.Errorf("sepp: address %q: scheme %q is not supported; use http://host:port or https://host:port", addr, u.Scheme)
	}
	return u.Host, secure, nil
}

// withToken returns the dial options that send token as
// "authorization: Bearer <token>" on every RPC. Interceptors rather than
// PerRPCCredentials, which grpc-go sends only over TLS.
func withToken(token string) []grpc.DialOption {
	bearer := "Bearer " + token
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, "authorization", bearer), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(metadata.AppendToOutgoingContext(ctx, "authorization", bearer), desc, cc, method, opts...)
		}),
	}
}

// Close closes the connection. Calls in flight fail.
func (c *Client) Close() error { return c.conn.Close() }

// EnqueueRequest is one job to enqueue.
type EnqueueRequest struct {
	Queue   string
	JobType string
	Payload []byte
	// IdempotencyKey makes the enqueue safe to retry: within the queue's
	// dedup window, an enqueue with a recorded key returns the original job.
	// nil: no key. Set it with Key(k); a key that is set but empty is
	// refused with ErrIdempotencyKeyEmpty (an empty key is almost always a
	// missing variable, and sending it as "no key" would make duplicates).
	IdempotencyKey *string
	// Priority: higher runs first. Default 0.
	Priority int32
	// RunAt delays the job. Zero: now.
	RunAt time.Time
	// MaxAttempts overrides the queue's max_attempts. Zero: the queue's.
	MaxAttempts int32
	Headers     map[string]string
}

// Key returns k as an EnqueueRequest's IdempotencyKey. Key("") is a key that
// is set but empty, which the client and the server refuse.
func Key(k string) *string { return &k }

// Ack is the server's answer to an enqueue.
type Ack struct {
	// JobID is the new job, or on a hit the original job (which may since
	// have run, been dead-lettered or been deleted).
	JobID string `json:"jobId"`
	// Deduplicated means "this enqueue is already accounted for".
	Deduplicated bool `json:"deduplicated"`
	// PayloadMismatch: on a hit, the original was enqueued with a different
	// job type or payload.
	PayloadMismatch bool `json:"payloadMismatch"`
	// OriginalEnqueuedAt: on a hit, when the original was enqueued.
	OriginalEnqueuedAt time.Time `json:"originalEnqueuedAt,omitzero"`
	// DedupExpiresAt: for keyed enqueues, when the key stops being honoured.
	DedupExpiresAt time.Time `json:"dedupExpiresAt,omitzero"`
	// Replaced: on a hit on a queue with on_duplicate = "replace" or
	// "debounce", the original, still waiting, took this request's payload,
	// headers, priority and run-at.
	Replaced bool `json:"replaced,omitempty"`
	// IdempotencyKey is the key the enqueue was judged by: the request's, or
	// the one the server derived from the payload on a queue with
	// key_fields; empty for an enqueue without a key.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// FollowsJobID: on a queue with when_running = "run_again", the key's
	// job was running, so this enqueue created a follow-up (JobID,
	// Deduplicated false) that runs once the job named here has ended.
	FollowsJobID string `json:"followsJobId,omitempty"`
	// DelayedUntil: a rule with action = "delay" found its window full, so
	// the job was accepted for this time, the first moment the window has
	// room.
	DelayedUntil time.Time `json:"delayedUntil,omitzero"`
}

// Enqueue enqueues one job.
func (c *Client) Enqueue(ctx context.Context, req EnqueueRequest) (*Ack, error) {
	pb, err := c.toProto(&req)
	if err != nil {
		return nil, err
	}
	var span trace.Span // nil unless ctx carries a span (tracing.go)
	if trace.SpanContextFromContext(ctx).IsValid() {
		ctx, span = startEnqueueSpan(ctx, []*seppv1.EnqueueRequest{pb})
	}
	var ack *Ack
	if c.batcher != nil {
		ack, err = c.batcher.enqueue(ctx, pb)
	} else {
		ack, err = c.enqueueDirect(ctx, pb)
	}
	endEnqueueSpan(span, ack, err)
	return ack, err
}

func (c *Client) enqueueDirect(ctx context.Context, pb *seppv1.EnqueueRequest) (*Ack, error) {
	for attempt := 0; ; attempt++ {
		res, err := c.jobs.Enqueue(ctx, pb)
		if err == nil {
			return ackFromProto(res), nil
		}
		err = fromRPC(ctx, err)
		if !c.shouldRetry(ctx, pb.IdempotencyKey != nil, err, attempt) {
			return nil, ctxErrOr(ctx, err)
		}
	}
}

// resend runs call, an RPC whose repeat is harmless, and resends it after
// transport errors as a keyed enqueue is. call returns fromRPC's error.
func (c *Client) resend(ctx context.Context, call func() error) error {
	for attempt := 0; ; attempt++ {
		err := call()
		if err == nil || !c.shouldRetry(ctx, true, err, attempt) {
			return ctxErrOr(ctx, err)
		}
	}
}

// ctxErrOr is ctx's error if ctx has ended (the caller gave up, which matters
// more than the last attempt's error), else err.
func ctxErrOr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// shouldRetry reports whether an enqueue should be resent after err (only a
// keyed one: resending is then harmless), and waits the backoff if so.
func (c *Client) shouldRetry(ctx context.Context, keyed bool, err error, attempt int) bool {
	if !keyed || !retryable(err) || attempt >= c.cfg.EnqueueRetries {
		return false
	}
	select {
	case <-time.After(jitteredRetryDelay(attempt)):
		return true
	case <-ctx.Done():
		return false
	}
}

// BatchOptions tune EnqueueBatch.
type BatchOptions struct {
	// Atomic: all jobs are validated first and written together, or none
	// is. A dedup hit is not a failure.
	Atomic bool
}

// BatchResult is the outcome of one job of a batch: an Ack or an Err.
type BatchResult struct {
	Ack *Ack
	Err error
}

// EnqueueBatch enqueues jobs in one RPC and returns one result per job, in
// order. A non-atomic batch judges each job alone. An atomic batch fails as a
// whole with an *Error whose Index names the bad job, and then writes nothing.
func (c *Client) EnqueueBatch(ctx context.Context, reqs []EnqueueRequest, opts BatchOptions) ([]BatchResult, error) {
	pbs := make([]*seppv1.EnqueueRequest, len(reqs))
	results := make([]BatchResult, len(reqs))
	var send []*seppv1.EnqueueRequest
	var index []int
	for i := range reqs {
		pb, err := c.toProto(&reqs[i])
		if err != nil {
			var e *Error
			if opts.Atomic && errors.As(err, &e) {
				e.Index = i
				e.Message = fmt.Sprintf("jobs[%d]: %s", i, e.Message)
				return nil, e
			}
			results[i].Err = err
			continue
		}
		pbs[i] = pb
		send = append(send, pb)
		index = append(index, i)
	}
	if len(send) == 0 {
		return results, nil
	}
	var span trace.Span // nil unless ctx carries a span (tracing.go)
	if trace.SpanContextFromContext(ctx).IsValid() {
		ctx, span = startEnqueueSpan(ctx, send)
	}
	res, err := c.sendBatch(ctx, send, opts)
	endEnqueueSpan(span, nil, err)
	if err != nil {
		return nil, err
	}
	for k, r := range res.GetResults() {
		results[index[k]] = batchResultFromProto(r)
	}
	return results, nil
}

// sendBatch sends one EnqueueBatch, resending it after transport errors
// when that is harmless, and checks the answer has a result per job.
func (c *Client) sendBatch(ctx context.Context, send []*seppv1.EnqueueRequest, opts BatchOptions) (*seppv1.EnqueueBatchResponse, error) {
	// A batch whose fate is unknown after a transport error is resent only
	// when every job has a key, since then a resend cannot duplicate one.
	allKeyed := true
	for _, pb := range send {
		allKeyed = allKeyed && pb.IdempotencyKey != nil
	}
	var res *seppv1.EnqueueBatchResponse
	for attempt := 0; ; attempt++ {
		var err error
		res, err = c.jobs.EnqueueBatch(ctx, &seppv1.EnqueueBatchRequest{Jobs: send, Atomic: opts.Atomic})
		if err == nil {
			break
		}
		err = fromRPC(ctx, err)
		if !c.shouldRetry(ctx, allKeyed, err, attempt) {
			return nil, ctxErrOr(ctx, err)
		}
	}
	if len(res.GetResults()) != len(send) {
		return nil, fmt.Errorf("sepp: server answered %d results for %d jobs", len(res.GetResults()), len(send))
	}
	return res, nil
}

func batchResultFromProto(r *seppv1.EnqueueBatchResult) BatchResult {
	if e := r.GetError(); e != nil {
		return BatchResult{Err: &Error{Code: e.GetCode(), Reason: e.GetReason(), Message: e.GetMessage(), Index: -1, Metadata: e.GetMetadata()}}
	}
	return BatchResult{Ack: ackFromProto(r.GetAck())}
}

// toProto checks req locally (fast fail; the server decides) and converts it.
func (c *Client) toProto(req *EnqueueRequest) (*seppv1.EnqueueRequest, error) {
	pb := &seppv1.EnqueueRequest{
		Queue:       req.Queue,
		JobType:     req.JobType,
		Payload:     req.Payload,
		Priority:    req.Priority,
		MaxAttempts: req.MaxAttempts,
		Headers:     req.Headers,
	}
	if req.IdempotencyKey != nil {
		if err := checkKey(*req.IdempotencyKey, c.cfg.MaxIdempotencyKeyBytes); err != nil {
			return nil, err
		}
		k := *req.IdempotencyKey
		pb.IdempotencyKey = &k
	}
	if !req.RunAt.IsZero() {
		pb.RunAt = timestamppb.New(req.RunAt)
	}
	for field, v := range map[string]string{"queue": req.Queue, "job_type": req.JobType} {
		if !utf8.ValidString(v) {
			return nil, &Error{Code: "invalid_argument", Reason: ErrInvalidField.Error(), Message: field + ": is not valid UTF-8", Index: -1}
		}
	}
	return pb, nil
}

// checkKey checks a key locally as the server will; max < 0 leaves the
// length rules to the server.
func checkKey(k string, max int) error {
	if k == "" && max >= 0 {
		return &Error{Code: "invalid_argument", Reason: ErrIdempotencyKeyEmpty.Error(),
			Message: "idempotency key is empty (often an unset variable): pass a key derived from what the job is about, or leave IdempotencyKey nil to enqueue without dedup", Index: -1}
	}
	if !utf8.ValidString(k) {
		return &Error{Code: "invalid_argument", Reason: ErrInvalidField.Error(),
			Message: "idempotency_key: is not valid UTF-8; keys are UTF-8 strings", Index: -1}
	}
	if max > 0 && len(k) > max {
		return &Error{Code: "invalid_argument", Reason: ErrIdempotencyKeyTooLong.Error(),
			Message: fmt.Sprintf("idempotency key is %d bytes; the limit is %d (max_idempotency_key_bytes): use a shorter, stable id such as the entity or event id", len(k), max),
			Index:   -1}
	}
	return nil
}

func ackFromProto(r *seppv1.EnqueueResponse) *Ack {
	a := &Ack{JobID: r.GetJobId(), Deduplicated: r.GetDeduplicated(), PayloadMismatch: r.GetPayloadMismatch(), Replaced: r.GetReplaced(), IdempotencyKey: r.GetIdempotencyKey()}
	if r.OriginalEnqueuedAt != nil {
		a.OriginalEnqueuedAt = r.OriginalEnqueuedAt.AsTime()
	}
	if r.DedupExpiresAt != nil {
		a.DedupExpiresAt = r.DedupExpiresAt.AsTime()
	}
	a.FollowsJobID = r.GetFollowsJobId()
	if r.DelayedUntil != nil {
		a.DelayedUntil = r.DelayedUntil.AsTime()
	}
	return a
}
