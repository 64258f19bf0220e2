package storerule

import (
	"bytes"
	"cmp"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// LeaseExpiredError is the last error of a job dead-lettered because the
// lease of its last attempt ran out.
const LeaseExpiredError = "lease expired"

// LeaseEnded reports whether a lease that expires at expires has ended at
// now: a lease holds until, not through, its expiry.
func LeaseEnded(expires, now int64) bool { return expires <= now }

// AfterLeaseExpiry says what a reserved job whose lease ended becomes: dead
// (with LeaseExpiredError) when that lease was its last attempt, otherwise
// deliverable again at once.
func AfterLeaseExpiry(attempts, maxAttempts int32) (state store.JobState, lastError string) {
	if attempts >= maxAttempts {
		return store.JobStateDead, LeaseExpiredError
	}
	return store.JobStateAvailable, ""
}

// AfterFail says what a failed attempt makes of a job: dead when the failure
// is permanent or the attempts have run out, otherwise scheduled at the
// caller's retry time, never earlier than now.
func AfterFail(p *store.FailParams, queue string, attempts, maxAttempts int32) (state store.JobState, runAt int64) {
	now := p.Now.UnixMicro()
	if p.Permanent || attempts >= maxAttempts {
		return store.JobStateDead, now
	}
	return store.JobStateScheduled, max(p.RetryAt(queue, attempts).UnixMicro(), now)
}

// VisibleState is the state a stored job is reported in at now: a scheduled
// job whose run-at has passed is available, unless it waits (held: a
// follow-up whose original has not ended, a job waiting for a slot of its
// concurrency key), which is scheduled whatever its run-at.
func VisibleState(state store.JobState, runAt, now int64, waits bool) store.JobState {
	if waits && (state == store.JobStateScheduled || state == store.JobStateAvailable) {
		return store.JobStateScheduled
	}
	if state == store.JobStateScheduled && runAt <= now {
		return store.JobStateAvailable
	}
	return state
}

// Deliverable reports whether a job in state with runAt can be reserved at
// now.
func Deliverable(state store.JobState, runAt, now int64) bool {
	return (state == store.JobStateAvailable || state == store.JobStateScheduled) && runAt <= now
}

// DeliveryOrder orders ready jobs best first: higher priority, then earlier
// run-at, then enqueue order (the UUIDv7 id).
func DeliveryOrder(aPriority int32, aRunAt int64, aID store.JobID, bPriority int32, bRunAt int64, bID store.JobID) int {
	if aPriority != bPriority {
		return cmp.Compare(bPriority, aPriority)
	}
	if aRunAt != bRunAt {
		return cmp.Compare(aRunAt, bRunAt)
	}
	return bytes.Compare(aID[:], bID[:])
}

// Retention is one class of finalized jobs the sweeper deletes: those in
// State finalized at or before Before.
type Retention struct {
	State  store.JobState
	Before int64
}

// Retentions lists the classes of finalized jobs a sweep deletes, in the
// order it spends its budget on them: completed and cancelled jobs after the
// completed retention, dead jobs after the dead retention.
func Retentions(p *store.SweepParams) []Retention {
	now := p.Now.UnixMicro()
	return []Retention{
		{store.JobStateCompleted, now - p.CompletedRetention.Microseconds()},
		{store.JobStateCancelled, now - p.CompletedRetention.Microseconds()},
		{store.JobStateDead, now - p.DeadRetention.Microseconds()},
	}
}

// EffectRecord is a stored effect key, as a claim sees it.
type EffectRecord struct {
	State          store.EffectState // EffectInProgress or EffectCompleted
	Token          store.LeaseToken
	LeaseExpiresAt int64 // in progress
	Result         []byte
	CompletedAt    int64 // completed
	ExpiresAt      int64 // completed: CompletedAt + the claim's TTL
}

// Live reports whether the record still stands at now: a completed record
// until its expiry, a claim until its lease ends.
func (e *EffectRecord) Live(now int64) bool {
	switch e.State {
	case store.EffectCompleted:
		return now < e.ExpiresAt
	case store.EffectInProgress:
		return !LeaseEnded(e.LeaseExpiresAt, now)
	}
	return false
}

// Held reports whether token holds the claim at now.
func (e *EffectRecord) Held(token store.LeaseToken, now int64) bool {
	return e.State == store.EffectInProgress && e.Token == token && !LeaseEnded(e.LeaseExpiresAt, now)
}

// JudgeClaim answers a claim that found e (nil: no record) at now: the
// completed result or the holder's lease while the record stands, otherwise
// taken = false, and the key is free for the caller to acquire.
func JudgeClaim(e *EffectRecord, now int64) (claim store.EffectClaim, taken bool) {
	if e == nil || !e.Live(now) {
		return store.EffectClaim{}, false
	}
	if e.State == store.EffectCompleted {
		return store.EffectClaim{State: store.EffectCompleted, Result: e.Result, CompletedAt: FromMicros(e.CompletedAt)}, true
	}
	return store.EffectClaim{State: store.EffectInProgress, LeaseExpiresAt: FromMicros(e.LeaseExpiresAt)}, true
}

// LeaseEnd is the expiry of a lease of length d taken at now.
func LeaseEnd(now int64, d time.Duration) int64 { return now + d.Microseconds() }

// RepeatedFail judges a Fail whose token is the one the job was last leased
// under but no longer holds the lease: while the job waits for its retry or
// is dead, that token's own Fail left it so, and the call is a repeat whose
// first answer was lost. It gets the job's state now. ok is false for any
// other state (completed, cancelled, reserved again): the token is stale.
func RepeatedFail(state store.JobState, runAt int64) (res store.FailResult, ok bool) {
	switch state {
	case store.JobStateDead:
		return store.FailResult{State: store.JobStateDead, AlreadyFailed: true}, true
	case store.JobStateScheduled, store.JobStateAvailable:
		return store.FailResult{State: store.JobStateScheduled, NextRunAt: FromMicros(runAt), AlreadyFailed: true}, true
	}
	return store.FailResult{}, false
}

// NotDead returns the ids a dead-letter requeue or purge by id did not act
// on: those of ids not in done (the ids it requeued or purged), each once,
// in the order given.
func NotDead(ids []store.JobID, done map[store.JobID]bool) []store.JobID {
	var out []store.JobID
	seen := map[store.JobID]bool{}
	for _, id := range ids {
		if !done[id] && !seen[id] {
			out = append(out, id)
			seen[id] = true
		}
	}
	return out
}
