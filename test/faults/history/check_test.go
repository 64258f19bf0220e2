package history

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) Time { return At(t0.Add(time.Duration(ms) * time.Millisecond)) }

func enqueue(p int, id, queue, key string, s, e int, out Outcome, job string, dedup bool) Record {
	return Record{Process: p, ID: id, Op: OpEnqueue, Queue: queue, Key: key, JobType: "send",
		Payload: Fingerprint([]byte(key)), Start: at(s), End: at(e), Outcome: out, JobID: job, Deduplicated: dedup}
}

func enqueueFail(p int, id, queue, key string, s, e int, reason, job string) Record {
	r := enqueue(p, id, queue, key, s, e, Fail, job, false)
	r.Reason = reason
	return r
}

func item(queue, key string, out Outcome, job string, dedup bool) Item {
	return Item{Queue: queue, Key: key, JobType: "send", Payload: Fingerprint([]byte(key)), Outcome: out, JobID: job, Deduplicated: dedup}
}

func batch(p int, id string, s, e int, atomic bool, out Outcome, reason string, items ...Item) Record {
	return Record{Process: p, ID: id, Op: OpEnqueueBatch, Start: at(s), End: at(e), Outcome: out, Reason: reason, Atomic: atomic, Items: items}
}

func reserve(p int, id string, s, e int, job, lease string) Record {
	return Record{Process: p, ID: id, Op: OpReserve, Queue: "work", Start: at(s), End: at(e), Outcome: OK, JobID: job, LeaseToken: lease}
}

func complete(p int, id string, s, e int, out Outcome, job, lease string) Record {
	return Record{Process: p, ID: id, Op: OpComplete, Start: at(s), End: at(e), Outcome: out, JobID: job, LeaseToken: lease}
}

func claim(p int, id string, s, e int, scope, key, job, effOut, token, result string) Record {
	return Record{Process: p, ID: id, Op: OpClaimEffect, Scope: scope, Key: key, JobID: job, Start: at(s), End: at(e),
		Outcome: OK, EffectOutcome: effOut, EffectToken: token, EffectResult: result}
}

func completeEffect(p int, id string, s, e int, out Outcome, scope, key, token, result string) Record {
	return Record{Process: p, ID: id, Op: OpCompleteEffect, Scope: scope, Key: key, Start: at(s), End: at(e),
		Outcome: out, EffectToken: token, EffectResult: result}
}

func job(id, queue, key, state string, created int) Job {
	return Job{ID: id, Queue: queue, Key: key, JobType: "send", State: state, Attempts: 1, CreatedAt: at(created)}
}

func queue(name string, windowMS int64, onDup string) QueuePolicy {
	return QueuePolicy{Queue: name, DedupWindowMS: windowMS, OnDuplicate: onDup, KeyReuse: "return_original"}
}

func ruled(r Record, ruleKey string) Record {
	r.RuleKey = ruleKey
	return r
}

func ruleQueue(name string, ruleWindowMS int64) QueuePolicy {
	q := queue(name, 86400000, "return_original")
	q.RuleWindowMS = ruleWindowMS
	return q
}

func effect(scope, key, result string) Effect {
	return Effect{Scope: scope, Key: key, State: "completed", Result: result}
}

// validKeyedRetries: keyed enqueues retried after timeouts; some unknown
// enqueues took effect, some did not; a key reused after its window; a
// reject queue answering DUPLICATE_JOB.
func validKeyedRetries() *History {
	return &History{
		Ops: []Record{
			enqueue(1, "p1-1", "mail", "k1", 0, 100, Unknown, "", false),    // took effect: J1
			enqueue(1, "p1-2", "mail", "k1", 150, 200, OK, "J1", true),      // the retry is a hit
			enqueue(2, "p2-1", "mail", "k1", 120, 350, OK, "J1", true),      // concurrent hit
			enqueue(3, "p3-1", "mail", "k2", 0, 50, Unknown, "", false),     // did not take effect
			enqueue(3, "p3-2", "mail", "k2", 60, 80, OK, "J2", false),       // the retry creates
			enqueue(4, "p4-1", "mail", "k3", 0, 50, Unknown, "", false),     // took effect, never retried: J3
			enqueue(4, "p4-2", "mail", "k4", 60, 90, Unknown, "", false),    // did not take effect, never retried
			enqueue(2, "p2-2", "mail", "k1", 20000, 20050, OK, "J4", false), // window passed: a new job
			enqueue(5, "p5-1", "pay", "k9", 0, 10, OK, "J9", false),
			enqueueFail(6, "p6-1", "pay", "k9", 20, 30, "DUPLICATE_JOB", "J9"),
			enqueue(5, "p5-2", "pay", "k10", 0, 10, Unknown, "", false),
			enqueueFail(5, "p5-3", "pay", "k10", 20, 30, "DUPLICATE_JOB", "J10"), // the unknown took effect
			enqueue(6, "p6-2", "pay", "k9", 40000, 40010, OK, "J11", false),      // window passed
		},
		State: &State{
			ReadAt: at(60000),
			Jobs: []Job{
				job("J1", "mail", "k1", "completed", 50),
				job("J2", "mail", "k2", "completed", 70),
				job("J3", "mail", "k3", "completed", 20),
				job("J4", "mail", "k1", "completed", 20010),
				job("J9", "pay", "k9", "completed", 5),
				job("J10", "pay", "k10", "dead", 5),
				job("J11", "pay", "k9", "cancelled", 40005),
			},
			Dedup: []DedupRecord{
				{Queue: "mail", Key: "k1", JobID: "J4", ExpiresAt: at(30010)},
				{Queue: "pay", Key: "k9", JobID: "J11", ExpiresAt: at(50005)},
			},
			Queues: []QueuePolicy{queue("mail", 10000, "return_original"), queue("pay", 10000, "reject")},
		},
	}
}

// validMixed: enqueue, reserve, complete with effect claims; a worker that
// crashed after completing its effect, a claim whose lease expired before the
// effect completed, a failed job.
func validMixed() *History {
	return &History{
		Ops: []Record{
			enqueue(1, "e1", "work", "a", 0, 10, OK, "J1", false),
			enqueue(1, "e2", "work", "b", 20, 30, OK, "J2", false),
			enqueue(1, "e3", "work", "c", 40, 50, OK, "J3", false),
			enqueue(1, "e4", "work", "", 60, 70, OK, "J4", false),
			// J1: the plain path.
			reserve(2, "r1", 100, 110, "J1", "L1"),
			claim(2, "c1", 120, 130, "mail", "a", "J1", EffectAcquired, "E1", ""),
			completeEffect(2, "ce1", 140, 150, OK, "mail", "a", "E1", "sent-a"),
			complete(2, "k1", 160, 170, OK, "J1", "L1"),
			// J2: the worker completed the effect, then lost its complete.
			reserve(3, "r2", 100, 110, "J2", "L2"),
			claim(3, "c2", 120, 130, "mail", "b", "J2", EffectAcquired, "E2", ""),
			completeEffect(3, "ce2", 140, 150, OK, "mail", "b", "E2", "sent-b"),
			complete(3, "k2", 160, 5000, Unknown, "J2", "L2"),
			reserve(4, "r3", 31000, 31010, "J2", "L3"),
			claim(4, "c3", 31020, 31030, "mail", "b", "J2", EffectCompleted, "", "sent-b"),
			complete(4, "k3", 31040, 31050, OK, "J2", "L3"),
			// J3: the first claim's lease expired before its effect completed.
			reserve(5, "r4", 100, 110, "J3", "L4"),
			claim(5, "c4", 120, 130, "mail", "c", "J3", EffectAcquired, "E3", ""),
			reserve(6, "r5", 31000, 31010, "J3", "L5"),
			claim(6, "c5", 31020, 31030, "mail", "c", "J3", EffectAcquired, "E4", ""),
			completeEffect(6, "ce5", 31040, 31050, OK, "mail", "c", "E4", "sent-c"),
			completeEffect(5, "ce4", 31060, 31070, Fail, "mail", "c", "E3", ""),
			complete(6, "k5", 31080, 31090, OK, "J3", "L5"),
			complete(5, "k4", 31100, 31110, Fail, "J3", "L4"),
			// J4: failed for good.
			reserve(7, "r6", 100, 110, "J4", "L6"),
			{Process: 7, ID: "f1", Op: OpFail, JobID: "J4", LeaseToken: "L6", Start: at(120), End: at(130), Outcome: OK},
			{Process: 7, ID: "g1", Op: OpGetJob, JobID: "J4", Start: at(140), End: at(150), Outcome: OK, JobState: "dead"},
			{Process: 7, ID: "l1", Op: OpLookup, Queue: "work", Key: "a", JobID: "J1", Start: at(160), End: at(170), Outcome: OK, JobState: "completed"},
		},
		State: &State{
			ReadAt: at(60000),
			Jobs: []Job{
				job("J1", "work", "a", "completed", 5),
				job("J2", "work", "b", "completed", 25),
				job("J3", "work", "c", "completed", 45),
				job("J4", "work", "", "dead", 65),
			},
			Effects: []Effect{effect("mail", "a", "sent-a"), effect("mail", "b", "sent-b"), effect("mail", "c", "sent-c")},
			Queues:  []QueuePolicy{queue("work", 10000, "return_original")},
		},
	}
}

// validBatches: atomic batches that succeeded, failed and timed out;
// non-atomic batches with failed items; a replace in a batch.
func validBatches() *History {
	return &History{
		Ops: []Record{
			batch(1, "b1", 0, 10, true, OK, "", item("bq", "x1", OK, "J1", false), item("bq", "x2", OK, "J2", false)),
			batch(1, "b2", 20, 30, true, Fail, "DEDUP_RULE_VIOLATED", item("bq", "x3", "", "", false), item("bq", "x4", "", "", false)),
			batch(2, "b3", 0, 5000, true, Unknown, "", item("bq", "x5", "", "", false), item("bq", "x6", "", "", false)),
			batch(3, "b4", 100, 110, false, OK, "",
				item("bq", "x7", OK, "J7", false),
				Item{Queue: "bq", Key: "x1", Outcome: Fail, Reason: "IDEMPOTENCY_KEY_CONFLICT"},
				item("bq", "x2", OK, "J2", true)),
			batch(3, "b5", 200, 210, false, OK, "", item("rq", "y1", OK, "J8", false), item("rq", "y1", OK, "J8", true)),
		},
		State: &State{
			ReadAt: at(60000),
			Jobs: []Job{
				job("J1", "bq", "x1", "completed", 5),
				job("J2", "bq", "x2", "completed", 5),
				job("J5", "bq", "x5", "completed", 2000), // from the unknown batch
				job("J6", "bq", "x6", "completed", 2000),
				job("J7", "bq", "x7", "available", 105), // not settled: a warning
				job("J8", "rq", "y1", "completed", 205),
			},
			Queues: []QueuePolicy{queue("bq", 10000, "return_original"), queue("rq", 10000, "replace")},
		},
	}
}

func TestValidHistories(t *testing.T) {
	for _, tc := range []struct {
		name     string
		h        *History
		warnings int
	}{
		{"keyed enqueue with retries", validKeyedRetries(), 0},
		{"enqueue reserve complete effects", validMixed(), 0},
		{"batches", validBatches(), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(tc.h)
			if !rep.OK() {
				t.Fatalf("want no violation, got:\n%s", rep)
			}
			if len(rep.Warnings) != tc.warnings {
				t.Errorf("warnings: got %d, want %d:\n%s", len(rep.Warnings), tc.warnings, rep)
			}
			if !strings.Contains(rep.String(), "result: valid") {
				t.Errorf("summary does not say valid:\n%s", rep)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	rep := Check(validKeyedRetries())
	if got := rep.Counts[OpEnqueue]; got[OK] != 6 || got[Fail] != 2 || got[Unknown] != 5 {
		t.Errorf("enqueue counts: %v", got)
	}
	if rep.Ops != 13 {
		t.Errorf("ops: %d", rep.Ops)
	}
}

func ref(line int, id string) OpRef { return OpRef{Line: line, ID: id} }

type violationCase struct {
	kind Kind
	h    *History
	ops  []OpRef
}

// violationCases: one history per kind, with the operations the violation
// must name.
func violationCases() []violationCase {
	work := []QueuePolicy{queue("q", 10000, "return_original")}
	return append([]violationCase{
		{KindLossUnreported, &History{
			Ops:    []Record{enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false)},
			State:  &State{Queues: work},
			Losses: []Loss{{Node: 0, File: "000004.log", From: at(-100), To: at(5), Reported: true, Commits: 1, Jobs: 0}},
		}, []OpRef{ref(1, "a")}},
		{KindAckedJobMissing, &History{
			Ops:   []Record{enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false)},
			State: &State{Queues: work},
		}, []OpRef{ref(1, "a")}},
		{KindDedupMismatch, &History{
			Ops: []Record{
				enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false),
				enqueue(2, "b", "q", "k", 500, 510, OK, "J2", false),
			},
			State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 5)}, Deleted: []string{"J2"}, Queues: work},
		}, []OpRef{ref(1, "a"), ref(2, "b")}},
		{KindDuplicateAccepted, &History{
			Ops: []Record{
				enqueue(1, "a", "r", "k", 0, 10, OK, "J1", false),
				enqueue(2, "b", "r", "k", 500, 510, OK, "J2", false),
			},
			State: &State{Jobs: []Job{job("J1", "r", "k", "completed", 5)}, Deleted: []string{"J2"},
				Queues: []QueuePolicy{queue("r", 10000, "reject")}},
		}, []OpRef{ref(1, "a"), ref(2, "b")}},
		{KindDuplicateJob, &History{
			Ops: []Record{
				enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false),
				enqueue(2, "b", "q", "k", 500, 5000, Unknown, "", false),
			},
			State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 5), job("J2", "q", "k", "completed", 600)}, Queues: work},
		}, []OpRef{ref(1, "a")}},
		{KindPhantomJob, &History{
			Ops: []Record{
				enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false),
				reserve(2, "r", 20, 30, "J9", "L1"),
			},
			State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 5), job("J9", "q", "k9", "completed", 15)}, Queues: work},
		}, []OpRef{ref(2, "r")}},
		{KindCompletionLost, &History{
			Ops: []Record{
				enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false),
				reserve(2, "r", 20, 30, "J1", "L1"),
				complete(2, "c", 40, 50, OK, "J1", "L1"),
			},
			State: &State{Jobs: []Job{job("J1", "q", "k", "dead", 5)}, Queues: work},
		}, []OpRef{ref(3, "c")}},
		{KindCompletedTwice, &History{
			Ops: []Record{
				enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false),
				complete(2, "c1", 40, 50, OK, "J1", "L1"),
				complete(3, "c2", 40000, 40050, OK, "J1", "L2"),
			},
			State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 5)}, Queues: work},
		}, []OpRef{ref(2, "c1"), ref(3, "c2")}},
		{KindJobLost, &History{
			Ops:   []Record{enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false)},
			State: &State{Jobs: []Job{job("J1", "q", "k", "unknown", 5)}, Queues: work},
		}, []OpRef{ref(1, "a")}},
		{KindEffectRanTwice, &History{
			Ops: []Record{
				claim(1, "c1", 0, 10, "mail", "x", "", EffectAcquired, "E1", ""),
				completeEffect(1, "d1", 20, 30, OK, "mail", "x", "E1", "r1"),
				claim(2, "c2", 5, 15, "mail", "x", "", EffectAcquired, "E2", ""),
				completeEffect(2, "d2", 25, 35, OK, "mail", "x", "E2", "r2"),
			},
			State: &State{Effects: []Effect{effect("mail", "x", "r1")}},
		}, []OpRef{ref(1, "c1"), ref(2, "d1"), ref(3, "c2"), ref(4, "d2")}},
		{KindEffectReacquired, &History{
			Ops: []Record{
				claim(1, "c1", 0, 10, "mail", "x", "", EffectAcquired, "E1", ""),
				completeEffect(1, "d1", 20, 30, OK, "mail", "x", "E1", "r1"),
				claim(2, "c2", 100, 110, "mail", "x", "", EffectAcquired, "E2", ""),
			},
			State: &State{Effects: []Effect{effect("mail", "x", "r1")}},
		}, []OpRef{ref(1, "c1"), ref(2, "d1"), ref(3, "c2")}},
		{KindEffectResultMissing, &History{
			Ops: []Record{
				enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false),
				reserve(2, "r", 20, 30, "J1", "L1"),
				claim(2, "c", 40, 50, "mail", "x", "J1", EffectAcquired, "E1", ""),
				completeEffect(2, "d", 60, 70, Unknown, "mail", "x", "E1", "r1"),
				complete(2, "k", 80, 90, OK, "J1", "L1"),
			},
			State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 5)}, Queues: work},
		}, []OpRef{ref(3, "c")}},
		{KindEffectResultMismatch, &History{
			Ops: []Record{
				claim(1, "c1", 0, 10, "mail", "x", "", EffectAcquired, "E1", ""),
				completeEffect(1, "d1", 20, 30, OK, "mail", "x", "E1", "r1"),
				claim(2, "c2", 100, 110, "mail", "x", "", EffectCompleted, "", "r2"),
			},
			State: &State{Effects: []Effect{effect("mail", "x", "r1")}},
		}, []OpRef{ref(3, "c2")}},
		{KindDedupBeforeCreate, &History{
			Ops: []Record{
				enqueue(1, "a", "q", "k", 0, 100, OK, "J1", true),
				enqueue(2, "b", "q", "k", 200, 210, OK, "J1", false),
			},
			State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 205)}, Queues: work},
		}, []OpRef{ref(1, "a"), ref(2, "b")}},
		{KindAtomicBatchPartial, &History{
			Ops: []Record{batch(1, "b", 0, 10, true, OK, "", item("q", "x1", OK, "J1", false),
				Item{Queue: "q", Key: "x2", Outcome: Fail, Reason: "IDEMPOTENCY_KEY_CONFLICT"})},
			State: &State{Jobs: []Job{job("J1", "q", "x1", "completed", 5)}, Queues: work},
		}, []OpRef{ref(1, "b")}},
		{KindRuleViolated, &History{
			Ops: []Record{
				ruled(enqueue(1, "a", "pay", "k1", 0, 10, OK, "J1", false), "acc-1"),
				ruled(enqueue(2, "b", "pay", "k2", 500, 510, OK, "J2", false), "acc-1"),
			},
			State: &State{Jobs: []Job{job("J1", "pay", "k1", "completed", 5)}, Deleted: []string{"J2"},
				Queues: []QueuePolicy{ruleQueue("pay", 3000)}},
		}, []OpRef{ref(1, "a"), ref(2, "b")}},
		{KindDebouncedEarly, &History{
			Ops: []Record{
				enqueue(1, "a", "d", "k", 0, 10, OK, "J1", false),
				replaced(enqueue(2, "b", "d", "k", 400, 410, OK, "J1", true)),
				reserve(3, "r", 600, 620, "J1", "L1"),
			},
			State: &State{Jobs: []Job{job("J1", "d", "k", "reserved", 5)}, Queues: []QueuePolicy{debounceQueue("d", 500)}},
		}, []OpRef{ref(2, "b"), ref(3, "r")}},
		{KindMalformed, &History{
			Ops:   []Record{enqueue(1, "a", "q", "k", 0, 10, OK, "", false)},
			State: &State{Queues: work},
		}, []OpRef{ref(1, "a")}},
	}, append(append(flowViolationCases(), outboxViolationCases()...), scheduleViolationCases()...)...)
}

func TestViolations(t *testing.T) {
	for _, tc := range violationCases() {
		t.Run(string(tc.kind), func(t *testing.T) {
			rep := Check(tc.h)
			if len(rep.Violations) != 1 {
				t.Fatalf("want exactly one violation of %q, got:\n%s", tc.kind, rep)
			}
			v := rep.Violations[0]
			if v.Kind != tc.kind {
				t.Fatalf("kind: got %q, want %q:\n%s", v.Kind, tc.kind, rep)
			}
			if !reflect.DeepEqual(v.Ops, tc.ops) {
				t.Errorf("ops: got %v, want %v", v.Ops, tc.ops)
			}
			if rep.OK() || !strings.Contains(rep.String(), string(tc.kind)) {
				t.Errorf("summary does not report it:\n%s", rep)
			}
		})
	}
}

func TestEveryKindHasACase(t *testing.T) {
	have := map[Kind]bool{}
	for _, tc := range violationCases() {
		have[tc.kind] = true
	}
	for _, k := range Kinds {
		if !have[k] {
			t.Errorf("no history of kind %q", k)
		}
	}
}

func TestNoStateIsAWarning(t *testing.T) {
	h := validMixed()
	h.State = nil
	rep := Check(h)
	if len(rep.Violations) != 0 {
		t.Fatalf("violations without state:\n%s", rep)
	}
	if len(rep.Warnings) != 1 || rep.Warnings[0].Kind != WarnNoState {
		t.Errorf("want one %q warning:\n%s", WarnNoState, rep)
	}
}

// An ack in the ambiguous part of the window (it may have taken effect
// after the original's window closed) is not a violation.
func TestAmbiguousWindowEdge(t *testing.T) {
	h := &History{
		Ops: []Record{
			enqueue(1, "a", "q", "k", 0, 100, OK, "J1", false),
			enqueue(2, "b", "q", "k", 9950, 10050, OK, "J2", false),
		},
		State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 1), job("J2", "q", "k", "completed", 10040)},
			Queues: []QueuePolicy{queue("q", 10000, "return_original")}},
	}
	if rep := Check(h); !rep.OK() {
		t.Fatalf("want no violation:\n%s", rep)
	}
}

// More histories that break the promise, beyond one per kind.
func TestMoreViolations(t *testing.T) {
	reject := []QueuePolicy{queue("r", 10000, "reject")}
	work := []QueuePolicy{queue("q", 10000, "return_original")}
	for _, tc := range []struct {
		name string
		kind Kind
		h    *History
		ops  []OpRef
	}{
		{"reject queue acknowledged a hit", KindDuplicateAccepted, &History{
			Ops: []Record{
				enqueue(1, "a", "r", "k", 0, 10, Unknown, "", false),
				enqueue(1, "b", "r", "k", 20, 30, OK, "J1", true),
			},
			State: &State{Jobs: []Job{job("J1", "r", "k", "completed", 5)}, Queues: reject},
		}, []OpRef{ref(2, "b")}},
		{"reject queue acknowledged the same job twice", KindDuplicateAccepted, &History{
			Ops: []Record{
				enqueue(1, "a", "r", "k", 0, 10, OK, "J1", false),
				enqueue(2, "b", "r", "k", 20, 30, OK, "J1", false),
			},
			State: &State{Jobs: []Job{job("J1", "r", "k", "completed", 5)}, Queues: reject},
		}, []OpRef{ref(1, "a"), ref(2, "b")}},
		{"DUPLICATE_JOB named another job", KindDedupMismatch, &History{
			Ops: []Record{
				enqueue(1, "a", "r", "k", 0, 10, OK, "J1", false),
				enqueueFail(2, "b", "r", "k", 20, 30, "DUPLICATE_JOB", "J7"),
			},
			State: &State{Jobs: []Job{job("J1", "r", "k", "completed", 5)}, Queues: reject},
		}, []OpRef{ref(1, "a"), ref(2, "b")}},
		{"concurrent creations of one key", KindDedupMismatch, &History{
			Ops: []Record{
				enqueue(1, "a", "q", "k", 0, 100, OK, "J1", false),
				enqueue(2, "b", "q", "k", 50, 60, OK, "J2", false),
			},
			State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 0)}, Deleted: []string{"J2"}, Queues: work},
		}, []OpRef{ref(1, "a"), ref(2, "b")}},
		{"duplicate jobs without created_at, timed by their acks", KindDuplicateJob, &History{
			Ops: []Record{
				enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false),
				enqueue(2, "b", "q", "k", 500, 5000, Unknown, "", false),
			},
			State: &State{Jobs: []Job{{ID: "J1", Queue: "q", Key: "k", State: "completed"}, {ID: "J2", Queue: "q", Key: "k", State: "completed", CreatedAt: at(600)}}, Queues: work},
		}, []OpRef{ref(1, "a")}},
		{"phantom created before the unknown enqueue started", KindPhantomJob, &History{
			Ops:   []Record{enqueue(1, "a", "q", "k", 500, 600, Unknown, "", false)},
			State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 100)}, Queues: work},
		}, nil},
		{"dedup hit with no creator at all", KindDedupBeforeCreate, &History{
			Ops:   []Record{enqueue(1, "a", "q", "k", 0, 10, OK, "J1", true)},
			State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 5)}, Deleted: nil, Queues: work},
		}, []OpRef{ref(1, "a")}},
		{"a malformed record is left out of the other checks", KindMalformed, &History{
			Ops: []Record{
				enqueue(1, "a", "q", "k", 0, 10, OK, "J1", false),
				{Process: 2, ID: "c", Op: OpComplete, Start: at(20), End: at(10), Outcome: OK, JobID: "J2"},
			},
			State: &State{Jobs: []Job{job("J1", "q", "k", "completed", 5)}, Queues: work},
		}, []OpRef{ref(2, "c")}},
		{"record without times", KindMalformed, &History{
			Ops: []Record{{Process: 1, Op: OpGetJob, Outcome: OK, JobID: "J1"}},
		}, []OpRef{ref(1, "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(tc.h)
			if len(rep.Violations) != 1 || rep.Violations[0].Kind != tc.kind {
				t.Fatalf("want exactly one %q, got:\n%s", tc.kind, rep)
			}
			if got := rep.Violations[0].Ops; !reflect.DeepEqual(got, tc.ops) {
				t.Errorf("ops: got %v, want %v", got, tc.ops)
			}
		})
	}
}

// A hit on a job an unknown enqueue created just before its window closed,
// while another client created the next job just after: no violation,
// whatever order the acks started in.
func TestHitAtTheEndOfAWindowCreatedByAnUnknown(t *testing.T) {
	h := &History{
		Ops: []Record{
			enqueue(1, "u", "q", "k", 0, 100, Unknown, "", false),
			enqueue(2, "a", "q", "k", 9970, 10500, OK, "J1", false),
			enqueue(3, "e", "q", "k", 9980, 9995, OK, "J2", true),
		},
		State: &State{Jobs: []Job{job("J2", "q", "k", "completed", 50), job("J1", "q", "k", "completed", 10200)},
			Queues: []QueuePolicy{queue("q", 10000, "return_original")}},
	}
	if rep := Check(h); !rep.OK() {
		t.Fatalf("want no violation:\n%s", rep)
	}
}

// TestRules: jobs with one rule key created a whole window apart, or with
// other rule keys, are fine, and so is a refusal; two created within the
// window are caught by their acks, and by the final state when no ack
// names them.
func TestRules(t *testing.T) {
	pay := []QueuePolicy{ruleQueue("pay", 3000)}
	valid := &History{
		Ops: []Record{
			ruled(enqueue(1, "a", "pay", "k1", 0, 10, OK, "J1", false), "acc-1"),
			ruled(enqueueFail(2, "b", "pay", "k2", 100, 110, "DEDUP_RULE_VIOLATED", ""), "acc-1"),
			ruled(enqueue(3, "c", "pay", "k3", 200, 210, OK, "J3", false), "acc-2"),
			ruled(enqueue(1, "d", "pay", "k1", 300, 310, OK, "J1", true), "acc-1"), // a hit: not judged by the rule
			ruled(enqueue(2, "e", "pay", "k4", 3020, 3030, OK, "J4", false), "acc-1"),
			ruled(enqueue(4, "f", "pay", "k5", 3100, 6000, Unknown, "", false), "acc-2"),
		},
		State: &State{Jobs: []Job{
			withRule(job("J1", "pay", "k1", "completed", 5), "acc-1"),
			withRule(job("J3", "pay", "k3", "completed", 205), "acc-2"),
			withRule(job("J4", "pay", "k4", "completed", 3025), "acc-1"),
			withRule(job("J5", "pay", "k5", "completed", 5900), "acc-2"),
		}, Queues: pay},
	}
	if rep := Check(valid); !rep.OK() {
		t.Fatalf("valid rule history:\n%s", rep)
	}
	unacked := &History{
		Ops: []Record{
			ruled(enqueue(1, "a", "pay", "k1", 0, 10, OK, "J1", false), "acc-1"),
			ruled(enqueue(2, "b", "pay", "k2", 100, 4000, Unknown, "", false), "acc-1"),
		},
		State: &State{Jobs: []Job{
			withRule(job("J1", "pay", "k1", "completed", 5), "acc-1"),
			withRule(job("J2", "pay", "k2", "completed", 150), "acc-1"),
		}, Queues: pay},
	}
	rep := Check(unacked)
	if len(rep.Violations) != 1 || rep.Violations[0].Kind != KindRuleViolated {
		t.Fatalf("two jobs of one rule key 145 ms apart in the final state: want one %q, got:\n%s", KindRuleViolated, rep)
	}
	// Both creations acknowledged, by calls slow enough to leave room for
	// a whole window between them; created_at shows they were not.
	slow := &History{
		Ops: []Record{
			ruled(enqueue(1, "a", "pay", "k1", 0, 100, OK, "J1", false), "acc-1"),
			ruled(enqueue(2, "b", "pay", "k2", 2950, 3100, OK, "J2", false), "acc-1"),
		},
		State: &State{Jobs: []Job{
			withRule(job("J1", "pay", "k1", "completed", 50), "acc-1"),
			withRule(job("J2", "pay", "k2", "completed", 3000), "acc-1"),
		}, Queues: pay},
	}
	rep = Check(slow)
	if len(rep.Violations) != 1 || rep.Violations[0].Kind != KindRuleViolated {
		t.Fatalf("two acked jobs of one rule key created 2950 ms apart in a 3 s window: want one %q, got:\n%s", KindRuleViolated, rep)
	}
}

func replaced(r Record) Record {
	r.Replaced = true
	return r
}

func debounceQueue(name string, ms int64) QueuePolicy {
	q := queue(name, 86400000, "debounce")
	q.DebounceMS = ms
	return q
}

// TestDebounce: deliveries debounce_ms after the last enqueue that
// scheduled the job are fine, and so is a delivery after a plain hit (it
// does not move the job), or one that started before the replacing enqueue
// ended.
func TestDebounce(t *testing.T) {
	h := &History{
		Ops: []Record{
			enqueue(1, "a", "d", "k", 0, 10, OK, "J1", false),
			replaced(enqueue(2, "b", "d", "k", 400, 600, OK, "J1", true)),
			reserve(3, "r1", 505, 520, "J1", "L1"),              // 500 ms after the first; overlaps the replace, which may have come after it
			reserve(3, "r2", 905, 920, "J1", "L2"),              // 500 ms after the replace started
			enqueue(4, "c", "d", "k", 930, 940, OK, "J1", true), // a hit on a reserved job: no replace
			reserve(3, "r3", 950, 960, "J1", "L3"),
		},
		State: &State{Jobs: []Job{job("J1", "d", "k", "reserved", 5)}, Queues: []QueuePolicy{debounceQueue("d", 500)}},
	}
	if rep := Check(h); !rep.OK() {
		t.Fatalf("valid debounce history:\n%s", rep)
	}
}

func withRule(j Job, ruleKey string) Job {
	j.RuleKey = ruleKey
	return j
}

// TestLosses: a log the driver deleted explains the violations of the
// writes made while it was written only when the node reported the loss
// with counts covering the jobs missing; a loss never explains what
// happened outside its span.
func TestLosses(t *testing.T) {
	work := []QueuePolicy{queue("q", 10000, "return_original")}
	ops := []Record{
		enqueue(1, "a", "q", "k1", 0, 10, OK, "J1", false),    // in the lost log
		enqueue(2, "b", "q", "k2", 5, 12, OK, "J2", false),    // in the lost log
		enqueue(3, "c", "q", "k1", 500, 510, OK, "J3", false), // after the restart: the lost record made a new job
		enqueue(4, "d", "q", "k4", 900, 910, OK, "J4", false), // after: must be there
	}
	state := &State{Jobs: []Job{job("J3", "q", "k1", "completed", 505)}, Queues: work}
	loss := Loss{Node: 0, File: "000004.log", From: at(-100), To: at(20), Reported: true, Commits: 2, Jobs: 2, Report: "lost 2 acknowledged commits, which created 2 jobs"}
	cases := []struct {
		name  string
		loss  Loss
		kinds map[Kind]int
	}{
		{"reported", loss, map[Kind]int{KindAckedJobMissing: 1}}, // J4 is not explained
		{"reported fewer", func() Loss { l := loss; l.Jobs = 1; return l }(), map[Kind]int{KindAckedJobMissing: 1, KindLossUnreported: 1}},
		{"not reported", func() Loss { l := loss; l.Reported, l.Jobs, l.Commits = false, 0, 0; return l }(),
			map[Kind]int{KindAckedJobMissing: 3, KindDedupMismatch: 1, KindLossUnreported: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(&History{Ops: ops, State: state, Losses: []Loss{tc.loss}})
			if got := rep.ByKind(); !reflect.DeepEqual(got, tc.kinds) {
				t.Fatalf("violations %v, want %v:\n%s", got, tc.kinds, rep)
			}
			explained := 0
			for _, w := range rep.Warnings {
				if w.Kind == WarnExcusedByLoss {
					explained++
				}
			}
			if want := map[bool]int{true: 3, false: 0}[tc.loss.Reported]; explained != want {
				t.Errorf("%d violations explained by the loss, want %d (two jobs missing, one dedup mismatch):\n%s", explained, want, rep)
			}
		})
	}
}
