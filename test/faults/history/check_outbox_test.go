package history

import (
	"reflect"
	"strings"
	"testing"
)

// The outbox histories: app transactions that wrote outbox rows (committed,
// rolled back, of unknown outcome), the jobs the relay made of them and the
// outbox table read back.

// obRowOf is a row of queue "ob" with its own key (or none), whose payload
// is its id's.
func obRowOf(id, key string) OutboxRow {
	return OutboxRow{ID: id, Queue: "ob", Key: key, JobType: "send", Payload: Fingerprint([]byte(id))}
}

// refusedRow is a row written to be refused for good: a queue the server
// does not know.
func refusedRow(id string) OutboxRow {
	return OutboxRow{ID: id, Queue: "nowhere", JobType: "send", Payload: Fingerprint([]byte(id)), Refused: "UNKNOWN_QUEUE"}
}

func obTx(p int, id string, s, e int, out Outcome, rows ...OutboxRow) Record {
	r := Record{Process: p, ID: id, Op: OpOutboxTx, Start: at(s), End: at(e), Outcome: out, Rows: rows}
	if out == Fail {
		r.Reason = "ROLLBACK"
	}
	return r
}

// obJob is a job of queue "ob" with key, made of the row whose payload is
// payloadOf's.
func obJob(id, key, payloadOf string, created int) Job {
	j := job(id, "ob", key, "completed", created)
	j.Payload = Fingerprint([]byte(payloadOf))
	return j
}

func rowRef(line int, id string, item int) OpRef { return OpRef{Line: line, ID: id, Item: item} }

// validOutbox: committed rows keyed by their ids and by keys they share
// (one job per key), rows of rolled-back transactions (no job, even when
// a committed row shares the key), transactions of unknown outcome that
// committed (a job) and that did not (none), a row refused on purpose in
// the dead table.
func validOutbox() *History {
	return &History{
		Ops: []Record{
			obTx(1, "a1", 0, 10, OK, obRowOf("R1", ""), obRowOf("R2", "k1"), obRowOf("R3", "k1")),
			obTx(2, "a2", 5, 15, Fail, obRowOf("R4", ""), obRowOf("R5", "k2")),
			obTx(3, "a3", 20, 30, Unknown, obRowOf("R6", "")),
			obTx(3, "a4", 40, 50, Unknown, obRowOf("R7", "")),
			obTx(4, "a5", 60, 70, OK, refusedRow("R8"), obRowOf("R9", "k1")),
			obTx(5, "a6", 80, 90, Fail, obRowOf("R10", "k1")),
			reserve(6, "r1", 100, 110, "J6", "L1"),
			complete(6, "c1", 120, 130, OK, "J6", "L1"),
		},
		State: &State{
			ReadAt: at(60000),
			Jobs: []Job{
				obJob("J1", "R1", "R1", 12),
				obJob("J2", "k1", "R2", 14),
				obJob("J6", "R6", "R6", 35),
			},
			Outbox: &OutboxState{Table: "sepp_outbox", Left: []string{}, Dead: []DeadRow{{ID: "R8", Queue: "nowhere", Reason: "UNKNOWN_QUEUE"}}},
			Queues: []QueuePolicy{queue("ob", 86400000, "return_original")},
		},
	}
}

// breakOutbox is validOutbox changed by f.
func breakOutbox(f func(h *History)) *History {
	h := validOutbox()
	f(h)
	return h
}

func dropJob(h *History, id string) {
	var kept []Job
	for _, j := range h.State.Jobs {
		if j.ID != id {
			kept = append(kept, j)
		}
	}
	h.State.Jobs = kept
}

// outboxViolationCases: each a single break of validOutbox, with the
// operations (rows) the violation must name.
func outboxViolationCases() []violationCase {
	return []violationCase{
		{KindOutboxLost, breakOutbox(func(h *History) { dropJob(h, "J1") }), []OpRef{rowRef(1, "a1", 1)}},
		{KindOutboxDuplicate, breakOutbox(func(h *History) {
			h.State.Jobs = append(h.State.Jobs, obJob("J1b", "R1", "R1", 5000))
		}), []OpRef{rowRef(1, "a1", 1)}},
		{KindOutboxRolledBack, breakOutbox(func(h *History) {
			h.State.Jobs = append(h.State.Jobs, obJob("J4", "R4", "R4", 20))
		}), []OpRef{rowRef(2, "a2", 1)}},
		{KindOutboxPhantom, breakOutbox(func(h *History) {
			h.State.Jobs = append(h.State.Jobs, obJob("J99", "R99", "R99", 20))
		}), nil},
		{KindOutboxDead, breakOutbox(func(h *History) {
			h.State.Outbox.Dead = append(h.State.Outbox.Dead, DeadRow{ID: "R9", Queue: "ob", Key: "k1", Reason: "INVALID_FIELD"})
		}), []OpRef{rowRef(5, "a5", 2)}},
		{KindOutboxMismatch, breakOutbox(func(h *History) {
			h.State.Jobs[2].Payload = Fingerprint([]byte("something else"))
		}), []OpRef{rowRef(3, "a3", 1), ref(7, "r1"), ref(8, "c1")}},
	}
}

func TestValidOutbox(t *testing.T) {
	rep := Check(validOutbox())
	if !rep.OK() || len(rep.Warnings) != 0 {
		t.Fatalf("want no violation and no warning, got:\n%s", rep)
	}
	o := rep.Outbox
	want := &OutboxCounts{Txs: map[Outcome]int{OK: 2, Fail: 2, Unknown: 2}, Rows: map[Outcome]int{OK: 5, Fail: 3, Unknown: 2},
		OwnKey: 5, Refused: 1, Relayed: 5, UnknownRelayed: 1, Dead: 1, Left: 0, Jobs: 3}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("counts:\n got %+v\nwant %+v", o, want)
	}
	if s := rep.String(); !strings.Contains(s, "relayed 5 rows (1 of unknown outcome) into 3 jobs; 1 rows dead, 0 left") {
		t.Errorf("summary:\n%s", s)
	}
}

// Every other single break of the valid history is flagged, each with the
// kind it is.
func TestOutboxBreaks(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind Kind
		n    int
		f    func(h *History)
	}{
		{"a refused row neither dead nor left", KindOutboxLost, 1, func(h *History) { h.State.Outbox.Dead = nil }},
		{"the only job of a shared key gone: each of its three committed rows lost", KindOutboxLost, 3, func(h *History) { dropJob(h, "J2") }},
		{"a second job of a shared key in its window", KindOutboxDuplicate, 1, func(h *History) {
			h.State.Jobs = append(h.State.Jobs, obJob("J2b", "k1", "R9", 65))
		}},
		{"a second job of an unknown row", KindOutboxDuplicate, 1, func(h *History) {
			h.State.Jobs = append(h.State.Jobs, obJob("J6b", "R6", "R6", 70))
		}},
		{"a job of a rolled-back row whose key no row committed", KindOutboxRolledBack, 1, func(h *History) {
			h.State.Jobs = append(h.State.Jobs, obJob("J5", "k2", "R5", 20))
		}},
		{"the shared key's job has a rolled-back row's payload", KindOutboxRolledBack, 1, func(h *History) {
			h.State.Jobs[1].Payload = Fingerprint([]byte("R10"))
		}},
		{"a rolled-back row in the dead table", KindOutboxRolledBack, 1, func(h *History) {
			h.State.Outbox.Dead = append(h.State.Outbox.Dead, DeadRow{ID: "R4", Queue: "ob", Reason: "INVALID_FIELD"})
		}},
		{"a rolled-back row left in the table", KindOutboxRolledBack, 1, func(h *History) {
			h.State.Outbox.Left = append(h.State.Outbox.Left, "R10")
		}},
		{"a dead row never written", KindOutboxPhantom, 1, func(h *History) {
			h.State.Outbox.Dead = append(h.State.Outbox.Dead, DeadRow{ID: "R77", Queue: "ob", Reason: "INVALID_FIELD"})
		}},
		{"a row left never written", KindOutboxPhantom, 1, func(h *History) { h.State.Outbox.Left = []string{"R78"} }},
		{"an unkeyed job on the outbox queue", KindOutboxPhantom, 1, func(h *History) {
			h.State.Jobs = append(h.State.Jobs, obJob("J0", "", "R1", 20))
		}},
		{"a row of unknown outcome dead", KindOutboxDead, 1, func(h *History) {
			h.State.Outbox.Dead = append(h.State.Outbox.Dead, DeadRow{ID: "R7", Queue: "ob", Reason: "INVALID_FIELD"})
		}},
		{"a row id written twice", KindMalformed, 1, func(h *History) {
			h.Ops = append(h.Ops, obTx(7, "a7", 200, 210, Fail, obRowOf("R1", "")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(breakOutbox(tc.f))
			if got := rep.ByKind(); len(got) != 1 || got[tc.kind] != tc.n {
				t.Fatalf("want %d of %q, got %v:\n%s", tc.n, tc.kind, got, rep)
			}
		})
	}
}

// Near misses: what the outbox promise allows is not flagged.
func TestOutboxNearMisses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		f        func(h *History)
		warnings int
	}{
		{"a row of unknown outcome with a job", func(h *History) {
			h.State.Jobs = append(h.State.Jobs, obJob("J7", "R7", "R7", 45))
		}, 0},
		{"the job of a shared key with any committed row's payload", func(h *History) {
			h.State.Jobs[1].Payload = Fingerprint([]byte("R9"))
		}, 0},
		{"a committed row still in the table, no job yet: a warning", func(h *History) {
			dropJob(h, "J1")
			h.State.Outbox.Left = []string{"R1"}
		}, 1},
		{"a refused row still in the table: a warning", func(h *History) {
			h.State.Outbox.Dead = nil
			h.State.Outbox.Left = []string{"R8"}
		}, 1},
		{"an own key reused after its window: two jobs", func(h *History) {
			h.State.Queues = []QueuePolicy{queue("ob", 1000, "return_original")}
			h.Ops = append(h.Ops, obTx(7, "a7", 5000, 5010, OK, obRowOf("R11", "k1")))
			h.State.Jobs = append(h.State.Jobs, obJob("J11", "k1", "R11", 5005))
		}, 0},
		{"a job on the outbox queue made by an enqueue", func(h *History) {
			h.Ops = append(h.Ops, enqueue(8, "e1", "ob", "direct", 300, 310, OK, "J50", false))
			h.State.Jobs = append(h.State.Jobs, job("J50", "ob", "direct", "completed", 305))
		}, 0},
		{"no outbox section: a warning, nothing lost", func(h *History) {
			dropJob(h, "J1")
			h.State.Outbox = nil
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(breakOutbox(tc.f))
			if !rep.OK() || len(rep.Warnings) != tc.warnings {
				t.Fatalf("want no violation and %d warnings, got:\n%s", tc.warnings, rep)
			}
		})
	}
}

// A committed row whose job a deleted log took is explained by the loss
// when the node reported it, even though the transaction ended before the
// lost span began: the relay may have enqueued the row at any moment after.
func TestOutboxLoss(t *testing.T) {
	h := breakOutbox(func(h *History) { dropJob(h, "J1") })
	loss := Loss{Node: 0, File: "000004.log", From: at(500), To: at(900), Reported: true, Commits: 1, Jobs: 1, Report: "lost 1 acknowledged commit, which created 1 job"}
	h.Losses = []Loss{loss}
	if rep := Check(h); !rep.OK() || len(rep.Warnings) != 1 || rep.Warnings[0].Kind != WarnExcusedByLoss {
		t.Fatalf("want the lost row explained by the reported loss:\n%s", rep)
	}
	loss.Reported, loss.Jobs, loss.Commits = false, 0, 0
	h.Losses = []Loss{loss}
	if got := Check(h).ByKind(); !reflect.DeepEqual(got, map[Kind]int{KindOutboxLost: 1, KindLossUnreported: 1}) {
		t.Fatalf("an unreported loss: got %v", got)
	}
	// Nor a row refused for good, which the store never held.
	h = breakOutbox(func(h *History) { h.State.Outbox.Dead = nil })
	h.Losses = []Loss{{Node: 0, File: "000004.log", From: at(500), To: at(900), Reported: true, Commits: 1, Jobs: 1}}
	if got := Check(h).ByKind(); !reflect.DeepEqual(got, map[Kind]int{KindOutboxLost: 1}) {
		t.Fatalf("a refused row lost beside a loss: got %v", got)
	}
	// Rows sharing a key lost one job: a loss that reported one job
	// explains them all.
	h = breakOutbox(func(h *History) { dropJob(h, "J2") })
	h.Losses = []Loss{{Node: 0, File: "000004.log", From: at(500), To: at(900), Reported: true, Commits: 1, Jobs: 1}}
	if rep := Check(h); !rep.OK() || len(rep.Warnings) != 3 {
		t.Fatalf("three rows of one lost job, one job reported:\n%s", rep)
	}
	// A loss that ended before the transaction began explains nothing.
	h = breakOutbox(func(h *History) { dropJob(h, "J1") })
	loss = Loss{Node: 0, File: "000004.log", From: at(-900), To: at(-500), Reported: true, Commits: 1, Jobs: 1}
	h.Losses = []Loss{loss}
	if got := Check(h).ByKind(); !reflect.DeepEqual(got, map[Kind]int{KindOutboxLost: 1}) {
		t.Fatalf("a loss before the row: got %v", got)
	}
}

// The outbox rows and the state's outbox section read back as written.
func TestOutboxRoundTrip(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	h := validOutbox()
	for _, r := range h.Ops {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteState(*h.State); err != nil {
		t.Fatal(err)
	}
	got, err := Read(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Ops[0].Rows, h.Ops[0].Rows) || !reflect.DeepEqual(got.State.Outbox, h.State.Outbox) || got.State.Jobs[0].Payload != h.State.Jobs[0].Payload {
		t.Fatalf("read back:\n%+v\n%+v", got.Ops[0], got.State.Outbox)
	}
	if rep := Check(got); !rep.OK() {
		t.Fatalf("read back, not valid:\n%s", rep)
	}
}
