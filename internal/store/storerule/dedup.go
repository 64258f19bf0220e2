package storerule

import (
	"errors"
	"strings"

	"github.com/sepp-dev/sepp/internal/store"
)

// Key names a dedup record: keys are scoped per queue and compared byte for
// byte.
type Key struct{ Queue, Key string }

// Record is a dedup record, as the decision needs it.
type Record struct {
	JobID           store.JobID
	FirstEnqueuedAt int64
	ExpiresAt       int64
	Fingerprint     store.Fingerprint
}

// Live reports whether the record is honoured at now: at or after its expiry
// it is treated as absent, swept or not.
func (r *Record) Live(now int64) bool { return now < r.ExpiresAt }

// Hit judges an enqueue of j that found the live record r: the original job,
// deduplicated, flagged when the fingerprints differ; or, when they differ
// and the queue rejects mismatches, store.ErrIdempotencyKeyConflict; or,
// when the queue rejects duplicates, a *store.DuplicateJobError naming the
// original.
func Hit(r *Record, j *Job) (store.EnqueueResult, error) {
	mismatch := r.Fingerprint != j.Fingerprint
	if mismatch && j.RejectMismatch {
		return store.EnqueueResult{}, store.ErrIdempotencyKeyConflict
	}
	if j.RejectDuplicate {
		return store.EnqueueResult{}, &store.DuplicateJobError{JobID: r.JobID, ExpiresAt: FromMicros(r.ExpiresAt)}
	}
	return store.EnqueueResult{
		JobID:              r.JobID,
		Deduplicated:       true,
		PayloadMismatch:    mismatch,
		OriginalEnqueuedAt: FromMicros(r.FirstEnqueuedAt),
		ExpiresAt:          FromMicros(r.ExpiresAt),
	}, nil
}

// NameBatchOriginal points the refusal of an atomic batch (err, from
// EnqueueBatch) at the job of the same batch that it names, if it names one:
// the batch failed whole, so that job was never written, and an error
// naming its id would send the caller after a job that does not exist.
func NameBatchOriginal(err error, jobs []Job) {
	var je *store.JobError
	if !errors.As(err, &je) {
		return
	}
	index := func(id store.JobID) (int, bool) {
		for i := range jobs {
			if jobs[i].ID == id {
				return i, true
			}
		}
		return 0, false
	}
	var de *store.DuplicateJobError
	var re *store.RuleViolationError
	switch {
	case errors.As(je.Err, &de):
		de.Index, de.InBatch = index(de.JobID)
	case errors.As(je.Err, &re):
		re.Index, re.InBatch = index(re.JobID)
	}
}

// Created is the result of an enqueue of j, at now, that creates the job.
func Created(j *Job, now int64) store.EnqueueResult {
	r := store.EnqueueResult{JobID: j.ID, RunAt: FromMicros(j.RunAt)}
	if j.Keyed {
		r.OriginalEnqueuedAt, r.ExpiresAt = FromMicros(now), FromMicros(now+j.Window)
	}
	return r
}

// NewRecord is the record of its key that an enqueue of j at now creates.
func NewRecord(j *Job, now int64) Record {
	return Record{JobID: j.ID, FirstEnqueuedAt: now, ExpiresAt: now + j.Window, Fingerprint: j.Fingerprint}
}

// RuleRecord is the record of the key of its rule r that an enqueue of j at
// now creates. It has no fingerprint: a rule key is held, never hit.
func RuleRecord(j *Job, r *Rule, now int64) Record {
	return Record{JobID: j.ID, FirstEnqueuedAt: now, ExpiresAt: now + r.Window}
}

// Rule is one uniqueness rule as a prepared job meets it: its records live
// beside the dedup records, under the queue name RuleQueue gives.
type Rule struct {
	Name   string
	Queue  string // RuleQueue(job's queue, Name)
	Key    string
	Window int64 // microseconds
	Limit  int   // at least 1
	Delay  bool  // action = "delay"
}

// ruleQueuePrefix starts the queue name under which a rule's records are
// kept. A queue name cannot hold a control character, so no queue, and no
// lookup or release through the API, can reach them.
const ruleQueuePrefix = "\x1frule\x1f"

// RuleQueue is the name the records of rule name of queue are kept under.
func RuleQueue(queue, name string) string { return ruleQueuePrefix + queue + "\x1f" + name }

// IsRuleQueue reports whether a record's queue name is a rule's, not a
// queue's: listings of queues skip those.
func IsRuleQueue(name string) bool { return strings.HasPrefix(name, ruleQueuePrefix) }

// Replacement judges a hit of j, on a queue that replaces, on the original
// job in state with run-at current and the dedup record r, at now: whether
// the original takes j's payload, headers and priority (only while it
// waits: scheduled or available), and the run-at and state it then gets.
// Replace takes j's run-at; debounce takes now + Debounce, never earlier
// than current, never later than the first enqueue + DebounceMaxWait when
// that is set, and never earlier than now.
//
// Never earlier than current: a request's now is read when it arrives, so
// one that waited for the key (its transaction behind another's) can decide
// after a request that arrived later and already pushed the run-at further.
// Taking its own now + Debounce would move the job earlier than the later
// request's answer said (the fault campaign's "debounced job delivered
// early").
func Replacement(j *Job, r *Record, state store.JobState, current, now int64) (runAt int64, st store.JobState, ok bool) {
	if !j.Replace || (state != store.JobStateScheduled && state != store.JobStateAvailable) {
		return 0, 0, false
	}
	runAt = j.RunAt
	if j.Debounce > 0 {
		runAt = max(now+j.Debounce, current)
		if j.DebounceMaxWait > 0 {
			runAt = min(runAt, r.FirstEnqueuedAt+j.DebounceMaxWait)
		}
		runAt = max(runAt, now)
	}
	st = store.JobStateAvailable
	if runAt > now {
		st = store.JobStateScheduled
	}
	return runAt, st, true
}
