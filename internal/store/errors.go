package store

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by every backend, compared with errors.Is.
var (
	// ErrJobNotFound: no job has this id (never existed, or deleted).
	ErrJobNotFound = errors.New("job not found")
	// ErrDedupNotFound: no live dedup record for (queue, key).
	ErrDedupNotFound = errors.New("idempotency key not found")
	// ErrIdempotencyKeyConflict: a live record holds the key with a different
	// payload fingerprint, and the queue rejects mismatches.
	ErrIdempotencyKeyConflict = errors.New("idempotency key conflict")
	// ErrDuplicateJob: a live record holds the key and the queue rejects
	// duplicates (on_duplicate = "reject"); the error is a
	// *DuplicateJobError naming the original.
	ErrDuplicateJob = errors.New("duplicate job")
	// ErrDedupRuleViolated: a uniqueness rule of the queue matched a job
	// enqueued within the rule's window; the error is a *RuleViolationError.
	ErrDedupRuleViolated = errors.New("dedup rule violated")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
)

// JobError names the job of a batch that made an atomic batch fail.
type JobError struct {
	Index int
	Err   error
}

func (e *JobError) Error() string { return fmt.Sprintf("job %d: %v", e.Index, e.Err) }

func (e *JobError) Unwrap() error { return e.Err }

// ErrLeaseLost: the lease token does not hold the job's lease (the lease
// expired, or the job was redelivered, finished or cancelled).
var ErrLeaseLost = errors.New("lease lost")

// ErrEffectNotFound: no live record for (scope, key).
var ErrEffectNotFound = errors.New("effect not found")

// ErrScheduleNotFound: no node has started a schedule of this name.
var ErrScheduleNotFound = errors.New("schedule not found")

// ErrUnavailable: the database could not be reached or is restarting; the
// operation's outcome is unknown, and a keyed retry is safe.
var ErrUnavailable = errors.New("database unavailable")

// ErrStaleEnqueue: a keyed enqueue reached the store after a sweep had
// deleted dedup records up to a time at or after the enqueue's Now, so the
// records it would have been judged against may be gone; it created nothing.
// errors.Is(err, ErrUnavailable) holds for it: a retry, which reads the
// clock again, is safe with the same key.
var ErrStaleEnqueue error = staleEnqueue{}

type staleEnqueue struct{}

func (staleEnqueue) Error() string {
	return "the request waited until after the sweep had passed its time; retry it with the same idempotency key"
}

// Is makes errors.Is(err, ErrUnavailable) hold.
func (staleEnqueue) Is(target error) bool { return target == ErrUnavailable }

// ErrSchemaTooNew: the stored data was written by a newer sepp, whose
// schema this binary does not know; Open refuses it.
var ErrSchemaTooNew = errors.New("schema newer than this binary")

// DuplicateJobError is the error of an enqueue rejected because its key is
// already recorded on a queue that rejects duplicates. errors.Is(err,
// ErrDuplicateJob) holds for it.
type DuplicateJobError struct {
	JobID     JobID     // the original job
	ExpiresAt time.Time // when the record stops being honoured
	// InBatch: the original is job Index of the same atomic batch, which
	// failed whole, so JobID never came to exist.
	InBatch bool
	Index   int
}

func (e *DuplicateJobError) Error() string { return ErrDuplicateJob.Error() }

// Is makes errors.Is(err, ErrDuplicateJob) hold.
func (e *DuplicateJobError) Is(target error) bool { return target == ErrDuplicateJob }

// RuleViolationError is the error of an enqueue refused by a uniqueness
// rule. errors.Is(err, ErrDedupRuleViolated) holds for it.
type RuleViolationError struct {
	Rule    string    // the rule's name
	JobID   JobID     // the job that took the rule key last
	FreesAt time.Time // when the rule's window has room again
	Limit   int       // the rule's limit
	// InBatch: the holder is job Index of the same atomic batch, which
	// failed whole, so JobID never came to exist.
	InBatch bool
	Index   int
}

func (e *RuleViolationError) Error() string { return ErrDedupRuleViolated.Error() + ": " + e.Rule }

// Is makes errors.Is(err, ErrDedupRuleViolated) hold.
func (e *RuleViolationError) Is(target error) bool { return target == ErrDedupRuleViolated }
