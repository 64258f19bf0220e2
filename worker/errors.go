package worker

import (
	"fmt"
	"time"
)

// Permanent marks err as permanent: the job is dead-lettered at once instead
// of retried.
func Permanent(err error) error { return &permanentError{err} }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// RetryAfter retries the job after d instead of the queue's backoff (while it
// has attempts left).
func RetryAfter(err error, d time.Duration) error { return &retryAfterError{err, d} }

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return fmt.Sprintf("%v (retry after %v)", e.err, e.after) }
func (e *retryAfterError) Unwrap() error { return e.err }
