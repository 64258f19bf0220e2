package server

import (
	"context"
	"errors"
	"fmt"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sepp-dev/sepp/internal/store"
)

// ErrorDomain is the ErrorInfo domain of every Sepp error.
const ErrorDomain = "sepp.dev"

// The stable reasons, each documented in docs/errors.md: the names of the
// proto enum sepp.v1.Reason (proto/sepp/v1/reason.proto), the one list every
// client's is generated from. Clients switch on these; never rename one.
var (
	ReasonIdempotencyKeyTooLong  = seppv1.Reason_IDEMPOTENCY_KEY_TOO_LONG.String()
	ReasonIdempotencyKeyEmpty    = seppv1.Reason_IDEMPOTENCY_KEY_EMPTY.String()
	ReasonIdempotencyKeyConflict = seppv1.Reason_IDEMPOTENCY_KEY_CONFLICT.String()
	ReasonIdempotencyKeyRequired = seppv1.Reason_IDEMPOTENCY_KEY_REQUIRED.String()
	ReasonDuplicateJob           = seppv1.Reason_DUPLICATE_JOB.String()
	ReasonDedupRuleViolated      = seppv1.Reason_DEDUP_RULE_VIOLATED.String()
	ReasonUnknownQueue           = seppv1.Reason_UNKNOWN_QUEUE.String()
	ReasonUnknownJobType         = seppv1.Reason_UNKNOWN_JOB_TYPE.String()
	ReasonPayloadTooLarge        = seppv1.Reason_PAYLOAD_TOO_LARGE.String()
	ReasonBatchTooLarge          = seppv1.Reason_BATCH_TOO_LARGE.String()
	ReasonInvalidField           = seppv1.Reason_INVALID_FIELD.String()
	ReasonJobNotFound            = seppv1.Reason_JOB_NOT_FOUND.String()
	ReasonLeaseLost              = seppv1.Reason_LEASE_LOST.String()
	ReasonEffectInProgress       = seppv1.Reason_EFFECT_IN_PROGRESS.String()
	ReasonUnauthenticated        = seppv1.Reason_UNAUTHENTICATED.String()
	ReasonPermissionDenied       = seppv1.Reason_PERMISSION_DENIED.String()
	ReasonLimitExceeded          = seppv1.Reason_LIMIT_EXCEEDED.String()
	// ReasonUnavailable: the server is shutting down or the request ran out
	// of time before its write was acknowledged; retrying with the same key
	// is safe.
	ReasonUnavailable = seppv1.Reason_UNAVAILABLE.String()
	// ReasonInternal: a bug or a storage failure; the message says which.
	ReasonInternal = seppv1.Reason_INTERNAL.String()
	// ReasonBackupUnsupported: CreateBackup on a store that cannot copy
	// itself (PostgreSQL).
	ReasonBackupUnsupported = seppv1.Reason_BACKUP_UNSUPPORTED.String()
)

// apiError is an error bound for the wire: a Connect code, a stable reason,
// a message that says what to do, and optional metadata (e.g. the index of
// the failing job of an atomic batch).
type apiError struct {
	code     connect.Code
	reason   string
	msg      string
	metadata map[string]string
}

func (e *apiError) Error() string { return e.msg }

func newError(code connect.Code, reason, format string, args ...any) *apiError {
	return &apiError{code: code, reason: reason, msg: fmt.Sprintf(format, args...)}
}

func invalidField(field, format string, args ...any) *apiError {
	e := newError(connect.CodeInvalidArgument, ReasonInvalidField, "%s: %s", field, fmt.Sprintf(format, args...))
	e.metadata = map[string]string{"field": field}
	return e
}

// atIndex returns a copy of e naming job i of a batch.
func (e *apiError) atIndex(i int) *apiError {
	c := *e
	c.msg = fmt.Sprintf("jobs[%d]: %s", i, e.msg)
	c.metadata = map[string]string{"index": strconv.Itoa(i)}
	for k, v := range e.metadata {
		c.metadata[k] = v
	}
	return &c
}

// toAPIError is the one place an error from the store or the server becomes
// a wire error.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	switch {
	case errors.Is(err, store.ErrJobNotFound):
		return newError(connect.CodeNotFound, ReasonJobNotFound,
			"job not found: it never existed, or was deleted (by retention or a dead-letter purge); look up its idempotency key to see what became of it")
	case errors.Is(err, store.ErrIdempotencyKeyConflict):
		return newError(connect.CodeAlreadyExists, ReasonIdempotencyKeyConflict,
			"idempotency key already used with a different job type or payload on this queue (key_reuse = \"reject_mismatch\"); use a new key for a different job, or resend the original payload")
	case errors.Is(err, store.ErrDuplicateJob):
		var de *store.DuplicateJobError
		if !errors.As(err, &de) {
			break
		}
		if de.InBatch {
			e := newError(connect.CodeAlreadyExists, ReasonDuplicateJob,
				"jobs[%d] of this batch has the same idempotency key, and the queue rejects duplicates (on_duplicate = \"reject\"); the batch is atomic, so nothing of it was written: send each key once", de.Index)
			e.metadata = map[string]string{"original_index": strconv.Itoa(de.Index)}
			return e
		}
		e := newError(connect.CodeAlreadyExists, ReasonDuplicateJob,
			"a job with this idempotency key already exists on this queue, %s, and the queue rejects duplicates (on_duplicate = \"reject\") until %s; the original stands: look the key up to see what became of it",
			formatJobID(de.JobID), de.ExpiresAt.UTC().Format(time.RFC3339))
		e.metadata = map[string]string{"job_id": formatJobID(de.JobID)}
		return e
	case errors.Is(err, store.ErrDedupRuleViolated):
		var re *store.RuleViolationError
		if !errors.As(err, &re) {
			break
		}
		if re.InBatch {
			limit := max(re.Limit, 1)
			msg := fmt.Sprintf("rule %q: jobs[%d] of this batch has the same values in the rule's fields; the batch is atomic, so nothing of it was written: send one job for them", re.Rule, re.Index)
			if limit > 1 {
				msg = fmt.Sprintf("rule %q: with jobs[%d] and the jobs before it, this batch holds more jobs with the same values in the rule's fields than the rule's limit (%d) allows within its window; the batch is atomic, so nothing of it was written: send at most %d such jobs, or set action = \"delay\" on the rule", re.Rule, re.Index, limit, limit)
			}
			e := newError(connect.CodeFailedPrecondition, ReasonDedupRuleViolated, "%s", msg)
			e.metadata = map[string]string{"rule": re.Rule, "limit": strconv.Itoa(limit), "original_index": strconv.Itoa(re.Index)}
			return e
		}
		frees := re.FreesAt.UTC().Format(time.RFC3339Nano)
		limit := max(re.Limit, 1)
		if limit > 1 {
			e := newError(connect.CodeFailedPrecondition, ReasonDedupRuleViolated,
				"rule %q: %d jobs with the same values in the rule's fields were enqueued on this queue within the rule's window, its limit; the window has room again at %s: enqueue after that time, or set action = \"delay\" on the rule to have such jobs scheduled then",
				re.Rule, limit, frees)
			e.metadata = map[string]string{"rule": re.Rule, "limit": strconv.Itoa(limit), "frees_at": frees}
			return e
		}
		e := newError(connect.CodeFailedPrecondition, ReasonDedupRuleViolated,
			"rule %q: job %s, enqueued on this queue within the rule's window, has the same values in the rule's fields; it holds them until %s: this is likely the same request again under another key, so look that job up, or enqueue after that time",
			re.Rule, formatJobID(re.JobID), frees)
		e.metadata = map[string]string{"rule": re.Rule, "limit": "1", "job_id": formatJobID(re.JobID), "frees_at": frees}
		return e
	case errors.Is(err, store.ErrStaleEnqueue):
		return newError(connect.CodeUnavailable, ReasonUnavailable,
			"the request waited (on the database or the store's writer) until after the sweeper had passed the time it arrived at, and may have deleted a record it would have been judged by, so nothing was written; retry it with the same idempotency key")
	case errors.Is(err, store.ErrUnavailable):
		return newError(connect.CodeUnavailable, ReasonUnavailable,
			"the database is unreachable or restarting; retry (a keyed enqueue is safe to resend with the same key)")
	case errors.Is(err, store.ErrClosed):
		return newError(connect.CodeUnavailable, ReasonUnavailable, "server is shutting down; retry against another node or after restart")
	case errors.Is(err, context.Canceled):
		return newError(connect.CodeCanceled, ReasonUnavailable, "request cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return newError(connect.CodeDeadlineExceeded, ReasonUnavailable, "deadline exceeded before the write was acknowledged; retry with the same idempotency key")
	}
	return newError(connect.CodeInternal, ReasonInternal, "internal error: %v", err)
}

func (e *apiError) errorInfo() *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: e.reason, Domain: ErrorDomain, Metadata: e.metadata}
}

// connectError renders err for connect-go handlers.
func connectError(err error) error {
	e := toAPIError(err)
	ce := connect.NewError(e.code, errors.New(e.msg))
	if d, derr := connect.NewErrorDetail(e.errorInfo()); derr == nil {
		ce.AddDetail(d)
	}
	return ce
}

// grpcError renders err for grpc-go handlers. Connect codes and gRPC codes
// share their numbers.
func grpcError(err error) error {
	e := toAPIError(err)
	st := status.New(codes.Code(e.code), e.msg)
	if withInfo, derr := st.WithDetails(e.errorInfo()); derr == nil {
		st = withInfo
	}
	return st.Err()
}

// codeOf parses a Connect code name; unknown names are Internal.
func codeOf(name string) connect.Code {
	var c connect.Code
	if err := c.UnmarshalText([]byte(name)); err != nil {
		return connect.CodeInternal
	}
	return c
}
