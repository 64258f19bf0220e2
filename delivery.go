package sepp

import (
	"context"
	"time"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// ReserveRequest asks for jobs to work on. Most programs use package worker,
// which reserves, extends leases and reports outcomes for them.
type ReserveRequest struct {
	// Queues to reserve from, at least one.
	Queues []string
	// WorkerID names the worker in logs and listings. Optional.
	WorkerID string
	// MaxJobs is the most jobs to lease at once. Zero: 1.
	MaxJobs int
	// Lease is how long each job is leased. Zero: the queue's lease_ms.
	Lease time.Duration
	// Wait is how long to wait for a job when none is ready (long poll).
	Wait time.Duration
}

// Reservation is one leased job.
type Reservation struct {
	Job *Job
	// LeaseToken must accompany Complete, Fail and ExtendLease.
	LeaseToken string
	// Attempt counts the deliveries of this job, this one included.
	Attempt        int32
	LeaseExpiresAt time.Time
	// Lease is the length of the lease granted.
	Lease time.Duration
}

// Reserve leases jobs. It returns none when the wait ends with nothing ready.
func (c *Client) Reserve(ctx context.Context, req ReserveRequest) ([]Reservation, error) {
	res, err := c.workers.Reserve(ctx, &seppv1.ReserveRequest{
		Queues: req.Queues, WorkerId: req.WorkerID, MaxJobs: int32(req.MaxJobs),
		LeaseMs: req.Lease.Milliseconds(), WaitMs: req.Wait.Milliseconds(),
	})
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	out := make([]Reservation, len(res.GetJobs()))
	for i, r := range res.GetJobs() {
		out[i] = Reservation{Job: jobFromProto(r.GetJob()), LeaseToken: r.GetLeaseToken(), Attempt: r.GetAttempt(),
			LeaseExpiresAt: r.GetLeaseExpiresAt().AsTime(), Lease: time.Duration(r.GetLeaseMs()) * time.Millisecond}
	}
	return out, nil
}

// Complete finishes a job, with an optional result that GetJob and
// LookupIdempotencyKey return. A token that no longer holds the lease gets
// ErrLeaseLost. After a transport error it is resent: the server answers a
// repeat of a committed Complete with success.
func (c *Client) Complete(ctx context.Context, jobID, leaseToken string, result []byte) error {
	req := &seppv1.CompleteRequest{JobId: jobID, LeaseToken: leaseToken, Result: result}
	return c.resend(ctx, func() error {
		_, err := c.workers.Complete(ctx, req)
		return fromRPC(ctx, err)
	})
}

// FailOptions steer what happens to a failed job.
type FailOptions struct {
	// RetryAfter, when set, replaces the queue's backoff for this retry.
	RetryAfter *time.Duration
	// Permanent dead-letters the job now, whatever its attempts.
	Permanent bool
}

// FailResult says what became of a failed job.
type FailResult struct {
	// State is JobStateScheduled (it will be retried at NextRunAt) or
	// JobStateDead.
	State     JobState
	NextRunAt time.Time
	// AlreadyFailed: this Fail had been committed before (a resent call
	// whose first answer was lost); nothing changed.
	AlreadyFailed bool
}

// Fail reports a failed attempt.
func (c *Client) Fail(ctx context.Context, jobID, leaseToken, errText string, opts FailOptions) (*FailResult, error) {
	req := &seppv1.FailRequest{JobId: jobID, LeaseToken: leaseToken, Error: errText, Permanent: opts.Permanent}
	if opts.RetryAfter != nil {
		ms := opts.RetryAfter.Milliseconds()
		req.RetryAfterMs = &ms
	}
	var res *seppv1.FailResponse
	err := c.resend(ctx, func() (err error) {
		res, err = c.workers.Fail(ctx, req)
		return fromRPC(ctx, err)
	})
	if err != nil {
		return nil, err
	}
	out := &FailResult{State: stateFromProto(res.GetState()), AlreadyFailed: res.GetAlreadyFailed()}
	if res.NextRunAt != nil {
		out.NextRunAt = res.NextRunAt.AsTime()
	}
	return out, nil
}

// ExtendLease keeps a lease alive for another lease, from now.
func (c *Client) ExtendLease(ctx context.Context, jobID, leaseToken string, lease time.Duration) (time.Time, error) {
	res, err := c.workers.ExtendLease(ctx, &seppv1.ExtendLeaseRequest{JobId: jobID, LeaseToken: leaseToken, LeaseMs: lease.Milliseconds()})
	if err != nil {
		return time.Time{}, fromRPC(ctx, err)
	}
	return res.GetLeaseExpiresAt().AsTime(), nil
}

// Completion is one job to complete in a CompleteBatch.
type Completion struct {
	JobID      string
	LeaseToken string
	Result     []byte
}

// CompleteBatch completes many jobs in one RPC, each judged alone, and
// returns one error per job (nil, or an *Error such as ErrLeaseLost).
func (c *Client) CompleteBatch(ctx context.Context, completions []Completion) ([]error, error) {
	req := &seppv1.CompleteBatchRequest{Completions: make([]*seppv1.CompleteRequest, len(completions))}
	for i, cm := range completions {
		req.Completions[i] = &seppv1.CompleteRequest{JobId: cm.JobID, LeaseToken: cm.LeaseToken, Result: cm.Result}
	}
	var res *seppv1.CompleteBatchResponse
	err := c.resend(ctx, func() (err error) {
		res, err = c.workers.CompleteBatch(ctx, req)
		return fromRPC(ctx, err)
	})
	if err != nil {
		return nil, err
	}
	if len(res.GetResults()) != len(completions) {
		return nil, &Error{Code: "internal", Reason: ErrInternal.Error(), Message: "server answered a batch with the wrong number of results", Index: -1}
	}
	errs := make([]error, len(completions))
	for i, r := range res.GetResults() {
		if e := r.GetError(); e != nil {
			errs[i] = &Error{Code: e.GetCode(), Reason: e.GetReason(), Message: e.GetMessage(), Index: -1}
		}
	}
	return errs, nil
}
