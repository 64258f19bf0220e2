package sepp

import (
	"context"
	"errors"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors, one per reason the server can give (the values of the
// proto enum sepp.v1.Reason, less the two only webhooks answer with). Compare with errors.Is:
//
//	if errors.Is(err, sepp.ErrIdempotencyKeyTooLong) { ... }
//
// The error itself is an *Error carrying the server's message.
var (
	// ErrIdempotencyKeyTooLong: the key is longer than the server's
	// max_idempotency_key_bytes (256 by default), counted in bytes.
	ErrIdempotencyKeyTooLong = errors.New(seppv1.Reason_IDEMPOTENCY_KEY_TOO_LONG.String())
	// ErrIdempotencyKeyEmpty: a key was sent but is empty.
	ErrIdempotencyKeyEmpty = errors.New(seppv1.Reason_IDEMPOTENCY_KEY_EMPTY.String())
	// ErrIdempotencyKeyConflict: the key is recorded with a different job
	// type or payload on a queue with key_reuse = "reject_mismatch".
	ErrIdempotencyKeyConflict = errors.New(seppv1.Reason_IDEMPOTENCY_KEY_CONFLICT.String())
	// ErrIdempotencyKeyRequired: the queue has require_key = true and the
	// job has no key, given or derived.
	ErrIdempotencyKeyRequired = errors.New(seppv1.Reason_IDEMPOTENCY_KEY_REQUIRED.String())
	// ErrDuplicateJob: the key is already recorded on a queue with
	// on_duplicate = "reject"; Error.Metadata["job_id"] names the original
	// (of a single enqueue and of a batch item alike).
	ErrDuplicateJob = errors.New(seppv1.Reason_DUPLICATE_JOB.String())
	// ErrDedupRuleViolated: a [[queues.rules]] rule with action = "reject"
	// found its limit of jobs enqueued on the queue within its window;
	// Error.Metadata has "rule", "limit", "frees_at" (when the window has
	// room), and, when the limit is 1, "job_id" (the job that holds it).
	ErrDedupRuleViolated = errors.New(seppv1.Reason_DEDUP_RULE_VIOLATED.String())
	// ErrUnknownQueue: the queue is not declared and the server is strict.
	ErrUnknownQueue = errors.New(seppv1.Reason_UNKNOWN_QUEUE.String())
	// ErrUnknownJobType: the queue's job_types do not include the job type.
	ErrUnknownJobType = errors.New(seppv1.Reason_UNKNOWN_JOB_TYPE.String())
	// ErrPayloadTooLarge: the payload exceeds max_payload_bytes.
	ErrPayloadTooLarge = errors.New(seppv1.Reason_PAYLOAD_TOO_LARGE.String())
	// ErrBatchTooLarge: the batch has more jobs than max_batch_size.
	ErrBatchTooLarge = errors.New(seppv1.Reason_BATCH_TOO_LARGE.String())
	// ErrInvalidField: another field is malformed; the message names it.
	ErrInvalidField = errors.New(seppv1.Reason_INVALID_FIELD.String())
	// ErrJobNotFound: no job has this id (or it was deleted by retention).
	ErrJobNotFound = errors.New(seppv1.Reason_JOB_NOT_FOUND.String())
	// ErrLeaseLost: the lease token no longer holds the job's lease.
	ErrLeaseLost = errors.New(seppv1.Reason_LEASE_LOST.String())
	// ErrEffectInProgress: another worker holds the effect.
	ErrEffectInProgress = errors.New(seppv1.Reason_EFFECT_IN_PROGRESS.String())
	// ErrUnauthenticated: the server has [auth] on and the call carried no
	// token, or one that matches none (Config.Token, SEPP_TOKEN).
	ErrUnauthenticated = errors.New(seppv1.Reason_UNAUTHENTICATED.String())
	// ErrPermissionDenied: the token's roles or queues do not cover this
	// call; the message names what is missing.
	ErrPermissionDenied = errors.New(seppv1.Reason_PERMISSION_DENIED.String())
	// ErrLimitExceeded: a server limit was hit (queues per reserve, long
	// polls, connections); the message names the config key.
	ErrLimitExceeded = errors.New(seppv1.Reason_LIMIT_EXCEEDED.String())
	// ErrUnavailable: the server could not be reached, or did not answer in
	// time. A keyed enqueue is safe to retry with the same key.
	ErrUnavailable = errors.New(seppv1.Reason_UNAVAILABLE.String())
	// ErrInternal: the server failed; the message says why.
	ErrInternal = errors.New(seppv1.Reason_INTERNAL.String())
	// ErrBackupUnsupported: a backup asked of a server whose store cannot
	// copy itself (the PostgreSQL backend), which PostgreSQL's own tools
	// back up.
	ErrBackupUnsupported = errors.New(seppv1.Reason_BACKUP_UNSUPPORTED.String())
)

var sentinels = map[string]error{}

func init() {
	for _, e := range []error{
		ErrIdempotencyKeyTooLong, ErrIdempotencyKeyEmpty, ErrIdempotencyKeyConflict, ErrIdempotencyKeyRequired,
		ErrDuplicateJob, ErrDedupRuleViolated, ErrUnknownQueue,
		ErrUnknownJobType, ErrPayloadTooLarge, ErrBatchTooLarge, ErrInvalidField, ErrJobNotFound,
		ErrLeaseLost, ErrEffectInProgress, ErrUnauthenticated, ErrPermissionDenied, ErrLimitExceeded,
		ErrUnavailable, ErrInternal, ErrBackupUnsupported,
	} {
		sentinels[e.Error()] = e
	}
}

// NotDeadError is what RequeueDeadJobs and PurgeDeadJobs return, beside the
// count of the jobs they did requeue or purge, when some of DeadJobs.JobIDs
// named no dead job (of DeadJobs.Queue, when given): unknown, deleted, or in
// another state. errors.Is(err, ErrJobNotFound) holds for it.
type NotDeadError struct {
	// JobIDs are those ids, each once, in the order given.
	JobIDs []string
}

func (e *NotDeadError) Error() string {
	return "sepp: JOB_NOT_FOUND: no dead job with id " + strings.Join(e.JobIDs, ", ")
}

// Is makes errors.Is(err, ErrJobNotFound) hold.
func (e *NotDeadError) Is(target error) bool { return target == ErrJobNotFound }

// Error is an error answered by the server (or found by the client's own
// checks before sending).
type Error struct {
	// Code is the Connect code name, e.g. "invalid_argument".
	Code string
	// Reason is the stable reason, e.g. "IDEMPOTENCY_KEY_TOO_LONG".
	Reason string
	// Message says what went wrong and what to do.
	Message string
	// Index is the failing job of an atomic batch, or -1.
	Index int
	// Metadata is the server's detail for the reason, such as the original
	// "job_id" of DUPLICATE_JOB; nil when there is none.
	Metadata map[string]string
}

func (e *Error) Error() string {
	return "sepp: " + e.Reason + ": " + e.Message
}

// Is makes errors.Is(err, sepp.ErrXxx) match the error's reason.
func (e *Error) Is(target error) bool {
	s, ok := sentinels[e.Reason]
	return ok && s == target
}

// connectCodeNames are the Connect names of the gRPC codes.
var connectCodeNames = map[codes.Code]string{
	codes.Canceled: "canceled", codes.Unknown: "unknown", codes.InvalidArgument: "invalid_argument",
	codes.DeadlineExceeded: "deadline_exceeded", codes.NotFound: "not_found", codes.AlreadyExists: "already_exists",
	codes.PermissionDenied: "permission_denied", codes.ResourceExhausted: "resource_exhausted",
	codes.FailedPrecondition: "failed_precondition", codes.Aborted: "aborted", codes.OutOfRange: "out_of_range",
	codes.Unimplemented: "unimplemented", codes.Internal: "internal", codes.Unavailable: "unavailable",
	codes.DataLoss: "data_loss", codes.Unauthenticated: "unauthenticated",
}

// fromRPC turns an RPC error into an *Error, or into ctx's own error when
// the caller's context ended (ctx may be nil).
func fromRPC(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return &Error{Code: "unavailable", Reason: ErrUnavailable.Error(), Message: err.Error(), Index: -1}
	}
	e := &Error{Code: connectCodeNames[st.Code()], Message: st.Message(), Index: -1}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			e.Reason = info.GetReason()
			e.Metadata = info.GetMetadata()
			if i, err := strconv.Atoi(info.GetMetadata()["index"]); err == nil {
				e.Index = i
			}
		}
	}
	if e.Reason == "" {
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded:
			e.Reason = ErrUnavailable.Error()
		case codes.NotFound:
			e.Reason = ErrJobNotFound.Error()
		default:
			e.Reason = ErrInternal.Error()
		}
	}
	return e
}

// retryable reports whether err leaves an enqueue's fate unknown (the server
// may or may not have written it), so that a keyed enqueue should be resent.
func retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == ErrUnavailable.Error()
}
