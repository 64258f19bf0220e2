package storerule

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sepp-dev/sepp/internal/store"
)

// Job is an EnqueueJob with everything that needs no stored state computed,
// so that a backend does this work in the caller's goroutine, off its
// writer.
type Job struct {
	ID      store.JobID
	Queue   string
	JobType string
	// Payload is never nil: an empty payload is stored as empty bytes.
	Payload []byte
	// Keyed says the job carries an idempotency key.
	Keyed       bool
	Key         string
	Fingerprint store.Fingerprint // keyed jobs only
	// Window is the dedup window in microseconds (keyed jobs only).
	Window          int64
	RejectMismatch  bool
	RejectDuplicate bool
	// Replace, Debounce and DebounceMaxWait (microseconds) are the
	// replace and debounce policies (Replacement).
	Replace                   bool
	Debounce, DebounceMaxWait int64
	// RunAgain: a hit whose original is reserved creates a follow-up
	// (when_running = "run_again").
	RunAgain bool
	// Follows is the reserved job a follow-up waits for; set by Decide.
	Follows store.JobID
	// Concurrency is the job's per-key concurrency, nil without one.
	Concurrency *store.ConcurrencyKey
	// Rate is the job's per-key delivery rate, nil without one.
	Rate *store.RateKey
	// Rules are the job's rule keys, each recorded under RuleQueue.
	Rules       []Rule
	Priority    int32
	MaxAttempts int32
	// RunAt is the requested run-at clamped to no earlier than the enqueue
	// time; State is JobStateScheduled when it lies in the future, else
	// JobStateAvailable.
	RunAt int64
	State store.JobState
	// Headers is the JSON encoding of the job's headers, nil when it has
	// none.
	Headers []byte
	// CreatedAt is the enqueue time.
	CreatedAt int64
	// ReleaseKeyOn is the job's release_key_on (keyed jobs only; zero for
	// the others, which have no record).
	ReleaseKeyOn store.ReleaseOn
}

// Prepare prepares one job enqueued at now (unix microseconds).
func Prepare(j *store.EnqueueJob, now int64) (Job, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Job{}, fmt.Errorf("generate job id: %w", err)
	}
	pj := Job{
		ID:              store.JobID(id),
		Queue:           j.Queue,
		JobType:         j.JobType,
		Payload:         j.Payload,
		RejectMismatch:  j.RejectMismatch,
		RejectDuplicate: j.RejectDuplicate,
		Replace:         j.Replace,
		RunAgain:        j.RunAgain,
		Concurrency:     j.Concurrency,
		Rate:            j.Rate,
		Debounce:        j.Debounce.Microseconds(),
		DebounceMaxWait: j.DebounceMaxWait.Microseconds(),
		Priority:        j.Priority,
		MaxAttempts:     j.MaxAttempts,
		CreatedAt:       now,
	}
	if pj.Payload == nil {
		pj.Payload = []byte{}
	}
	pj.RunAt, pj.State = RunAt(j.RunAt, now)
	if j.IdempotencyKey != nil {
		if j.DedupWindow <= 0 {
			return Job{}, fmt.Errorf("dedup window must be positive, got %v", j.DedupWindow)
		}
		pj.Keyed = true
		pj.Key = *j.IdempotencyKey
		pj.Window = j.DedupWindow.Microseconds()
		pj.ReleaseKeyOn = j.ReleaseKeyOn
		pj.Fingerprint = store.NewFingerprint(j.JobType, j.Payload)
		if pj.Debounce > 0 {
			// A debounced job waits for the requests to stop from the
			// first one on: it runs debounce after it unless a hit moves
			// it (never later than the longest wait).
			d := now + pj.Debounce
			if pj.DebounceMaxWait > 0 {
				d = min(d, now+pj.DebounceMaxWait)
			}
			if d > pj.RunAt {
				pj.RunAt, pj.State = d, store.JobStateScheduled
			}
		}
	}
	for _, r := range j.Rules {
		if r.Window <= 0 {
			return Job{}, fmt.Errorf("rule %q: window must be positive, got %v", r.Name, r.Window)
		}
		pj.Rules = append(pj.Rules, Rule{Name: r.Name, Queue: RuleQueue(j.Queue, r.Name), Key: r.Key,
			Window: r.Window.Microseconds(), Limit: max(r.Limit, 1), Delay: r.Delay})
	}
	if len(j.Headers) > 0 {
		b, err := json.Marshal(j.Headers)
		if err != nil {
			return Job{}, fmt.Errorf("encode headers: %w", err)
		}
		pj.Headers = b
	}
	return pj, nil
}

// PrepareBatch prepares every job of a batch enqueued at now. A job that
// cannot be prepared fails the whole call with a *store.JobError naming it.
func PrepareBatch(jobs []store.EnqueueJob, now int64) ([]Job, error) {
	out := make([]Job, len(jobs))
	for i := range jobs {
		var err error
		if out[i], err = Prepare(&jobs[i], now); err != nil {
			return nil, &store.JobError{Index: i, Err: err}
		}
	}
	return out, nil
}

// RunAt clamps a requested run-at (zero: now) to no earlier than now and
// says the state a new job starts in.
func RunAt(requested time.Time, now int64) (int64, store.JobState) {
	runAt := now
	if !requested.IsZero() && requested.UnixMicro() > now {
		runAt = requested.UnixMicro()
	}
	if runAt > now {
		return runAt, store.JobStateScheduled
	}
	return runAt, store.JobStateAvailable
}

// DecodeHeaders is the inverse of the encoding Prepare writes.
func DecodeHeaders(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("corrupt headers: %w", err)
	}
	return h, nil
}

// Micros returns t as unix microseconds; FromMicros is its inverse, in UTC.
func Micros(t time.Time) int64 { return t.UnixMicro() }

// FromMicros returns unix microseconds as a UTC time.
func FromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }
