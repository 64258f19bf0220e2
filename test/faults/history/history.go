// Package history is the record of a fault campaign against Sepp, in the
// style of Jepsen: every operation a client attempted, with what it was told,
// and the state read back from the store once the run has settled. Check
// reads a History and reports every place where what the clients were told
// and what the store holds break Sepp's promise (see check.go).
//
// # Format
//
// A history is JSON Lines: one JSON object per line, in any order (the
// checker orders operations by their times, not by their lines). Blank lines
// are skipped. A line is either an operation record or the state section.
//
// An operation record (type Record) is one call a client process attempted:
//
//	{"process":3,"id":"p3-17","op":"enqueue","queue":"mail","key":"order-9",
//	 "job_type":"send","payload":"sha256:9f86d0...","start":"2026-12-02T01:00:00.000000001Z",
//	 "end":1764637200000000002,"outcome":"ok","job_id":"01a2...","deduplicated":false}
//
// Fields:
//
//   - process: the client process id (an integer; one process runs one
//     operation at a time, as in Jepsen).
//   - id: an optional operation id; the checker names operations by id and
//     by line number.
//   - op: enqueue, enqueue_batch, reserve, complete, fail, claim_effect,
//     complete_effect, release_effect, get_job, lookup or outbox_tx.
//   - queue, key, job_type, payload: the queue, the idempotency key, the job
//     type and a fingerprint of the payload bytes (any stable hash, e.g.
//     "sha256:<hex>"; see Fingerprint). For the effect operations key is the
//     effect key and scope its scope.
//   - start, end: when the call was sent and when its answer (or its
//     timeout) came back: an RFC 3339 string with nanoseconds or an integer
//     of unix nanoseconds. The Writer writes RFC 3339 strings.
//   - outcome: "ok" (the server acknowledged it), "fail" (a definite error:
//     the call did not take effect; reason holds the code, e.g.
//     DUPLICATE_JOB, LEASE_LOST, IDEMPOTENCY_KEY_CONFLICT,
//     DEDUP_RULE_VIOLATED) or "unknown" (a timeout, a lost connection: it
//     may or may not have taken effect).
//   - reason: the error code of a fail (or what is known of an unknown).
//   - job_id: the job the answer names: the enqueued (or original) job, the
//     reserved job, the job completed or failed, the job whose handler claims
//     an effect, the job a DUPLICATE_JOB error names.
//   - deduplicated, replaced: the enqueue ack's flags.
//   - lease_token: the lease of a reserve's answer, or the lease a
//     complete/fail ran under.
//   - scope, effect_token, effect_outcome (ACQUIRED, COMPLETED or
//     IN_PROGRESS), effect_result: the effect operations; effect_token is the
//     token an ACQUIRED claim returned, and the one complete_effect and
//     release_effect pass back.
//   - atomic, items: an enqueue_batch's atomic flag and its per-item
//     requests and results (type Item: queue, key, job_type, payload,
//     outcome, reason, job_id, deduplicated, replaced). An item's outcome
//     counts only when the batch's outcome is ok; a batch that failed
//     created nothing, one of unknown outcome may have created any of its
//     items.
//   - job_state: what a get_job or lookup answered.
//   - rule_key: on a queue with a uniqueness rule ([[queues.rules]]), the
//     rule key the payload gives (an item's too).
//   - follows_job_id: on a queue with when_running = "run_again", the
//     running job an enqueue ack (or a batch item's ack) says its new job
//     follows: the ack created a follow-up (job_id, deduplicated false)
//     that waits until that job has ended.
//   - delayed_until: the run-at a delaying rule (action = "delay") gave
//     the job an enqueue ack created (an item's too); absent when the rule
//     did not move it.
//   - conc_key, rate_key: on a queue with [queues.concurrency] or
//     [queues.rate], the key the payload gives (an enqueue's, an item's, or
//     the job a reserve delivered, read from its payload by the driver).
//   - lease_expires_at: when the lease a reserve returned expires, by the
//     server's clock (a lease the worker did not extend).
//   - rows: an outbox_tx's rows (type OutboxRow: id, queue, key, job_type,
//     payload, refused), each written into the app database's outbox table
//     inside one transaction; its outcome is the transaction's: ok
//     (committed), fail (rolled back, on purpose or after an error, reason
//     says which) or unknown (Commit's error leaves it unknown). A row's
//     key is its own idempotency key; without one the relay keys its job by
//     the row's id. refused is the reason the server refuses the row for
//     good (the driver wrote it so on purpose); empty for a valid row.
//
// The state section is one line {"state": {...}} (type State) the driver
// writes after the run has settled: every job read back from the store
// (jobs: id, queue, key, job_type, state, attempts, result, created_at,
// finalized_at, rule_key, conc_key, rate_key, and for a follow-up still
// waiting follows_job_id and held_by, what holds a job back: follow_up,
// concurrency or rate),
// the jobs retention deleted (deleted: job ids), the outbox table read back
// (outbox: table, left: the ids of rows still in it, dead: the rows of its
// dead table, each id, queue, key, reason; see OutboxState), every dedup
// record (dedup:
// queue, key, job_id, expires_at), every effect (effects: scope, key, state,
// result) and the queue policies in force (queues: queue, dedup_window_ms,
// on_duplicate, key_reuse, rule_window_ms, rule_limit, rule_action,
// debounce_ms, when_running, concurrency_limit, concurrency_ordered,
// rate_limit, rate_period_ms; see QueuePolicy). A queue the section does
// not list is taken as on_duplicate = "return_original" with an unbounded
// window, no rule, no concurrency or rate limit and when_running =
// "return_original". A history without a state section can be checked
// only for what the acks say among themselves.
//
// A loss line {"loss": {...}} (type Loss) records a loss the driver caused
// on purpose: it deleted one of a stopped node's older write-ahead log files
// (file), so the writes that node made from "from" to "to" (its kill) may be
// gone, and
// it read what the node's recovery report said at its next start
// (reported, commits, jobs, report). The checker accepts what such a loss
// explains only when the report counted it (see Check).
package history

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// OpKind names an operation.
type OpKind string

// The operations a client can attempt.
const (
	OpEnqueue        OpKind = "enqueue"
	OpEnqueueBatch   OpKind = "enqueue_batch"
	OpReserve        OpKind = "reserve"
	OpComplete       OpKind = "complete"
	OpFail           OpKind = "fail"
	OpClaimEffect    OpKind = "claim_effect"
	OpCompleteEffect OpKind = "complete_effect"
	OpReleaseEffect  OpKind = "release_effect"
	OpGetJob         OpKind = "get_job"
	OpLookup         OpKind = "lookup"
	// OpOutboxTx is a transaction of the app's database that wrote outbox
	// rows (Record.Rows).
	OpOutboxTx OpKind = "outbox_tx"
)

// Outcome is what a client learned of its operation.
type Outcome string

// The outcomes.
const (
	OK      Outcome = "ok"      // acknowledged
	Fail    Outcome = "fail"    // a definite error: it did not take effect
	Unknown Outcome = "unknown" // a timeout or lost connection: it may have
)

// The effect claim outcomes.
const (
	EffectAcquired   = "ACQUIRED"
	EffectCompleted  = "COMPLETED"
	EffectInProgress = "IN_PROGRESS"
)

// Time is a point in time that reads from an RFC 3339 string (nanoseconds
// allowed) or an integer of unix nanoseconds, and writes RFC 3339 with
// nanoseconds.
type Time struct{ time.Time }

// At wraps t.
func At(t time.Time) Time { return Time{t} }

// MarshalJSON writes t as RFC 3339 with nanoseconds; the zero time as null.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(t.UTC().Format(time.RFC3339Nano))
}

// UnmarshalJSON reads an RFC 3339 string or unix nanoseconds.
func (t *Time) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Errorf("time %q: %w", s, err)
		}
		t.Time = v
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("time %s: neither RFC 3339 nor unix nanoseconds", b)
	}
	t.Time = time.Unix(0, n).UTC()
	return nil
}

// Fingerprint is the payload fingerprint the driver records: "sha256:" and
// the hex of the payload's SHA-256.
func Fingerprint(payload []byte) string {
	s := sha256.Sum256(payload)
	return "sha256:" + hex.EncodeToString(s[:])
}

// Item is one job of an enqueue_batch: the request and its result.
type Item struct {
	Queue        string  `json:"queue,omitempty"`
	Key          string  `json:"key,omitempty"`
	JobType      string  `json:"job_type,omitempty"`
	Payload      string  `json:"payload,omitempty"`
	Outcome      Outcome `json:"outcome,omitempty"`
	Reason       string  `json:"reason,omitempty"`
	JobID        string  `json:"job_id,omitempty"`
	Deduplicated bool    `json:"deduplicated,omitempty"`
	Replaced     bool    `json:"replaced,omitempty"`
	RuleKey      string  `json:"rule_key,omitempty"`
	FollowsJobID string  `json:"follows_job_id,omitempty"`
	DelayedUntil Time    `json:"delayed_until,omitzero"`
	ConcKey      string  `json:"conc_key,omitempty"`
	RateKey      string  `json:"rate_key,omitempty"`
}

// Record is one operation a client attempted.
type Record struct {
	Process int     `json:"process"`
	ID      string  `json:"id,omitempty"`
	Op      OpKind  `json:"op"`
	Queue   string  `json:"queue,omitempty"`
	Key     string  `json:"key,omitempty"`
	JobType string  `json:"job_type,omitempty"`
	Payload string  `json:"payload,omitempty"`
	Start   Time    `json:"start"`
	End     Time    `json:"end"`
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason,omitempty"`
	// RuleKey is the key the queue's uniqueness rule ([[queues.rules]])
	// derives from the payload; empty on a queue without a rule.
	RuleKey string `json:"rule_key,omitempty"`
	// ConcKey and RateKey are the keys the queue's [queues.concurrency] and
	// [queues.rate] derive from the payload: of the job enqueued, or of
	// the job a reserve delivered.
	ConcKey string `json:"conc_key,omitempty"`
	RateKey string `json:"rate_key,omitempty"`

	JobID        string `json:"job_id,omitempty"`
	Deduplicated bool   `json:"deduplicated,omitempty"`
	Replaced     bool   `json:"replaced,omitempty"`
	// FollowsJobID is the running job an enqueue's follow-up follows
	// (when_running = "run_again").
	FollowsJobID string `json:"follows_job_id,omitempty"`
	// DelayedUntil is the run-at a delaying rule gave the created job.
	DelayedUntil Time   `json:"delayed_until,omitzero"`
	LeaseToken   string `json:"lease_token,omitempty"`
	// LeaseExpiresAt is when a reserve's lease expires (server's clock).
	LeaseExpiresAt Time   `json:"lease_expires_at,omitzero"`
	JobState       string `json:"job_state,omitempty"`

	Scope         string `json:"scope,omitempty"`
	EffectToken   string `json:"effect_token,omitempty"`
	EffectOutcome string `json:"effect_outcome,omitempty"`
	EffectResult  string `json:"effect_result,omitempty"`

	Atomic bool   `json:"atomic,omitempty"`
	Items  []Item `json:"items,omitempty"`

	// Rows are the outbox rows an outbox_tx wrote.
	Rows []OutboxRow `json:"rows,omitempty"`

	// Line is the record's line in the file it was read from (1-based); 0
	// for a record built in memory, which Check names by its position.
	Line int `json:"-"`
}

// OutboxRow is one row an outbox_tx wrote into the outbox table.
type OutboxRow struct {
	// ID is the row's id (the writer's UUIDv7).
	ID    string `json:"id"`
	Queue string `json:"queue"`
	// Key is the row's own idempotency key; empty: none, and the relay
	// enqueues it with its ID as the key (the checker takes an outbox
	// queue as one that derives no keys from payloads).
	Key     string `json:"key,omitempty"`
	JobType string `json:"job_type,omitempty"`
	Payload string `json:"payload,omitempty"`
	// Refused is the reason the server refuses the row for good (written
	// so on purpose, e.g. UNKNOWN_QUEUE): the relay must move it to the
	// dead table. Empty: a valid row, which must become a job.
	Refused string `json:"refused,omitempty"`
}

// RowKey is the idempotency key the relay enqueues r with: its own key,
// else its id.
func (r OutboxRow) RowKey() string {
	if r.Key != "" {
		return r.Key
	}
	return r.ID
}

// OutboxState is the outbox table read back after the run settled.
type OutboxState struct {
	Table string `json:"table"`
	// Left are the ids of the rows still in the table: not relayed.
	Left []string `json:"left"`
	// Dead are the rows of the dead table.
	Dead []DeadRow `json:"dead"`
}

// DeadRow is a row of the outbox's dead table.
type DeadRow struct {
	ID     string `json:"id"`
	Queue  string `json:"queue"`
	Key    string `json:"key,omitempty"`
	Reason string `json:"reason"`
}

// Job is a job read back from the store.
type Job struct {
	ID        string `json:"id"`
	Queue     string `json:"queue"`
	Key       string `json:"key,omitempty"`
	JobType   string `json:"job_type,omitempty"`
	State     string `json:"state"`
	Attempts  int    `json:"attempts"`
	Result    string `json:"result,omitempty"`
	CreatedAt Time   `json:"created_at"`
	// FinalizedAt is when the job reached its final state (server's clock).
	FinalizedAt Time   `json:"finalized_at,omitzero"`
	RuleKey     string `json:"rule_key,omitempty"`
	ConcKey     string `json:"conc_key,omitempty"`
	RateKey     string `json:"rate_key,omitempty"`
	// FollowsJobID is the job a follow-up waits for, while it waits.
	FollowsJobID string `json:"follows_job_id,omitempty"`
	// HeldBy is what holds a scheduled job back: follow_up, concurrency or
	// rate; empty for none.
	HeldBy string `json:"held_by,omitempty"`
	// Payload is the fingerprint of the job's payload (the driver records
	// it on the outbox's queues, where it must be a row's).
	Payload string `json:"payload,omitempty"`
}

// DedupRecord is a dedup record read back from the store.
type DedupRecord struct {
	Queue     string `json:"queue"`
	Key       string `json:"key"`
	JobID     string `json:"job_id"`
	ExpiresAt Time   `json:"expires_at"`
}

// Effect is an effect record read back from the store.
type Effect struct {
	Scope  string `json:"scope"`
	Key    string `json:"key"`
	State  string `json:"state"`
	Result string `json:"result,omitempty"`
}

// QueuePolicy is a queue's dedup policy in force during the run.
type QueuePolicy struct {
	Queue         string `json:"queue"`
	DedupWindowMS int64  `json:"dedup_window_ms"` // 0: unbounded
	OnDuplicate   string `json:"on_duplicate,omitempty"`
	KeyReuse      string `json:"key_reuse,omitempty"`
	// RuleWindowMS is the window of the queue's uniqueness rule; 0: the
	// queue has none. (A history checks one rule per queue.)
	RuleWindowMS int64 `json:"rule_window_ms,omitempty"`
	// RuleLimit is how many jobs of one rule key the rule lets be created
	// within any RuleWindowMS (0: 1); RuleAction is what a job finding the
	// window full gets: "reject" (the default) or "delay" (it counts at the
	// run-at the rule gave it, the ack's delayed_until).
	RuleLimit  int    `json:"rule_limit,omitempty"`
	RuleAction string `json:"rule_action,omitempty"`
	// DebounceMS is the queue's debounce_ms (on_duplicate = "debounce").
	DebounceMS int64 `json:"debounce_ms,omitempty"`
	// WhenRunning is the queue's when_running: "return_original" (the
	// default) or "run_again".
	WhenRunning string `json:"when_running,omitempty"`
	// ConcurrencyLimit is the limit of the queue's [queues.concurrency]
	// (0: none), ConcurrencyOrdered its ordered flag.
	ConcurrencyLimit   int  `json:"concurrency_limit,omitempty"`
	ConcurrencyOrdered bool `json:"concurrency_ordered,omitempty"`
	// RateLimit and RatePeriodMS are the queue's [queues.rate] (0: none).
	RateLimit    int   `json:"rate_limit,omitempty"`
	RatePeriodMS int64 `json:"rate_period_ms,omitempty"`
}

// Window is the policy's dedup window; 0 means unbounded.
func (p QueuePolicy) Window() time.Duration { return time.Duration(p.DedupWindowMS) * time.Millisecond }

// State is the store read back after the run settled.
type State struct {
	ReadAt  Time          `json:"read_at"`
	Jobs    []Job         `json:"jobs"`
	Deleted []string      `json:"deleted,omitempty"`
	Dedup   []DedupRecord `json:"dedup"`
	Effects []Effect      `json:"effects"`
	Queues  []QueuePolicy `json:"queues"`
	// Outbox is the outbox table read back; nil when the run wrote none.
	Outbox *OutboxState `json:"outbox,omitempty"`
	// Schedule is the schedule every node ran and its queue's jobs; nil
	// when the run ran none.
	Schedule *ScheduleState `json:"schedule,omitempty"`
}

// Loss is a loss of acknowledged writes the driver caused on purpose: it
// deleted File, an older write-ahead log of node Node, while the node was
// down. The writes the node made from From (the newest write of the log
// before it, or the node's start) to To (its kill) may be gone: the store
// serves every write up to the hole and sets aside the logs after it.
// Reported, Commits and Jobs are what the node's recovery report said at
// its next start; Report is its words.
type Loss struct {
	Node     int    `json:"node"`
	File     string `json:"file"`
	From     Time   `json:"from"`
	To       Time   `json:"to"`
	Reported bool   `json:"reported"`
	Commits  int64  `json:"commits"`
	Jobs     int64  `json:"jobs"`
	Report   string `json:"report,omitempty"`
}

// History is a whole run: the operations, the state section (nil when the
// driver did not write one) and the losses the driver caused.
type History struct {
	Ops    []Record
	State  *State
	Losses []Loss
}

// Writer writes a history, one line per record. It is safe for concurrent
// use: each record is one write of one whole line.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewWriter writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write appends one operation record.
func (w *Writer) Write(r Record) error { return w.put(r) }

// WriteState appends the state section.
func (w *Writer) WriteState(s State) error {
	return w.put(struct {
		State State `json:"state"`
	}{s})
}

// WriteLoss appends a loss the driver caused.
func (w *Writer) WriteLoss(l Loss) error {
	return w.put(struct {
		Loss Loss `json:"loss"`
	}{l})
}

func (w *Writer) put(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = err
	}
	return w.err
}

// Read reads a history. Each record's Line is its line number.
func Read(r io.Reader) (*History, error) {
	h := &History{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var probe struct {
			State *State `json:"state"`
			Loss  *Loss  `json:"loss"`
		}
		if err := json.Unmarshal(b, &probe); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if probe.Loss != nil {
			h.Losses = append(h.Losses, *probe.Loss)
			continue
		}
		if probe.State != nil {
			if h.State != nil {
				return nil, fmt.Errorf("line %d: a second state section", n)
			}
			h.State = probe.State
			continue
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if rec.Op == "" {
			return nil, fmt.Errorf("line %d: no op", n)
		}
		rec.Line = n
		h.Ops = append(h.Ops, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	return h, nil
}

// ReadFile reads the history in the file at path.
func ReadFile(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}
