package history

import (
	"strings"
	"testing"
)

// The flow-control histories: run_again follow-ups, per-key concurrency,
// rules with a limit and an action, per-key rate.

func runAgainQueue(name string, windowMS int64) QueuePolicy {
	q := queue(name, windowMS, "return_original")
	q.WhenRunning = "run_again"
	return q
}

func concQueue(name string, limit int, ordered bool) QueuePolicy {
	q := queue(name, 86400000, "return_original")
	q.ConcurrencyLimit, q.ConcurrencyOrdered = limit, ordered
	return q
}

func rateQueue(name string, limit int, periodMS int64) QueuePolicy {
	q := queue(name, 86400000, "return_original")
	q.RateLimit, q.RatePeriodMS = limit, periodMS
	return q
}

func limitedRuleQueue(name string, windowMS int64, limit int, action string) QueuePolicy {
	q := ruleQueue(name, windowMS)
	q.RuleLimit, q.RuleAction = limit, action
	return q
}

// leased is a reserve of job on queue with a lease of 2 s from its start.
func leased(p int, id string, s, e int, queue, job, lease string) Record {
	r := reserve(p, id, s, e, job, lease)
	r.Queue, r.LeaseExpiresAt = queue, at(s+2000)
	return r
}

func concKey(r Record, key string) Record {
	r.ConcKey = key
	return r
}

func rateKey(r Record, key string) Record {
	r.RateKey = key
	return r
}

func followUp(r Record, original string) Record {
	r.FollowsJobID = original
	return r
}

func delayed(r Record, until int) Record {
	r.DelayedUntil = at(until)
	return r
}

func failed(p int, id string, s, e int, out Outcome, job, lease string) Record {
	return Record{Process: p, ID: id, Op: OpFail, Start: at(s), End: at(e), Outcome: out, JobID: job, LeaseToken: lease}
}

func unknownReserve(p int, id string, s, e int) Record {
	return Record{Process: p, ID: id, Op: OpReserve, Start: at(s), End: at(e), Outcome: Unknown, Reason: "DEADLINE_EXCEEDED"}
}

func held(j Job, by, follows string) Job {
	j.HeldBy, j.FollowsJobID = by, follows
	return j
}

func withConc(j Job, key string) Job {
	j.ConcKey = key
	return j
}

func flowViolationCases() []violationCase {
	ra := []QueuePolicy{runAgainQueue("ra", 5000)}
	return []violationCase{
		{KindFollowUpTwice, &History{
			Ops: []Record{
				enqueue(1, "a", "ra", "k", 0, 10, OK, "O", false),
				leased(2, "r", 20, 30, "ra", "O", "L1"),
				followUp(enqueue(1, "b", "ra", "k", 40, 50, OK, "F1", false), "O"),
				followUp(enqueue(3, "c", "ra", "k", 60, 70, OK, "F2", false), "O"),
				complete(2, "k", 100, 110, OK, "O", "L1"),
			},
			State: &State{Jobs: []Job{job("O", "ra", "k", "completed", 5), job("F1", "ra", "k", "available", 45), job("F2", "ra", "k", "available", 65)}, Queues: ra},
		}, []OpRef{ref(3, "b"), ref(4, "c")}},
		{KindTriggerLost, &History{
			Ops: []Record{
				enqueue(1, "a", "ra", "k", 0, 10, OK, "O", false),
				leased(2, "r", 20, 30, "ra", "O", "L1"),
				enqueue(3, "b", "ra", "k", 40, 50, OK, "O", true), // a hit on the running job
				complete(2, "k", 100, 110, OK, "O", "L1"),
			},
			State: &State{Jobs: []Job{job("O", "ra", "k", "completed", 5)}, Queues: ra},
		}, []OpRef{ref(2, "r"), ref(3, "b")}},
		{KindFollowUpEarly, &History{
			Ops: []Record{
				enqueue(1, "a", "ra", "k", 0, 10, OK, "O", false),
				leased(2, "r1", 20, 30, "ra", "O", "L1"),
				followUp(enqueue(1, "b", "ra", "k", 40, 50, OK, "F", false), "O"),
				leased(3, "r2", 60, 70, "ra", "F", "L2"), // before O's complete started
				complete(2, "k1", 100, 110, OK, "O", "L1"),
				complete(3, "k2", 120, 130, OK, "F", "L2"),
			},
			State: &State{Jobs: []Job{job("O", "ra", "k", "completed", 5), job("F", "ra", "k", "completed", 45)}, Queues: ra},
		}, []OpRef{ref(3, "b"), ref(4, "r2")}},
		{KindFollowUpStuck, &History{
			Ops: []Record{
				enqueue(1, "a", "ra", "k", 0, 10, OK, "O", false),
				leased(2, "r", 20, 30, "ra", "O", "L1"),
				followUp(enqueue(1, "b", "ra", "k", 40, 50, OK, "F", false), "O"),
				complete(2, "k", 100, 110, OK, "O", "L1"),
			},
			State: &State{Jobs: []Job{job("O", "ra", "k", "completed", 5), held(job("F", "ra", "k", "scheduled", 45), "follow_up", "O")}, Queues: ra},
		}, []OpRef{ref(3, "b")}},
		{KindConcurrencyExceeded, &History{
			Ops: []Record{
				concKey(enqueue(1, "a", "cq", "k1", 0, 5, OK, "J1", false), "acc-1"),
				concKey(enqueue(1, "b", "cq", "k2", 6, 10, OK, "J2", false), "acc-1"),
				concKey(leased(2, "r1", 20, 30, "cq", "J1", "L1"), "acc-1"),
				concKey(leased(3, "r2", 40, 50, "cq", "J2", "L2"), "acc-1"), // J1's lease is live until 100
				complete(2, "k1", 100, 110, OK, "J1", "L1"),
				complete(3, "k2", 120, 130, OK, "J2", "L2"),
			},
			State: &State{Jobs: []Job{withConc(job("J1", "cq", "k1", "completed", 3), "acc-1"), withConc(job("J2", "cq", "k2", "completed", 8), "acc-1")},
				Queues: []QueuePolicy{concQueue("cq", 1, false)}},
		}, []OpRef{ref(3, "r1"), ref(4, "r2")}},
		{KindOrderViolated, &History{
			Ops: []Record{
				concKey(enqueue(1, "a", "oq", "k1", 0, 10, OK, "J1", false), "acc-1"),
				concKey(enqueue(1, "b", "oq", "k2", 20, 30, OK, "J2", false), "acc-1"),
				concKey(leased(2, "r2", 40, 50, "oq", "J2", "L2"), "acc-1"), // J1, enqueued first, still waits
				complete(2, "k2", 60, 70, OK, "J2", "L2"),
				concKey(leased(3, "r1", 200, 210, "oq", "J1", "L1"), "acc-1"),
				complete(3, "k1", 220, 230, OK, "J1", "L1"),
			},
			State: &State{Jobs: []Job{job("J1", "oq", "k1", "completed", 5), job("J2", "oq", "k2", "completed", 25)},
				Queues: []QueuePolicy{concQueue("oq", 1, true)}},
		}, []OpRef{ref(2, "b"), ref(3, "r2"), ref(1, "a")}},
		{KindRateExceeded, &History{
			Ops: []Record{
				enqueue(1, "a", "rq", "k1", -100, -90, OK, "J1", false),
				enqueue(1, "b", "rq", "k2", -80, -70, OK, "J2", false),
				enqueue(1, "c", "rq", "k3", -60, -50, OK, "J3", false),
				rateKey(leased(2, "r1", 0, 10, "rq", "J1", "L1"), "acc-1"),
				rateKey(leased(2, "r2", 100, 110, "rq", "J2", "L2"), "acc-1"),
				rateKey(leased(2, "r3", 200, 210, "rq", "J3", "L3"), "acc-1"), // the third in 210 ms, limit 2 a second
			},
			State: &State{Jobs: []Job{job("J1", "rq", "k1", "reserved", -95), job("J2", "rq", "k2", "reserved", -75), job("J3", "rq", "k3", "reserved", -55)},
				Queues: []QueuePolicy{rateQueue("rq", 2, 1000)}},
		}, []OpRef{ref(4, "r1"), ref(5, "r2"), ref(6, "r3")}},
	}
}

// validFlow: a follow-up made while its original ran, hit while it waited,
// delivered once the original completed, and its own follow-up; jobs of a
// concurrency key one after another (one after a lease that expired), in
// enqueue order; two of a limit-2 key at once; a rate key's reservations a
// period apart; a rule of limit 3 holding 3 jobs in a window, and a
// delaying rule's jobs spread by delayed_until.
func validFlow() *History {
	return &History{
		Ops: []Record{
			// run_again
			enqueue(1, "ra1", "ra", "k", 0, 10, OK, "O", false),
			enqueue(1, "ra2", "ra", "k", 12, 18, OK, "O", true), // a hit while O waits
			leased(2, "ra3", 20, 30, "ra", "O", "L1"),
			followUp(enqueue(1, "ra4", "ra", "k", 40, 50, OK, "F", false), "O"),
			enqueue(3, "ra5", "ra", "k", 60, 70, OK, "F", true),  // a hit on the waiting follow-up
			enqueue(4, "ra6", "ra", "k", 95, 120, OK, "O", true), // concurrent with O's complete: a hit
			complete(2, "ra7", 100, 110, OK, "O", "L1"),
			leased(2, "ra8", 105, 130, "ra", "F", "L2"), // began before O's complete ended
			followUp(enqueue(1, "ra9", "ra", "k", 140, 150, OK, "G", false), "F"),
			complete(2, "ra10", 160, 170, OK, "F", "L2"),
			leased(3, "ra11", 180, 190, "ra", "G", "L3"),
			complete(3, "ra12", 200, 210, OK, "G", "L3"),
			// concurrency, ordered, limit 1
			concKey(enqueue(1, "o1", "oq", "a", 0, 10, OK, "A", false), "acc-1"),
			concKey(enqueue(1, "o2", "oq", "b", 20, 30, OK, "B", false), "acc-1"),
			concKey(enqueue(1, "o3", "oq", "c", 32, 38, OK, "C", false), "acc-1"),
			concKey(leased(2, "o4", 40, 50, "oq", "A", "LA1"), "acc-1"),
			// A's lease expires at 2040 (1940 with the clocks' tolerance);
			// its redelivery and then B and C follow.
			concKey(leased(3, "o5", 2100, 2110, "oq", "A", "LA2"), "acc-1"),
			complete(3, "o6", 2120, 2130, OK, "A", "LA2"),
			concKey(leased(4, "o7", 2125, 2140, "oq", "B", "LB"), "acc-1"), // began before A's complete ended
			failed(4, "o8", 2150, 2160, OK, "B", "LB"),
			concKey(leased(4, "o9", 2300, 2310, "oq", "B", "LB2"), "acc-1"),
			complete(4, "o10", 2320, 2330, OK, "B", "LB2"),
			concKey(leased(5, "o11", 2340, 2350, "oq", "C", "LC"), "acc-1"),
			complete(5, "o12", 2360, 2370, OK, "C", "LC"),
			// concurrency, limit 2
			concKey(enqueue(1, "p1", "pq", "a", 0, 10, OK, "P1", false), "acc-1"),
			concKey(enqueue(1, "p2", "pq", "b", 0, 10, OK, "P2", false), "acc-1"),
			concKey(enqueue(1, "p3", "pq", "c", 0, 10, OK, "P3", false), "acc-1"),
			concKey(leased(2, "p4", 20, 30, "pq", "P1", "LP1"), "acc-1"),
			concKey(leased(3, "p5", 20, 30, "pq", "P2", "LP2"), "acc-1"),
			complete(2, "p6", 40, 50, OK, "P1", "LP1"),
			concKey(leased(4, "p7", 45, 60, "pq", "P3", "LP3"), "acc-1"),
			complete(3, "p8", 70, 80, OK, "P2", "LP2"),
			complete(4, "p9", 70, 80, OK, "P3", "LP3"),
			// rate: 2 a second
			enqueue(1, "q1", "rq", "a", 0, 10, OK, "R1", false),
			enqueue(1, "q2", "rq", "b", 0, 10, OK, "R2", false),
			enqueue(1, "q3", "rq", "c", 0, 10, OK, "R3", false),
			rateKey(leased(2, "q4", 20, 30, "rq", "R1", "LR1"), "acc-1"),
			rateKey(leased(3, "q5", 25, 35, "rq", "R2", "LR2"), "acc-1"),
			rateKey(leased(4, "q6", 980, 1120, "rq", "R3", "LR3"), "acc-1"), // may have been 1000 ms after the first
			// a rule of limit 3 in 3 s
			ruled(enqueue(1, "u1", "lim", "a", 0, 10, OK, "U1", false), "acc-1"),
			ruled(enqueue(1, "u2", "lim", "b", 100, 110, OK, "U2", false), "acc-1"),
			ruled(enqueue(1, "u3", "lim", "c", 200, 210, OK, "U3", false), "acc-1"),
			ruled(enqueueFail(1, "u4", "lim", "d", 300, 310, "DEDUP_RULE_VIOLATED", ""), "acc-1"),
			ruled(enqueue(1, "u5", "lim", "e", 3400, 3410, OK, "U5", false), "acc-1"),
			// a delaying rule of limit 2 in 1 s
			ruled(enqueue(1, "d1", "del", "a", 0, 10, OK, "D1", false), "acc-1"),
			ruled(enqueue(1, "d2", "del", "b", 0, 10, OK, "D2", false), "acc-1"),
			ruled(delayed(enqueue(1, "d3", "del", "c", 0, 10, OK, "D3", false), 1005), "acc-1"),
			ruled(delayed(enqueue(1, "d4", "del", "d", 0, 10, OK, "D4", false), 1005), "acc-1"),
			ruled(delayed(enqueue(1, "d5", "del", "e", 0, 10, OK, "D5", false), 2005), "acc-1"),
		},
		State: &State{
			ReadAt: at(60000),
			Jobs: []Job{
				job("O", "ra", "k", "completed", 5), job("F", "ra", "k", "completed", 45), job("G", "ra", "k", "completed", 145),
				job("A", "oq", "a", "completed", 5), job("B", "oq", "b", "completed", 25), job("C", "oq", "c", "completed", 30),
				job("P1", "pq", "a", "completed", 5), job("P2", "pq", "b", "completed", 5), job("P3", "pq", "c", "completed", 5),
				job("R1", "rq", "a", "reserved", 5), job("R2", "rq", "b", "reserved", 5), job("R3", "rq", "c", "reserved", 5),
				withRule(job("U1", "lim", "a", "completed", 5), "acc-1"), withRule(job("U2", "lim", "b", "completed", 105), "acc-1"),
				withRule(job("U3", "lim", "c", "completed", 205), "acc-1"), withRule(job("U5", "lim", "e", "completed", 3405), "acc-1"),
				withRule(job("D1", "del", "a", "completed", 5), "acc-1"), withRule(job("D2", "del", "b", "completed", 5), "acc-1"),
				withRule(job("D3", "del", "c", "completed", 5), "acc-1"), withRule(job("D4", "del", "d", "completed", 5), "acc-1"),
				withRule(job("D5", "del", "e", "completed", 5), "acc-1"),
			},
			Queues: []QueuePolicy{runAgainQueue("ra", 5000), concQueue("oq", 1, true), concQueue("pq", 2, false), rateQueue("rq", 2, 1000),
				limitedRuleQueue("lim", 3000, 3, ""), limitedRuleQueue("del", 1000, 2, "delay")},
		},
	}
}

func TestValidFlow(t *testing.T) {
	rep := Check(validFlow())
	if !rep.OK() {
		t.Fatalf("want no violation, got:\n%s", rep)
	}
	if len(rep.Warnings) != 3 { // the rate queue's jobs, still reserved
		t.Errorf("warnings: got %d, want 3:\n%s", len(rep.Warnings), rep)
	}
}

// mutate checks that one change to the valid flow history makes exactly
// the violations of kind want (n of them).
func mutate(t *testing.T, name string, want Kind, n int, change func(h *History)) {
	t.Helper()
	h := validFlow()
	change(h)
	rep := Check(h)
	got := 0
	for _, v := range rep.Violations {
		if v.Kind != want {
			t.Errorf("%s: an unexpected %q: %s", name, v.Kind, v)
		}
		got++
	}
	if got != n {
		t.Errorf("%s: %d violations, want %d of %q:\n%s", name, got, n, want, rep)
	}
}

// opIndex is the index of the operation with id in h.
func opIndex(t *testing.T, h *History, id string) int {
	t.Helper()
	for i := range h.Ops {
		if h.Ops[i].ID == id {
			return i
		}
	}
	t.Fatalf("no operation %q", id)
	return -1
}

func setJob(h *History, id string, change func(j *Job)) {
	for i := range h.State.Jobs {
		if h.State.Jobs[i].ID == id {
			change(&h.State.Jobs[i])
		}
	}
}

// drop removes the operations with ids, and the state's jobs with ids.
func drop(h *History, ids ...string) {
	gone := map[string]bool{}
	for _, id := range ids {
		gone[id] = true
	}
	ops := h.Ops[:0]
	for _, r := range h.Ops {
		if !gone[r.ID] {
			ops = append(ops, r)
		}
	}
	h.Ops = ops
	jobs := h.State.Jobs[:0]
	for _, j := range h.State.Jobs {
		if !gone[j.ID] {
			jobs = append(jobs, j)
		}
	}
	h.State.Jobs = jobs
}

// move gives operation id the call s to e (ms after t0).
func move(t *testing.T, h *History, id string, s, e int) *Record {
	t.Helper()
	r := &h.Ops[opIndex(t, h, id)]
	r.Start, r.End = at(s), at(e)
	return r
}

// TestFlowBreaks: each way a broken store could break a flow promise in
// the valid history is caught, as its own kind, and nothing else is.
func TestFlowBreaks(t *testing.T) {
	mutate(t, "the rule's fourth job created in the window", KindRuleViolated, 1, func(h *History) {
		h.Ops[opIndex(t, h, "u4")] = ruled(enqueue(1, "u4", "lim", "d", 300, 310, OK, "U4", false), "acc-1")
		h.State.Jobs = append(h.State.Jobs, withRule(job("U4", "lim", "d", "completed", 305), "acc-1"))
	})
	mutate(t, "the fourth job in the state only (its ack lost)", KindRuleViolated, 1, func(h *History) {
		h.Ops[opIndex(t, h, "u4")] = ruled(enqueue(1, "u4", "lim", "d", 300, 5000, Unknown, "", false), "acc-1")
		h.State.Jobs = append(h.State.Jobs, withRule(job("U4", "lim", "d", "completed", 2999), "acc-1"))
	})
	mutate(t, "a delaying rule's third job not delayed", KindRuleViolated, 1, func(h *History) {
		// By the ack, and by the state's created_at: reported once.
		h.Ops[opIndex(t, h, "d3")].DelayedUntil = Time{}
	})
	mutate(t, "a delaying rule's jobs delayed too little", KindRuleViolated, 1, func(h *History) {
		h.Ops[opIndex(t, h, "d5")].DelayedUntil = at(1900) // 895 ms after D3 and D4
	})
	mutate(t, "the ordered key's second job delivered before the first's redelivery", KindOrderViolated, 1, func(h *History) {
		move(t, h, "o7", 2000, 2010).LeaseExpiresAt = at(4000)
		move(t, h, "o8", 2050, 2060) // its lease ended before A's redelivery
	})
	mutate(t, "the ordered key's later job delivered while the first waits for its retry", KindOrderViolated, 1, func(h *History) {
		// C delivered while B, failed to a retry, had not completed: C's
		// lease does not overlap B's, but the order is broken.
		move(t, h, "o11", 2200, 2210).LeaseExpiresAt = at(2300)
		move(t, h, "o12", 2220, 2230)
	})
	mutate(t, "the ordered key's first job never ends", KindOrderViolated, 2, func(h *History) {
		h.Ops[opIndex(t, h, "o6")].Outcome = Fail
		h.Ops[opIndex(t, h, "o5")].LeaseExpiresAt = at(2125) // no lease overlaps B's or C's
		setJob(h, "A", func(j *Job) { j.State = "available" })
	})
	mutate(t, "a third job of a limit-2 key while two run", KindConcurrencyExceeded, 1, func(h *History) {
		move(t, h, "p7", 32, 38)
	})
	mutate(t, "a rate key's third reservation within the period", KindRateExceeded, 1, func(h *History) {
		move(t, h, "q6", 800, 850)
	})
	mutate(t, "a hit on the running follow-up", KindTriggerLost, 1, func(h *History) {
		h.Ops[opIndex(t, h, "ra9")] = enqueue(1, "ra9", "ra", "k", 140, 150, OK, "F", true)
		drop(h, "ra11", "ra12", "G")
	})
	mutate(t, "the follow-up delivered before its original completed", KindFollowUpEarly, 1, func(h *History) {
		move(t, h, "ra8", 80, 90)
	})
	mutate(t, "the follow-up delivered while its original had not ended", KindFollowUpEarly, 1, func(h *History) {
		h.Ops[opIndex(t, h, "ra7")].Outcome = Fail
		setJob(h, "O", func(j *Job) { j.State = "reserved" })
		drop(h, "ra6") // a hit on the running O would be a lost trigger too
	})
	mutate(t, "the follow-up held after its original completed", KindFollowUpStuck, 1, func(h *History) {
		drop(h, "ra8", "ra9", "ra10", "ra11", "ra12", "G")
		setJob(h, "F", func(j *Job) { *j = held(job("F", "ra", "k", "scheduled", 45), "follow_up", "O") })
	})
	mutate(t, "the follow-up ended without a delivery", KindTriggerLost, 2, func(h *History) {
		// Both the ack that made it and the hit while O ran name it.
		drop(h, "ra8", "ra9", "ra10", "ra11", "ra12", "G")
		setJob(h, "F", func(j *Job) { j.State = "dead" })
	})
	mutate(t, "two follow-ups of the running original", KindFollowUpTwice, 1, func(h *History) {
		h.Ops[opIndex(t, h, "ra5")] = followUp(enqueue(3, "ra5", "ra", "k", 60, 70, OK, "F2", false), "O")
		h.State.Jobs = append(h.State.Jobs, job("F2", "ra", "k", "available", 65))
	})
}

// TestFlowNotFlagged: what only looks like a break, given the calls'
// uncertainty and the clocks' tolerance, is no violation.
func TestFlowNotFlagged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *History)
	}{
		{"a limit-2 key's third job reserved by a call that began before a running one's complete ended", func(h *History) {
			move(t, h, "p7", 35, 41)
		}},
		{"a limit-2 key's third job reserved as a crashed handler's lease expired, within the clocks' tolerance", func(h *History) {
			drop(h, "p6")
			move(t, h, "p7", 1950, 1990) // P1's lease expires at 2020
			move(t, h, "p9", 2000, 2010)
			setJob(h, "P1", func(j *Job) { j.State = "available" })
		}},
		{"a rate key's third reservation a period after the first, within the calls", func(h *History) {
			move(t, h, "q6", 900, 1000)
		}},
		{"the rule's fourth job just a window after the first, by created_at", func(h *History) {
			move(t, h, "u5", 2950, 3100)
			setJob(h, "U5", func(j *Job) { j.CreatedAt = at(3005) })
		}},
		{"the ordered key's next job reserved by a call that began before the first's complete ended", func(h *History) {
			move(t, h, "o7", 2115, 2125)
		}},
		{"a hit on the original while its lease may have expired", func(h *History) {
			move(t, h, "ra6", 1930, 1950)
			move(t, h, "ra7", 1980, 1990)
			move(t, h, "ra8", 1985, 1995).LeaseExpiresAt = at(3985)
			move(t, h, "ra9", 2000, 2010)
			move(t, h, "ra10", 2020, 2030)
			move(t, h, "ra11", 2040, 2050)
			move(t, h, "ra12", 2060, 2070)
		}},
		{"a follow-up's end concurrent with a delivery that an unknown reserve may have made", func(h *History) {
			drop(h, "ra8", "ra9", "ra10", "ra11", "ra12", "G")
			h.Ops = append(h.Ops, unknownReserve(6, "x", 150, 3150))
			setJob(h, "F", func(j *Job) { j.State = "dead" })
		}},
	} {
		h := validFlow()
		tc.change(h)
		if rep := Check(h); !rep.OK() {
			t.Errorf("%s: want no violation, got:\n%s", tc.name, rep)
		}
	}
}

// TestFlowFieldsRoundTrip: the new fields are written and read back.
func TestFlowFieldsRoundTrip(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	r := followUp(delayed(concKey(rateKey(leased(1, "x", 0, 10, "q", "J", "L"), "r"), "c"), 500), "O")
	if err := w.Write(r); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteState(State{Jobs: []Job{held(job("J", "q", "k", "scheduled", 0), "follow_up", "O")}, Queues: []QueuePolicy{runAgainQueue("q", 5)}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"follows_job_id":"O"`, `"delayed_until":`, `"conc_key":"c"`, `"rate_key":"r"`, `"lease_expires_at":`, `"held_by":"follow_up"`, `"when_running":"run_again"`} {
		if !strings.Contains(b.String(), f) {
			t.Errorf("written history lacks %s:\n%s", f, b.String())
		}
	}
	h, err := Read(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	got := h.Ops[0]
	if got.FollowsJobID != "O" || !got.DelayedUntil.Equal(at(500).Time) || got.ConcKey != "c" || got.RateKey != "r" || !got.LeaseExpiresAt.Equal(at(2000).Time) {
		t.Errorf("read back %+v", got)
	}
	if j := h.State.Jobs[0]; j.HeldBy != "follow_up" || j.FollowsJobID != "O" || h.State.Queues[0].WhenRunning != "run_again" {
		t.Errorf("state read back %+v", h.State)
	}
	// A record without the new fields writes none of them.
	b.Reset()
	if err := w.Write(enqueue(1, "y", "q", "k", 0, 1, OK, "J", false)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"delayed_until", "lease_expires_at", "follows_job_id"} {
		if strings.Contains(b.String(), f) {
			t.Errorf("a plain record writes %s: %s", f, b.String())
		}
	}
}
