package sepp

import (
	"context"
	"time"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// JobState is where a job is in its lifecycle.
type JobState string

// The job states. JobStateDeleted is reported by LookupIdempotencyKey when the
// job is gone but its dedup record still lives.
const (
	JobStateScheduled JobState = "scheduled"
	JobStateAvailable JobState = "available"
	JobStateReserved  JobState = "reserved"
	JobStateCompleted JobState = "completed"
	JobStateDead      JobState = "dead"
	JobStateCancelled JobState = "cancelled"
	JobStateDeleted   JobState = "deleted"
	JobStateUnknown   JobState = "unknown"
)

func stateFromProto(s seppv1.JobState) JobState {
	switch s {
	case seppv1.JobState_JOB_STATE_SCHEDULED:
		return JobStateScheduled
	case seppv1.JobState_JOB_STATE_AVAILABLE:
		return JobStateAvailable
	case seppv1.JobState_JOB_STATE_RESERVED:
		return JobStateReserved
	case seppv1.JobState_JOB_STATE_COMPLETED:
		return JobStateCompleted
	case seppv1.JobState_JOB_STATE_DEAD:
		return JobStateDead
	case seppv1.JobState_JOB_STATE_CANCELLED:
		return JobStateCancelled
	case seppv1.JobState_JOB_STATE_DELETED:
		return JobStateDeleted
	}
	return JobStateUnknown
}

func stateToProto(s JobState) seppv1.JobState {
	for p := seppv1.JobState_JOB_STATE_SCHEDULED; p <= seppv1.JobState_JOB_STATE_DELETED; p++ {
		if stateFromProto(p) == s {
			return p
		}
	}
	return seppv1.JobState_JOB_STATE_UNSPECIFIED
}

// Job is a job as the server stores it.
type Job struct {
	ID             string            `json:"jobId"`
	Queue          string            `json:"queue"`
	JobType        string            `json:"jobType"`
	Payload        []byte            `json:"payload"`
	IdempotencyKey string            `json:"idempotencyKey,omitempty"` // empty: none
	Priority       int32             `json:"priority"`
	RunAt          time.Time         `json:"runAt"`
	MaxAttempts    int32             `json:"maxAttempts"`
	Attempts       int32             `json:"attempts"`
	Headers        map[string]string `json:"headers,omitempty"`
	State          JobState          `json:"state"`
	CreatedAt      time.Time         `json:"createdAt"`
	FinalizedAt    time.Time         `json:"finalizedAt,omitzero"` // zero until completed, dead or cancelled
	Result         []byte            `json:"result,omitempty"`
	LastError      string            `json:"lastError,omitempty"`
	// FollowsJobID: a follow-up (when_running = "run_again") waiting for
	// the job named here to end.
	FollowsJobID string `json:"followsJobId,omitempty"`
	// ConcurrencyKey and RateKey are the job's keys under its queue's
	// [queues.concurrency] and [queues.rate], on queues that have them.
	ConcurrencyKey string `json:"concurrencyKey,omitempty"`
	RateKey        string `json:"rateKey,omitempty"`
	// HeldBy says what holds back a job whose run-at has come, if anything;
	// HeldUntil, for JobHoldRate, when its key's rate window has room.
	HeldBy    JobHold   `json:"heldBy,omitempty"`
	HeldUntil time.Time `json:"heldUntil,omitzero"`
}

// JobHold is what holds back a job whose run-at has come.
type JobHold string

// The holds.
const (
	// JobHoldFollowUp: a follow-up waiting for the job it follows to end.
	JobHoldFollowUp JobHold = "follow_up"
	// JobHoldConcurrency: its concurrency key is at its limit, or, on an
	// ordered queue, an earlier job of its key has not finished.
	JobHoldConcurrency JobHold = "concurrency"
	// JobHoldRate: its rate key had its limit of jobs reserved within the
	// period.
	JobHoldRate JobHold = "rate"
)

func holdFromProto(h seppv1.JobHold) JobHold {
	switch h {
	case seppv1.JobHold_JOB_HOLD_FOLLOW_UP:
		return JobHoldFollowUp
	case seppv1.JobHold_JOB_HOLD_CONCURRENCY:
		return JobHoldConcurrency
	case seppv1.JobHold_JOB_HOLD_RATE:
		return JobHoldRate
	}
	return ""
}

func jobFromProto(p *seppv1.Job) *Job {
	j := &Job{
		ID: p.GetJobId(), Queue: p.GetQueue(), JobType: p.GetJobType(), Payload: p.GetPayload(),
		IdempotencyKey: p.GetIdempotencyKey(), Priority: p.GetPriority(), MaxAttempts: p.GetMaxAttempts(),
		Attempts: p.GetAttempts(), Headers: p.GetHeaders(), State: stateFromProto(p.GetState()),
		Result: p.GetResult(), LastError: p.GetLastError(), FollowsJobID: p.GetFollowsJobId(),
		ConcurrencyKey: p.GetConcurrencyKey(), RateKey: p.GetRateKey(), HeldBy: holdFromProto(p.GetHeldBy()),
	}
	if p.HeldUntil != nil {
		j.HeldUntil = p.HeldUntil.AsTime()
	}
	if p.RunAt != nil {
		j.RunAt = p.RunAt.AsTime()
	}
	if p.CreatedAt != nil {
		j.CreatedAt = p.CreatedAt.AsTime()
	}
	if p.FinalizedAt != nil {
		j.FinalizedAt = p.FinalizedAt.AsTime()
	}
	return j
}

// GetJob reads a job. It fails with ErrJobNotFound for an unknown id.
func (c *Client) GetJob(ctx context.Context, jobID string) (*Job, error) {
	res, err := c.jobs.GetJob(ctx, &seppv1.GetJobRequest{JobId: jobID})
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	return jobFromProto(res.GetJob()), nil
}

// CancelJob cancels a job that has not finished and returns it. A finished job
// is returned unchanged.
func (c *Client) CancelJob(ctx context.Context, jobID string) (*Job, error) {
	res, err := c.jobs.CancelJob(ctx, &seppv1.CancelJobRequest{JobId: jobID})
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	return jobFromProto(res.GetJob()), nil
}

// lookupKeyLimit is the key length a lookup or release accepts: the
// configured limit, but never below the 64 hex digits of a content-derived
// key (dedup_by_content), as on the server.
func lookupKeyLimit(limit int) int {
	if limit <= 0 {
		return limit
	}
	return max(limit, 64)
}

// KeyLookup is what the server knows of an idempotency key.
type KeyLookup struct {
	// Found is false when no live record exists: never enqueued, expired, or
	// released.
	Found           bool      `json:"found"`
	JobID           string    `json:"jobId,omitempty"`
	FirstEnqueuedAt time.Time `json:"firstEnqueuedAt,omitzero"`
	ExpiresAt       time.Time `json:"expiresAt,omitzero"`
	// Hits counts the enqueues deduplicated against this record.
	Hits int64 `json:"hits"`
	// State is the job's state now, or JobStateDeleted when it is gone.
	State JobState `json:"state,omitempty"`
	// Result is the job's result, if it completed with one.
	Result []byte `json:"result,omitempty"`
	// Policy is the queue's dedup policy where it is not the default, such
	// as `on_duplicate=reject`; empty for the default.
	Policy string `json:"policy,omitempty"`
	// IdempotencyKey is the key looked up: the one given, or the one the
	// server derived from the payload given (LookupIdempotencyKeyByPayload).
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// LookupIdempotencyKey answers "was this already enqueued, and what became of
// it?" without enqueueing anything.
func (c *Client) LookupIdempotencyKey(ctx context.Context, queue, key string) (*KeyLookup, error) {
	if err := checkKey(key, lookupKeyLimit(c.cfg.MaxIdempotencyKeyBytes)); err != nil {
		return nil, err
	}
	return c.lookup(ctx, &seppv1.LookupIdempotencyKeyRequest{Queue: queue, IdempotencyKey: key})
}

// LookupIdempotencyKeyByPayload is LookupIdempotencyKey for the key a queue
// with key_fields derives from payload: the server derives it as an enqueue
// of payload would, and KeyLookup.IdempotencyKey says which it was.
func (c *Client) LookupIdempotencyKeyByPayload(ctx context.Context, queue string, payload []byte) (*KeyLookup, error) {
	return c.lookup(ctx, &seppv1.LookupIdempotencyKeyRequest{Queue: queue, Payload: payload})
}

func (c *Client) lookup(ctx context.Context, req *seppv1.LookupIdempotencyKeyRequest) (*KeyLookup, error) {
	res, err := c.jobs.LookupIdempotencyKey(ctx, req)
	if err != nil {
		return nil, fromRPC(ctx, err)
	}
	l := &KeyLookup{Found: res.GetFound(), IdempotencyKey: res.GetIdempotencyKey()}
	if !l.Found {
		return l, nil
	}
	l.JobID = res.GetJobId()
	l.FirstEnqueuedAt = res.GetFirstEnqueuedAt().AsTime()
	l.ExpiresAt = res.GetExpiresAt().AsTime()
	l.Hits = res.GetHits()
	l.State = stateFromProto(res.GetState())
	l.Result = res.GetResult()
	l.Policy = res.GetPolicy()
	return l, nil
}

// ReleaseIdempotencyKey deletes the key's dedup record now, so the next
// enqueue with it creates a new job. It never touches the job. It reports
// whether a live record was released and the job it pointed to.
func (c *Client) ReleaseIdempotencyKey(ctx context.Context, queue, key string) (released bool, jobID string, err error) {
	if err := checkKey(key, lookupKeyLimit(c.cfg.MaxIdempotencyKeyBytes)); err != nil {
		return false, "", err
	}
	res, err := c.jobs.ReleaseIdempotencyKey(ctx, &seppv1.ReleaseIdempotencyKeyRequest{Queue: queue, IdempotencyKey: key})
	if err != nil {
		return false, "", fromRPC(ctx, err)
	}
	return res.GetReleased(), res.GetJobId(), nil
}

// ReleaseIdempotencyKeyByPayload is ReleaseIdempotencyKey for the key a
// queue with key_fields derives from payload, derived by the server; it
// also returns that key.
func (c *Client) ReleaseIdempotencyKeyByPayload(ctx context.Context, queue string, payload []byte) (released bool, jobID, key string, err error) {
	res, err := c.jobs.ReleaseIdempotencyKey(ctx, &seppv1.ReleaseIdempotencyKeyRequest{Queue: queue, Payload: payload})
	if err != nil {
		return false, "", "", fromRPC(ctx, err)
	}
	return res.GetReleased(), res.GetJobId(), res.GetIdempotencyKey(), nil
}
