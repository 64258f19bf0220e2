package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/jsonkey"
	"github.com/sepp-dev/sepp/internal/store"
)

// Limits on fields that have no config key (the enqueue's are in config).
const (
	maxJobTypeBytes     = config.MaxJobTypeBytes
	maxHeaderBytes      = config.MaxHeaderBytes
	maxHeaderEntryCount = config.MaxHeaderEntries
	// maxWorkerIDBytes bounds a Reserve's worker_id, which is stored with
	// each job it leases; a host name and a process id take far less.
	maxWorkerIDBytes = 1024
)

// jobService implements JobService for both stacks (grpc-go and connect-go
// share the handler signature); errors are rendered by each stack's
// interceptor.
type jobService struct {
	seppv1.UnimplementedJobServiceServer
	s *Server
}

func (j *jobService) enqueue(ctx context.Context, req *seppv1.EnqueueRequest) (*seppv1.EnqueueResponse, error) {
	job, aerr := j.s.validateEnqueue(req)
	if aerr != nil {
		j.s.metrics.enqueues.WithLabelValues(j.s.queueLabel(req.GetQueue()), "rejected").Inc()
		return nil, aerr
	}
	res, err := j.s.store.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: []store.EnqueueJob{job}, Now: j.s.now()})
	if err != nil {
		return nil, err
	}
	r := res[0]
	j.s.observeEnqueue(&job, &r)
	if r.Err != nil {
		return nil, r.Err
	}
	return ackOf(&job, &r), nil
}

func (j *jobService) enqueueBatch(ctx context.Context, req *seppv1.EnqueueBatchRequest) (*seppv1.EnqueueBatchResponse, error) {
	if aerr := checkCount(j.s.cfg, req); aerr != nil { // max_batch_size, counts.go
		return nil, aerr
	}
	results := make([]*seppv1.EnqueueBatchResult, len(req.GetJobs()))
	jobs := make([]store.EnqueueJob, 0, len(req.GetJobs()))
	index := make([]int, 0, len(req.GetJobs())) // position in jobs -> position in the request
	for i, r := range req.GetJobs() {
		job, aerr := j.s.validateEnqueue(r)
		if aerr != nil {
			if req.GetAtomic() {
				j.s.countRejected(req.GetJobs())
				return nil, aerr.atIndex(i)
			}
			results[i] = itemError(aerr)
			j.s.metrics.enqueues.WithLabelValues(j.s.queueLabel(r.GetQueue()), "rejected").Inc()
			continue
		}
		jobs = append(jobs, job)
		index = append(index, i)
	}
	if len(jobs) > 0 {
		res, err := j.s.store.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: jobs, Atomic: req.GetAtomic(), Now: j.s.now()})
		if err != nil {
			if je := asJobError(err); je != nil {
				j.s.countRejected(req.GetJobs())
				return nil, toAPIError(je.Err).atIndex(index[je.Index])
			}
			return nil, err
		}
		for k := range res {
			j.s.observeEnqueue(&jobs[k], &res[k])
			if res[k].Err != nil {
				results[index[k]] = itemError(toAPIError(res[k].Err))
				continue
			}
			results[index[k]] = &seppv1.EnqueueBatchResult{Outcome: &seppv1.EnqueueBatchResult_Ack{Ack: ackOf(&jobs[k], &res[k])}}
		}
	}
	return &seppv1.EnqueueBatchResponse{Results: results}, nil
}

// countRejected counts every job of a failed atomic batch as rejected.
func (s *Server) countRejected(jobs []*seppv1.EnqueueRequest) {
	for _, r := range jobs {
		s.metrics.enqueues.WithLabelValues(s.queueLabel(r.GetQueue()), "rejected").Inc()
	}
}

func itemError(e *apiError) *seppv1.EnqueueBatchResult {
	return &seppv1.EnqueueBatchResult{Outcome: &seppv1.EnqueueBatchResult_Error{Error: &seppv1.BatchItemError{
		Code: e.code.String(), Reason: e.reason, Message: e.msg, Metadata: e.metadata,
	}}}
}

// ackOf builds the ack of job's enqueue, naming the key it was judged by.
func ackOf(job *store.EnqueueJob, r *store.EnqueueResult) *seppv1.EnqueueResponse {
	ack := &seppv1.EnqueueResponse{JobId: formatJobID(r.JobID), Deduplicated: r.Deduplicated, PayloadMismatch: r.PayloadMismatch, Replaced: r.Replaced}
	if job.IdempotencyKey != nil {
		ack.IdempotencyKey = *job.IdempotencyKey
	}
	if !r.ExpiresAt.IsZero() {
		ack.DedupExpiresAt = timestamppb.New(r.ExpiresAt)
	}
	if r.Deduplicated {
		ack.OriginalEnqueuedAt = timestamppb.New(r.OriginalEnqueuedAt)
	}
	if r.FollowsJobID != (store.JobID{}) {
		ack.FollowsJobId = formatJobID(r.FollowsJobID)
	}
	if !r.DelayedUntil.IsZero() {
		ack.DelayedUntil = timestamppb.New(r.DelayedUntil)
	}
	return ack
}

// observeEnqueue counts one enqueue outcome and logs dedup hits: one line
// per hit, with the queue, the key and the original job id.
func (s *Server) observeEnqueue(job *store.EnqueueJob, r *store.EnqueueResult) {
	// The store took the job, or refused it for a job it holds on the
	// queue: the queue exists (queuelabels.go).
	label := s.metrics.queues.exists(job.Queue)
	if outcome := dedupOutcome(job, r); outcome != "" {
		s.metrics.dedupOutcomes.WithLabelValues(label, outcome).Inc()
	}
	switch {
	case r.Err != nil:
		s.metrics.enqueues.WithLabelValues(label, "rejected").Inc()
	case r.Deduplicated:
		if r.Replaced {
			s.wake.At(job.Queue, r.RunAt) // now, when its new run-at has passed
		}
		s.metrics.enqueues.WithLabelValues(label, "deduplicated").Inc()
		s.metrics.dedupHits.WithLabelValues(label).Inc()
		attrs := []slog.Attr{slog.String("queue", job.Queue), s.keyAttr(*job.IdempotencyKey), // log_keys (auth.go)
			slog.String("job_id", formatJobID(r.JobID)), slog.String("request_job_type", job.JobType),
			slog.Bool("payload_mismatch", r.PayloadMismatch)}
		if r.Replaced {
			attrs = append(attrs, slog.Bool("replaced", true))
		}
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "dedup hit", attrs...)
	default:
		s.metrics.enqueues.WithLabelValues(label, "created").Inc()
		at := r.RunAt // the store's: a debounced job starts late
		if at.IsZero() {
			at = job.RunAt
		}
		if at.IsZero() {
			s.wake.Notify(job.Queue)
		} else {
			s.wake.At(job.Queue, at) // now, when its run-at has passed
		}
	}
}

// debounce is a debounce setting of qc as a duration, or 0 unless the queue
// debounces.
func debounce(qc config.QueueConfig, ms int64) time.Duration {
	if qc.OnDuplicate != config.OnDuplicateDebounce {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// dedupOutcome names what the dedup policy decided for a job with a key or
// a rule ("" for a job with neither, or an error of another kind).
func dedupOutcome(job *store.EnqueueJob, r *store.EnqueueResult) string {
	if job.IdempotencyKey == nil && len(job.Rules) == 0 {
		return ""
	}
	switch {
	case errors.Is(r.Err, store.ErrDedupRuleViolated):
		return "rule_violated"
	case errors.Is(r.Err, store.ErrDuplicateJob), errors.Is(r.Err, store.ErrIdempotencyKeyConflict):
		return "rejected"
	case r.Err != nil:
		return ""
	case r.Replaced && job.Debounce > 0:
		return "debounced"
	case r.Replaced:
		return "replaced"
	case r.Deduplicated && r.PayloadMismatch:
		return "mismatch"
	case r.Deduplicated:
		return "hit"
	case r.FollowsJobID != (store.JobID{}):
		return "follow_up"
	case !r.DelayedUntil.IsZero():
		return "delayed"
	}
	return "created"
}

// validateEnqueue checks req against the enqueue rules (docs/idempotency.md,
// and the reasons of docs/errors.md) and the configuration, and resolves the
// queue's settings into a store.EnqueueJob.
func (s *Server) validateEnqueue(req *seppv1.EnqueueRequest) (store.EnqueueJob, *apiError) {
	var job store.EnqueueJob
	queue := req.GetQueue()
	if aerr := s.checkQueue(queue); aerr != nil {
		return job, aerr
	}
	qc := s.cfg.Queue(queue)
	jobType := req.GetJobType()
	if aerr := checkName("job_type", jobType, maxJobTypeBytes); aerr != nil {
		return job, aerr
	}
	if !qc.AcceptsJobType(jobType) {
		e := newError(connect.CodeInvalidArgument, ReasonUnknownJobType,
			"job type %q is not accepted on queue %q; its job_types allow %q", jobType, queue, qc.JobTypes)
		e.metadata = map[string]string{"queue": queue, "job_type": jobType}
		return job, e
	}
	if n, max := len(req.GetPayload()), s.cfg.Server.MaxPayloadBytes; int64(n) > max {
		return job, newError(connect.CodeInvalidArgument, ReasonPayloadTooLarge,
			"payload is %d bytes; the limit is %d (max_payload_bytes): store large data elsewhere and enqueue a reference", n, max)
	}
	var key *string
	if req.IdempotencyKey != nil {
		k := req.GetIdempotencyKey()
		if aerr := s.checkKey(k); aerr != nil {
			return job, aerr
		}
		key = &k
	} else if len(qc.KeyFields) > 0 {
		k, aerr := deriveKey(req.GetPayload(), qc.KeyFields, "")
		if aerr != nil {
			return job, aerr
		}
		if aerr := s.checkKey(k); aerr != nil {
			aerr.msg = fmt.Sprintf("the key derived from key_fields %q: %s", qc.KeyFields, aerr.msg)
			return job, aerr
		}
		key = &k
	} else if qc.DedupByContent {
		f := store.NewFingerprint(jobType, req.GetPayload())
		k := hex.EncodeToString(f[:])
		key = &k
	}
	if key == nil && qc.RequireKey {
		e := newError(connect.CodeInvalidArgument, ReasonIdempotencyKeyRequired,
			"queue %q requires an idempotency key (require_key = true): send one derived from what the job is about, such as the order or event id", queue)
		e.metadata = map[string]string{"queue": queue}
		return job, e
	}
	if req.GetMaxAttempts() < 0 {
		return job, invalidField("max_attempts", "must be >= 0 (0 means the queue's max_attempts), got %d", req.GetMaxAttempts())
	}
	maxAttempts := req.GetMaxAttempts()
	if maxAttempts == 0 {
		maxAttempts = int32(qc.MaxAttempts)
	}
	var runAt time.Time
	if req.RunAt != nil {
		if err := req.RunAt.CheckValid(); err != nil {
			return job, invalidField("run_at", "not a valid timestamp: %v", err)
		}
		runAt = req.RunAt.AsTime()
	}
	if aerr := checkCount(s.cfg, req); aerr != nil { // the headers' count, counts.go
		return job, aerr
	}
	if aerr := checkHeaders(req.GetHeaders()); aerr != nil {
		return job, aerr
	}
	var rules []store.RuleKey
	for _, r := range qc.Rules {
		k, aerr := deriveKey(req.GetPayload(), r.KeyFields, r.Name)
		if aerr != nil {
			return job, aerr
		}
		rules = append(rules, store.RuleKey{Name: r.Name, Key: k, Window: r.Window(), Limit: r.Limit, Delay: r.Action == config.RuleActionDelay})
	}
	job = store.EnqueueJob{
		Queue:           queue,
		JobType:         jobType,
		Payload:         req.GetPayload(),
		IdempotencyKey:  key,
		Priority:        req.GetPriority(),
		RunAt:           runAt,
		MaxAttempts:     maxAttempts,
		Headers:         req.GetHeaders(),
		DedupWindow:     qc.DedupWindow(),
		RejectMismatch:  qc.KeyReuse == config.KeyReuseRejectMismatch,
		RejectDuplicate: qc.OnDuplicate == config.OnDuplicateReject,
		Replace:         qc.OnDuplicate == config.OnDuplicateReplace || qc.OnDuplicate == config.OnDuplicateDebounce,
		Debounce:        debounce(qc, qc.DebounceMs),
		DebounceMaxWait: debounce(qc, qc.DebounceMaxWaitMs),
		ReleaseKeyOn:    store.ReleaseOnStates(qc.ReleaseKeyOn),
		Rules:           rules,
		RunAgain:        qc.WhenRunning == config.WhenRunningRunAgain,
	}
	if c := qc.Concurrency; c != nil {
		job.Concurrency = &store.ConcurrencyKey{Limit: c.ResolvedLimit(), Ordered: c.Ordered}
		if len(c.KeyFields) > 0 {
			k, aerr := deriveKey(req.GetPayload(), c.KeyFields, concurrencyRule)
			if aerr != nil {
				return job, aerr
			}
			job.Concurrency.Key = k
		}
	}
	if r := qc.Rate; r != nil {
		job.Rate = &store.RateKey{Limit: r.ResolvedLimit(), Period: r.Period()}
		if len(r.KeyFields) > 0 {
			k, aerr := deriveKey(req.GetPayload(), r.KeyFields, rateRule)
			if aerr != nil {
				return job, aerr
			}
			job.Rate.Key = k
		}
	}
	return job, nil
}

// concurrencyRule and rateRule are the names deriveKey's errors give
// [queues.concurrency] and [queues.rate].
const (
	concurrencyRule = "\x00concurrency"
	rateRule        = "\x00rate"
)

// deriveKey derives a key from payload fields: the queue's key_fields, or
// (rule not empty) a rule's, or (concurrencyRule) the concurrency key's. A
// payload without them is INVALID_FIELD naming the pointer.
func deriveKey(payload []byte, fields []string, rule string) (string, *apiError) {
	k, err := jsonkey.Derive(payload, fields)
	if err == nil {
		return k, nil
	}
	var fe *jsonkey.FieldError
	if !errors.As(err, &fe) {
		return "", invalidField("payload", "%v", err)
	}
	var e *apiError
	if rule == "" {
		e = newError(connect.CodeInvalidArgument, ReasonInvalidField, "%v", err)
	} else {
		// jsonkey's advice speaks of the queue's key; say the rule's.
		what := fe.Problem
		field := "payload"
		if fe.Pointer != "" {
			field = fmt.Sprintf("field %q", fe.Pointer)
		}
		source := fmt.Sprintf("rule %q", rule)
		switch rule {
		case concurrencyRule:
			source = "[queues.concurrency]"
		case rateRule:
			source = "[queues.rate]"
		}
		e = newError(connect.CodeInvalidArgument, ReasonInvalidField,
			"%s: %s: %s; it reads key_fields %q from every job's payload, so each job of the queue needs a JSON object holding them",
			source, field, what, fields)
	}
	e.metadata = map[string]string{"field": "payload", "pointer": fe.Pointer}
	if rule != "" && rule != concurrencyRule && rule != rateRule {
		e.metadata["rule"] = rule
	}
	return "", e
}

// checkKey applies the one rule the server enforces on a key: its length in
// bytes. Every character is allowed.
func (s *Server) checkKey(k string) *apiError {
	return s.checkKeyLen(k, s.cfg.Storage.MaxIdempotencyKeyBytes)
}

func (s *Server) checkKeyLen(k string, max int) *apiError {
	switch {
	case k == "":
		return newError(connect.CodeInvalidArgument, ReasonIdempotencyKeyEmpty,
			"idempotency key is empty: omit the field to enqueue without dedup, or derive a key from what the job is about")
	case len(k) > max && max > s.cfg.Storage.MaxIdempotencyKeyBytes:
		return newError(connect.CodeInvalidArgument, ReasonIdempotencyKeyTooLong,
			"idempotency key is %d bytes; a lookup accepts up to %d (max_idempotency_key_bytes, or the 64 bytes of a content-derived key if that is more)", len(k), max)
	case len(k) > max:
		return newError(connect.CodeInvalidArgument, ReasonIdempotencyKeyTooLong,
			"idempotency key is %d bytes; the limit is %d (max_idempotency_key_bytes): use a shorter, stable id such as the entity or event id", len(k), max)
	}
	return nil
}

func checkName(field, v string, max int) *apiError {
	switch {
	case v == "":
		return invalidField(field, "is required")
	case len(v) > max:
		return invalidField(field, "is %d bytes; the limit is %d", len(v), max)
	case !utf8.ValidString(v):
		return invalidField(field, "is not valid UTF-8")
	}
	return nil
}

// checkHeaders checks the headers' size; checkCount, their count.
func checkHeaders(h map[string]string) *apiError {
	size := 0
	for k, v := range h {
		size += len(k) + len(v)
	}
	if size > maxHeaderBytes {
		return invalidField("headers", "are %d bytes in all; the limit is %d: put large data in the payload", size, maxHeaderBytes)
	}
	return nil
}

// checkQueue checks a queue name, and in strict mode that it is declared.
func (s *Server) checkQueue(queue string) *apiError {
	if err := config.CheckQueueName(queue); err != nil {
		return invalidField("queue", "%v", err)
	}
	if s.cfg.Server.Strict && !s.cfg.Declared(queue) {
		e := newError(connect.CodeNotFound, ReasonUnknownQueue,
			"queue %q is not declared and the server runs with strict = true: add a [[queues]] entry named %q to the config, or fix the queue name", queue, queue)
		e.metadata = map[string]string{"queue": queue}
		return e
	}
	return nil
}

// contentKeyBytes is the length of the keys dedup_by_content derives (hex
// SHA-256); lookups accept them even when max_idempotency_key_bytes is lower.
const contentKeyBytes = 64

// lookupKey validates the (queue, key) pair of a lookup or release.
// The key is the request's, or, when it gives a payload instead, the key
// the queue's key_fields derive from it, as an enqueue of that payload's
// would be: a client needs no copy of the derivation.
func (s *Server) lookupKey(queue, key string, payload []byte) (string, *apiError) {
	if aerr := s.checkQueue(queue); aerr != nil {
		return "", aerr
	}
	if len(payload) > 0 {
		if key != "" {
			return "", invalidField("payload", "give the idempotency key or the payload to derive it from, not both")
		}
		fields := s.cfg.Queue(queue).KeyFields
		if len(fields) == 0 {
			e := invalidField("payload", "queue %q has no key_fields to derive a key from a payload: send the idempotency key itself", queue)
			e.metadata["queue"] = queue
			return "", e
		}
		k, aerr := deriveKey(payload, fields, "")
		if aerr != nil {
			return "", aerr
		}
		key = k
	}
	return key, s.checkKeyLen(key, max(s.cfg.Storage.MaxIdempotencyKeyBytes, contentKeyBytes))
}

func formatJobID(id store.JobID) string {
	const hexDigits = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hexDigits[c>>4], hexDigits[c&0xf]
		j += 2
	}
	return string(b[:])
}

func parseJobID(s string) (store.JobID, *apiError) {
	var id store.JobID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, invalidField("job_id", "%q is not a job id (a UUID such as 0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d)", s)
	}
	if _, err := hex.Decode(id[:], []byte(s[0:8]+s[9:13]+s[14:18]+s[19:23]+s[24:36])); err != nil {
		return id, invalidField("job_id", "%q is not a job id: %v", s, err)
	}
	return id, nil
}
