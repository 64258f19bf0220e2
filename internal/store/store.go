// Package store defines the one seam between Sepp's server and its storage
// backends: the Store interface, at the level of Sepp's operations (enqueue a
// batch with dedup, read a job, cancel, look up and release dedup records,
// sweep), its parameter types and its sentinel errors.
//
// Validation that depends on configuration (key length, payload size, strict
// mode, job types) happens before a call reaches the store; the store makes each
// operation atomic and durable, and decides everything that needs stored state
// (is this key already recorded? does the payload match?). Every backend runs
// the conformance suite in package storetest.
package store

import (
	"context"
	"crypto/sha256"
	"time"
)

// Store is implemented by every backend. All methods are safe for concurrent
// use. A method that returns without error has made its writes durable.
type Store interface {
	// EnqueueBatch enqueues jobs with deduplication. It returns one result per
	// job, in order. With Atomic set, either every job is written (dedup hits
	// count as success) or nothing is, and the error is a *JobError naming the
	// first job that failed. A batch with a key or a rule key whose Now is at
	// or before the dedup horizon a sweep raised fails whole, atomic or not,
	// with ErrStaleEnqueue (storerule.Stale).
	EnqueueBatch(ctx context.Context, params *EnqueueBatchParams) ([]EnqueueResult, error)

	// GetJob reads one job. It returns ErrJobNotFound for unknown ids.
	GetJob(ctx context.Context, params *GetJobParams) (*Job, error)

	// CancelJob moves a job that has not finished to JobStateCancelled. A job
	// that already finished is returned unchanged.
	CancelJob(ctx context.Context, params *CancelJobParams) (*Job, error)

	// LookupDedup reads the live dedup record of (queue, key) and what became of
	// its job. A record at or past its expiry is reported as not found.
	LookupDedup(ctx context.Context, params *LookupDedupParams) (*DedupLookup, error)

	// ReleaseDedup deletes the live dedup record of (queue, key), if any, and
	// returns it. It never touches the job.
	ReleaseDedup(ctx context.Context, params *ReleaseDedupParams) (*DedupRecord, error)

	// Sweep deletes dedup records that expired storerule.DedupSweepGrace or
	// more before params.Now (raising the dedup horizon to that time first)
	// and jobs past their retention, at most params.Limit rows of each kind
	// per call, oldest first, and releases expired leases.
	Sweep(ctx context.Context, params *SweepParams) (*SweepResult, error)

	// Worker is the delivery side: reserve, complete, fail, extend.
	Worker
	// Admin is the operator's side: queues, listings, the dead letter.
	Admin
	// Effects guards handlers' external effects.
	Effects
	// Schedules keeps the state of [[schedules]] that every node shares.
	Schedules

	// Ping proves that the stored data can be read, with one cheap read
	// (the health check calls it every few seconds). It fails with
	// ErrClosed after Close.
	Ping(ctx context.Context) error

	// Close releases the store's resources. Calls after Close fail with ErrClosed.
	Close() error
}

// JobState is where a job is in its lifecycle. The values match the wire enum.
type JobState int

const (
	JobStateScheduled JobState = 1
	JobStateAvailable JobState = 2
	JobStateReserved  JobState = 3
	JobStateCompleted JobState = 4
	JobStateDead      JobState = 5
	JobStateCancelled JobState = 6
	// JobStateDeleted is reported by LookupDedup when the record lives but
	// the job was deleted by retention. No stored job is ever in this state.
	JobStateDeleted JobState = 7
)

// Finalized reports whether a job in state s will never run again.
func (s JobState) Finalized() bool {
	return s == JobStateCompleted || s == JobStateDead || s == JobStateCancelled
}

func (s JobState) String() string {
	switch s {
	case JobStateScheduled:
		return "scheduled"
	case JobStateAvailable:
		return "available"
	case JobStateReserved:
		return "reserved"
	case JobStateCompleted:
		return "completed"
	case JobStateDead:
		return "dead"
	case JobStateCancelled:
		return "cancelled"
	case JobStateDeleted:
		return "deleted"
	}
	return "unknown"
}

// JobID is a job's identifier: a UUIDv7, unique across nodes and sortable by
// creation time.
type JobID [16]byte

// Fingerprint is SHA-256 over a job's type and payload.
type Fingerprint [sha256.Size]byte

// NewFingerprint returns the fingerprint of a job type and payload. The type is
// length-prefixed so that ("ab", "c") and ("a", "bc") differ.
func NewFingerprint(jobType string, payload []byte) Fingerprint {
	h := sha256.New()
	var n [8]byte
	l := uint64(len(jobType))
	for i := range n {
		n[i] = byte(l >> (56 - 8*i))
	}
	h.Write(n[:])
	h.Write([]byte(jobType))
	h.Write(payload)
	var f Fingerprint
	h.Sum(f[:0])
	return f
}

// Job is a stored job.
type Job struct {
	ID             JobID
	Queue          string
	JobType        string
	Payload        []byte
	IdempotencyKey *string
	Priority       int32
	RunAt          time.Time
	MaxAttempts    int32
	Attempts       int32
	Headers        map[string]string
	State          JobState
	CreatedAt      time.Time
	FinalizedAt    time.Time // zero until the job is finalized
	Result         []byte
	LastError      string
	// FollowsJobID is set on a follow-up that waits for that job to end
	// (when_running = "run_again"); zero once it no longer waits.
	FollowsJobID JobID
	// ConcurrencyKey is the job's key under [queues.concurrency] (HasConcurrency).
	ConcurrencyKey string
	HasConcurrency bool
	// RateKey is the job's key under [queues.rate] (HasRate).
	RateKey string
	HasRate bool
	// Hold is what holds the job back, if anything; HeldUntil, with
	// HoldRate, is when its key's rate window had room again as of when it
	// was held.
	Hold      Hold
	HeldUntil time.Time
}

// EnqueueJob is one job to enqueue, already validated, with its queue's
// dedup settings resolved.
type EnqueueJob struct {
	Queue          string
	JobType        string
	Payload        []byte
	IdempotencyKey *string // nil: no dedup
	Priority       int32
	RunAt          time.Time // zero: now
	MaxAttempts    int32
	Headers        map[string]string

	// DedupWindow is how long the dedup record is honoured.
	DedupWindow time.Duration
	// ReleaseKeyOn is the queue's release_key_on: the final states whose
	// arrival deletes the job's dedup record (keyed jobs only).
	ReleaseKeyOn ReleaseOn
	// RejectMismatch makes a hit with a different fingerprint fail with
	// ErrIdempotencyKeyConflict instead of returning the original.
	RejectMismatch bool
	// RejectDuplicate makes every other hit fail with a *DuplicateJobError
	// (on_duplicate = "reject"); a rejected hit is not counted.
	RejectDuplicate bool
	// Replace makes a hit on a job still scheduled or available give it
	// this request's payload, headers, priority and run-at (on_duplicate =
	// "replace" or "debounce"). With Debounce set, the run-at is instead now
	// + Debounce, never later than the record's first enqueue +
	// DebounceMaxWait (when set).
	Replace                   bool
	Debounce, DebounceMaxWait time.Duration
	// Rules are the queue's uniqueness rules besides the key, each with the
	// key the job's fields give it ([[queues.rules]]): an enqueue that would
	// create a job fails with a *RuleViolationError when a job of the queue
	// set the same rule key within the rule's window.
	Rules []RuleKey
	// RunAgain is when_running = "run_again": a hit whose original is
	// reserved creates one follow-up job that waits for the original to
	// end for good (EnqueueResult.FollowsJobID), and the key's record
	// names the follow-up from then on.
	RunAgain bool
	// Concurrency is the job's key under its queue's [queues.concurrency],
	// nil on a queue without one.
	Concurrency *ConcurrencyKey
	// Rate is the job's key under its queue's [queues.rate], nil on a queue
	// without one.
	Rate *RateKey
}

// RateKey is a job's per-key delivery rate, fixed when it is enqueued: at
// most Limit jobs of Key are reserved within any Period.
type RateKey struct {
	Key    string
	Limit  int
	Period time.Duration
}

// ConcurrencyKey is a job's per-key concurrency, fixed when it is
// enqueued: at most Limit jobs of Key are reserved at once, and with
// Ordered they are delivered in enqueue order, a job waiting for its retry
// holding back the later ones.
type ConcurrencyKey struct {
	Key     string
	Limit   int
	Ordered bool
}

// EnqueueBatchParams are the parameters of Store.EnqueueBatch.
type EnqueueBatchParams struct {
	Jobs   []EnqueueJob
	Atomic bool
	// Now is the enqueue time: created_at, first_enqueued_at, and the instant
	// against which dedup expiry is judged.
	Now time.Time
}

// EnqueueResult is the outcome of one job of a batch.
type EnqueueResult struct {
	JobID        JobID
	Deduplicated bool
	// PayloadMismatch is set on a hit whose fingerprint differs from the
	// stored one.
	PayloadMismatch bool
	// OriginalEnqueuedAt is the dedup record's first_enqueued_at (keyed jobs).
	OriginalEnqueuedAt time.Time
	// ExpiresAt is when the dedup record stops being honoured (keyed jobs).
	ExpiresAt time.Time
	// Replaced: a hit that replaced the waiting original (Replace); RunAt
	// is then its new run-at. For a created job RunAt is its run-at.
	Replaced bool
	RunAt    time.Time
	// FollowsJobID is set on a created follow-up (EnqueueJob.RunAgain): the
	// reserved job it waits for. Zero otherwise.
	FollowsJobID JobID
	// DelayedUntil is set when a rule with action "delay" moved the created
	// job's run-at to the first moment its window had room.
	DelayedUntil time.Time
	// Err is set when this job was not enqueued (non-atomic batches only).
	Err error
}

// GetJobParams are the parameters of Store.GetJob.
type GetJobParams struct {
	ID JobID
}

// CancelJobParams are the parameters of Store.CancelJob.
type CancelJobParams struct {
	ID  JobID
	Now time.Time
}

// LookupDedupParams are the parameters of Store.LookupDedup.
type LookupDedupParams struct {
	Queue string
	Key   string
	Now   time.Time
}

// DedupRecord is a stored dedup record.
type DedupRecord struct {
	Queue           string
	Key             string
	JobID           JobID
	FirstEnqueuedAt time.Time
	ExpiresAt       time.Time
	Fingerprint     Fingerprint
	Hits            int64
}

// DedupLookup is a live dedup record and the current state of its job.
type DedupLookup struct {
	Record DedupRecord
	// JobState is JobStateDeleted when the job no longer exists.
	JobState JobState
	// Result is the job's result, if it completed with one.
	Result []byte
}

// ReleaseDedupParams are the parameters of Store.ReleaseDedup.
type ReleaseDedupParams struct {
	Queue string
	Key   string
	Now   time.Time
}

// SweepParams are the parameters of Store.Sweep.
type SweepParams struct {
	Now time.Time
	// Limit bounds the rows deleted of each kind in this call.
	Limit int
	// CompletedRetention is how long COMPLETED and CANCELLED jobs are kept
	// after they finalize; DeadRetention the same for DEAD jobs.
	CompletedRetention time.Duration
	DeadRetention      time.Duration
}

// SweepResult counts what one Sweep call deleted or released.
type SweepResult struct {
	DedupRecords int
	Jobs         int
	// LeasesExpired counts reserved jobs whose lease had ended: made
	// deliverable again, or dead when it was their last attempt.
	LeasesExpired int
	// Effects counts completed effect records past their TTL.
	Effects int
}

// LeaseToken names one lease of one job. A Complete, Fail or ExtendLease must
// carry the token of the job's current lease; any other token is stale.
type LeaseToken [16]byte

// Worker-side operations (docs/lifecycle.md describes them). They are part
// of Store; see Worker.
type Worker interface {
	// Reserve leases up to Max ready jobs from Queues, in priority, then
	// run-at, then enqueue order, skipping paused queues. Expired leases are
	// released first (see ExpireLeases).
	Reserve(ctx context.Context, params *ReserveParams) ([]ReservedJob, error)
	// Complete finishes reserved jobs, each judged alone, and returns one
	// result per job. A stale token gets ErrLeaseLost and changes nothing.
	// The token that already completed the job (a retry whose first answer
	// was lost) succeeds with AlreadyCompleted set and changes nothing.
	Complete(ctx context.Context, params *CompleteParams) ([]CompleteResult, error)
	// Fail records a failed attempt: the job is rescheduled at RetryAt, or
	// dead-lettered when it was permanent or its attempts ran out. The token
	// whose Fail was already committed succeeds with AlreadyFailed set,
	// changes nothing, and reports the job's state now.
	Fail(ctx context.Context, params *FailParams) (*FailResult, error)
	// ExtendLease moves the lease's expiry to Now + Lease.
	ExtendLease(ctx context.Context, params *ExtendLeaseParams) (time.Time, error)
}

// ReserveParams are the parameters of Store.Reserve.
type ReserveParams struct {
	Queues   []string
	WorkerID string
	Max      int
	Lease    time.Duration
	Now      time.Time
	// WakeAt, if set, is told when jobs of queue held by their rate key
	// may become deliverable, so that a waiting Reserve looks again then.
	WakeAt func(queue string, at time.Time)
}

// ReservedJob is a job leased to a worker.
type ReservedJob struct {
	Job            *Job
	LeaseToken     LeaseToken
	LeaseExpiresAt time.Time
}

// CompleteParams are the parameters of Store.Complete.
type CompleteParams struct {
	Jobs []CompletedJob
	Now  time.Time
}

// CompleteResult is the outcome of one job of a Complete call.
type CompleteResult struct {
	// AlreadyCompleted: this token had completed the job before; nothing
	// changed.
	AlreadyCompleted bool
	// Err is ErrLeaseLost for a token that does not hold the lease.
	Err error
}

// CompletedJob is one job to complete.
type CompletedJob struct {
	ID         JobID
	LeaseToken LeaseToken
	Result     []byte
}

// FailParams are the parameters of Store.Fail.
type FailParams struct {
	ID         JobID
	LeaseToken LeaseToken
	Error      string
	// Permanent dead-letters the job whatever its attempts.
	Permanent bool
	// RetryAt says when the job runs again, given its queue and the
	// attempts it has had, if it has attempts left (the backoff lives with
	// the caller).
	RetryAt func(queue string, attempts int32) time.Time
	Now     time.Time
}

// FailResult says what became of a failed job.
type FailResult struct {
	State     JobState  // JobStateScheduled or JobStateDead (or, when AlreadyFailed, the state now)
	NextRunAt time.Time // when State is JobStateScheduled
	// AlreadyFailed: this token's Fail was committed before; nothing changed.
	AlreadyFailed bool
}

// ExtendLeaseParams are the parameters of Store.ExtendLease.
type ExtendLeaseParams struct {
	ID         JobID
	LeaseToken LeaseToken
	Lease      time.Duration
	Now        time.Time
}

// Admin is the operator's side of the store.
type Admin interface {
	// ListQueues counts the jobs of every queue that has jobs, dedup
	// records or a paused flag, by state, with its live dedup records.
	ListQueues(ctx context.Context, params *ListQueuesParams) ([]QueueStats, error)
	// ListJobs lists jobs by id, oldest first, after params.After.
	ListJobs(ctx context.Context, params *ListJobsParams) ([]*Job, error)
	// RequeueDead makes the selected dead jobs available again with their
	// attempts reset, and returns how many it requeued and which of
	// params.IDs named no dead job.
	RequeueDead(ctx context.Context, params *DeadJobsParams) (DeadJobsResult, error)
	// PurgeDead deletes the selected dead jobs (their dedup records stay),
	// and returns how many and which of params.IDs named no dead job.
	PurgeDead(ctx context.Context, params *DeadJobsParams) (DeadJobsResult, error)
	// SetQueuePaused pauses or resumes delivery from a queue.
	SetQueuePaused(ctx context.Context, params *SetQueuePausedParams) error
}

// ListQueuesParams are the parameters of Store.ListQueues.
type ListQueuesParams struct {
	Now time.Time
}

// QueueStats describes one queue.
type QueueStats struct {
	Name string
	// Jobs by state; a scheduled job whose run-at has passed counts as
	// available.
	Counts       map[JobState]int64
	DedupRecords int64
	Paused       bool
	// Held counts the jobs held back, by what holds them (all counted in
	// Counts as scheduled).
	Held map[Hold]int64
}

// Hold is what holds back a job whose run-at has come. The values match the
// wire enum.
type Hold int

const (
	HoldNone Hold = iota
	// HoldFollowUp: a follow-up waiting for the job it follows to end.
	HoldFollowUp
	// HoldConcurrency: its concurrency key is at its limit.
	HoldConcurrency
	// HoldRate: its rate key's window is full.
	HoldRate
)

// ListJobsParams are the parameters of Store.ListJobs.
type ListJobsParams struct {
	Queue string   // empty: every queue
	State JobState // zero: every state
	After JobID    // the cursor: list jobs with greater ids
	Limit int
	Now   time.Time
}

// DeadJobsParams select dead jobs: those of Queue (every queue when empty)
// or, when IDs is set, those jobs only.
type DeadJobsParams struct {
	Queue string
	IDs   []JobID
	Now   time.Time
}

// DeadJobsResult is what Store.RequeueDead or Store.PurgeDead did.
type DeadJobsResult struct {
	// N is the number of dead jobs requeued or purged.
	N int
	// NotDead lists the DeadJobsParams.IDs that named no dead job (of
	// Queue, when set) when the call ran: unknown, deleted, or in another
	// state. Nothing was done to them. Empty when IDs was.
	NotDead []JobID
}

// SetQueuePausedParams are the parameters of Store.SetQueuePaused.
type SetQueuePausedParams struct {
	Queue  string
	Paused bool
}

// EffectState is where an effect key stands. The values match the wire enum
// ClaimOutcome.
type EffectState int

const (
	// EffectAcquired: the caller holds the key and runs the effect.
	EffectAcquired EffectState = 1
	// EffectCompleted: the effect ran; its result is stored.
	EffectCompleted EffectState = 2
	// EffectInProgress: another holder's lease is live.
	EffectInProgress EffectState = 3
)

// Effects is the handler side: effect keys that make an external effect
// happen once under at-least-once delivery (docs/effects.md).
type Effects interface {
	// ClaimEffect acquires (scope, key) when it is free, expired, or held
	// under a lease that has ended; reports it completed, with its result,
	// while the record lives; or in progress while another lease is live.
	ClaimEffect(ctx context.Context, params *ClaimEffectParams) (*EffectClaim, error)
	// CompleteEffect stores the result of the effect held by Token; the
	// record then lives the claim's TTL. The token that already completed
	// the effect (a retry whose first answer was lost) gets the stored
	// record with AlreadyCompleted set, and nothing changes. Any other token
	// gets ErrLeaseLost.
	CompleteEffect(ctx context.Context, params *CompleteEffectParams) (*CompletedEffect, error)
	// ReleaseEffect removes the claim held by Token, so a retry can run the
	// effect. A token that does not hold the key gets ErrLeaseLost.
	ReleaseEffect(ctx context.Context, params *ReleaseEffectParams) error
	// ExtendEffectLease moves the claim's lease to Now + Lease.
	ExtendEffectLease(ctx context.Context, params *ExtendEffectLeaseParams) (time.Time, error)
	// GetEffect reads (scope, key); ErrEffectNotFound when there is no
	// live record.
	GetEffect(ctx context.Context, params *GetEffectParams) (*Effect, error)
}

// ClaimEffectParams are the parameters of Store.ClaimEffect.
type ClaimEffectParams struct {
	Scope, Key string
	// TTL is how long a completed record lives, from completion.
	TTL time.Duration
	// Lease is how long the claim holds without an extension.
	Lease time.Duration
	Now   time.Time
}

// EffectClaim is the answer to a claim.
type EffectClaim struct {
	State EffectState
	// Token holds the claim (EffectAcquired).
	Token LeaseToken
	// LeaseExpiresAt is when the holder's lease ends (acquired or in
	// progress).
	LeaseExpiresAt time.Time
	// Result and CompletedAt describe a completed effect.
	Result      []byte
	CompletedAt time.Time
}

// CompleteEffectParams are the parameters of Store.CompleteEffect.
type CompleteEffectParams struct {
	Token  LeaseToken
	Result []byte
	Now    time.Time
}

// CompletedEffect is what a CompleteEffect stored.
type CompletedEffect struct {
	Result      []byte
	CompletedAt time.Time
	ExpiresAt   time.Time
	// AlreadyCompleted: the token had completed the effect before, and
	// Result is what that first call stored.
	AlreadyCompleted bool
}

// ReleaseEffectParams are the parameters of Store.ReleaseEffect.
type ReleaseEffectParams struct {
	Token LeaseToken
	Now   time.Time
}

// ExtendEffectLeaseParams are the parameters of Store.ExtendEffectLease.
type ExtendEffectLeaseParams struct {
	Token LeaseToken
	Lease time.Duration
	Now   time.Time
}

// GetEffectParams are the parameters of Store.GetEffect.
type GetEffectParams struct {
	Scope, Key string
	Now        time.Time
}

// Effect is a stored effect record.
type Effect struct {
	Scope, Key     string
	State          EffectState // EffectInProgress or EffectCompleted
	Result         []byte
	LeaseExpiresAt time.Time // in progress
	CompletedAt    time.Time // completed
	ExpiresAt      time.Time // completed: when the record goes
}

// Notifier is implemented by stores that several server nodes share: it
// reports changes made on any node, so each node can wake its own waiting
// Reserve and ClaimEffect calls at once.
type Notifier interface {
	// Listen calls onJobs with a queue that got deliverable jobs, and
	// onEffects when an effect was completed or released, until ctx ends.
	// It reconnects by itself after a lost connection.
	Listen(ctx context.Context, onJobs func(queue string), onEffects func())
}

// Recovery is what a store found when it opened its data: what it replayed
// and whether anything was damaged. Stores that replay a log of their own
// (the Pebble store) implement Recoverer.
type Recovery struct {
	// WALFiles is the number of write-ahead log files replayed.
	WALFiles int
	// WALBatches and WALKeys count the committed batches and the keys in
	// them replayed from the write-ahead log into the memtable.
	WALBatches int64
	WALKeys    int64
	// DedupRecords is the number of dedup records found (counted at open).
	DedupRecords int
	// Damaged lists what was found damaged and dropped, one sentence each;
	// empty when nothing was. A store that cannot read its data fails Open
	// instead.
	Damaged []string
}

// Recoverer is implemented by stores that report their recovery at Open.
type Recoverer interface {
	Recovery() Recovery
}

// Migrations is what a store's Open did to its schema (the embedded store:
// its key layout).
type Migrations struct {
	// Applied names the migrations Open applied, in order, like
	// "0002_release_key_on"; empty when the schema was up to date.
	Applied []string
	// Known is the number of migrations this binary knows: the schema is at
	// the newest of them once Open returns.
	Known int
}

// Migrator is implemented by stores that apply schema migrations at Open,
// to report which (sepp migrate).
type Migrator interface {
	Migrations() Migrations
}

// SharedClock is implemented by a store that several server nodes share and
// whose clock they all take their time from (the PostgreSQL store): DBTime
// reads it.
type SharedClock interface {
	DBTime(context.Context) (time.Time, error)
}

// Wrapper is implemented by a store that wraps another, such as the fault
// build's; As looks through it for the optional interfaces.
type Wrapper interface {
	Unwrap() Store
}

// As returns st as T, one of the optional interfaces a store may implement
// (Notifier, Recoverer, Migrator, SharedClock), looking through wrappers
// (Wrapper): a wrapper forwards the wrapped store's capabilities in this
// one place instead of declaring each of them again.
func As[T any](st Store) (T, bool) {
	for st != nil {
		if t, ok := st.(T); ok {
			return t, true
		}
		w, ok := st.(Wrapper)
		if !ok {
			break
		}
		st = w.Unwrap()
	}
	var zero T
	return zero, false
}

// RuleKey is one uniqueness rule as a job meets it: the rule's name, the
// key its fields give the job, its window, limit and action.
type RuleKey struct {
	Name   string
	Key    string
	Window time.Duration
	// Limit is how many jobs may take the key within any Window (0 means 1).
	Limit int
	// Delay schedules a job that finds the window full for the first
	// moment it has room, instead of refusing it (action = "delay").
	Delay bool
}

// Schedules keeps, per [[schedules]] name, what every node sharing the
// store must agree on to fire each tick once (docs/schedules.md): when the
// schedule was first seen, and the latest tick whose job was enqueued. The
// tick's job itself is made exact by its idempotency key; this state only
// tells a node where to resume, so it may lag the jobs but never runs ahead
// of them.
type Schedules interface {
	// StartSchedule records that the schedule Name was first seen at Now,
	// unless it was seen before (then nothing changes), and returns its
	// stored state.
	StartSchedule(ctx context.Context, params *StartScheduleParams) (*ScheduleState, error)
	// GetSchedule reads the stored state of one schedule; ErrScheduleNotFound
	// if it was never started.
	GetSchedule(ctx context.Context, params *GetScheduleParams) (*ScheduleState, error)
	// AdvanceSchedule raises the schedule's LastTick to Tick, unless it is
	// already at or after Tick: it never moves back, whatever order nodes'
	// calls arrive in. A schedule never started is started at Tick. It
	// returns the stored state after the call.
	AdvanceSchedule(ctx context.Context, params *AdvanceScheduleParams) (*ScheduleState, error)
}

// ScheduleState is the stored state of one schedule.
type ScheduleState struct {
	Name string
	// StartedAt is when a node first saw the schedule: ticks at or before it
	// never fire (a new schedule does not catch up on its past).
	StartedAt time.Time
	// LastTick is the latest tick whose job was enqueued; zero before the
	// first.
	LastTick time.Time
}

// StartScheduleParams are the parameters of Store.StartSchedule.
type StartScheduleParams struct {
	Name string
	Now  time.Time
}

// GetScheduleParams are the parameters of Store.GetSchedule.
type GetScheduleParams struct {
	Name string
}

// AdvanceScheduleParams are the parameters of Store.AdvanceSchedule.
type AdvanceScheduleParams struct {
	Name string
	Tick time.Time
}
