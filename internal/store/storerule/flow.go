package storerule

import (
	"slices"

	"github.com/sepp-dev/sepp/internal/store"
)

// The enqueue side of per-key flow control: rules with a limit and an
// action ([[queues.rules]] limit, action), and follow-ups (when_running =
// "run_again").
//
// A rule key's record keeps the times its jobs took the key (its slots):
// the enqueue time of a job the rule would refuse, the run-at of a job it
// delays. At most Limit slots lie within any Window: a new slot at t is
// allowed when fewer than Limit slots lie after t - Window. A record keeps
// its last Limit slots, in order; with one slot it keeps none in Slots and
// the slot is its ExpiresAt - Window, as every record written before rules
// had limits.

// RuleSlots returns the slots of rule r that the entry e (nil: none) holds
// at now, in order: none when e is absent or no longer live.
func RuleSlots(e *Entry, r *Rule, now int64) []int64 {
	if e == nil || !e.Live(now) {
		return nil
	}
	if len(e.Slots) > 0 {
		return e.Slots
	}
	return []int64{e.ExpiresAt - r.Window}
}

// RuleFree returns the first moment at or after t at which rule r has room
// for one more slot beside slots (in order).
func RuleFree(slots []int64, r *Rule, t int64) int64 {
	first, n := -1, 0
	for i, s := range slots {
		if s > t-r.Window {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if n < r.Limit {
		return t
	}
	// The n-Limit+1 earliest slots that count at t must leave the window.
	return max(t, slots[first+n-r.Limit]+r.Window)
}

// TakeSlot returns slots (in order) with a slot at t added, as of now: the
// last limit of those still in the window at now.
func TakeSlot(slots []int64, window int64, limit int, t, now int64) []int64 {
	out := make([]int64, 0, len(slots)+1)
	for _, s := range slots {
		// A slot out of the window at now counts at no later moment.
		if s > now-window {
			out = append(out, s)
		}
	}
	i, _ := slices.BinarySearch(out, t)
	out = slices.Insert(out, i, t)
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// RuleTake returns the record, and its slots (nil for one), that rule r's
// key holds once job j, enqueued at now, takes a slot at t, beside slots (in
// order): the last Limit of them, with the record naming j.
func RuleTake(slots []int64, r *Rule, j *Job, t, now int64) (Record, []int64) {
	out := TakeSlot(slots, r.Window, r.Limit, t, now)
	rec := Record{JobID: j.ID, FirstEnqueuedAt: now, ExpiresAt: out[len(out)-1] + r.Window}
	if len(out) == 1 {
		return rec, nil
	}
	return rec, out
}

// ruleRefusal returns the error of the first rule of j that refuses it at
// now (action "reject", window full), or nil.
func ruleRefusal(records map[Key]*Entry, j *Job, now int64) error {
	for i := range j.Rules {
		r := &j.Rules[i]
		if r.Delay {
			continue
		}
		e := records[Key{r.Queue, r.Key}]
		if free := RuleFree(RuleSlots(e, r, now), r, now); free > now {
			return &store.RuleViolationError{Rule: r.Name, JobID: e.JobID, FreesAt: FromMicros(free), Limit: r.Limit}
		}
	}
	return nil
}

// ruleDelay returns the first moment at or after from at which every rule
// of j with action "delay" has room (records live at now).
func ruleDelay(records map[Key]*Entry, j *Job, now, from int64) int64 {
	t := from
	for changed := true; changed; {
		changed = false
		for i := range j.Rules {
			r := &j.Rules[i]
			if !r.Delay {
				continue
			}
			if f := RuleFree(RuleSlots(records[Key{r.Queue, r.Key}], r, now), r, t); f > t {
				t, changed = f, true
			}
		}
	}
	return t
}

// FollowUp reports whether an enqueue of j that found the live record e
// creates a follow-up instead of being a hit: j's queue runs again, and
// the job e names is reserved (running, or its lease not yet released).
func FollowUp(j *Job, e *Entry) bool {
	return j.RunAgain && e.Original != nil && e.Original.State == store.JobStateReserved
}

// The delivery side: per-key concurrency ([queues.concurrency]).
//
// A job of a queue with a concurrency key holds a slot of its key from
// when it is admitted until it leaves the reserved state (unordered) or
// reaches a final state (ordered: a job waiting for its retry keeps its
// slot and so holds back the later jobs of its key). At most Limit jobs of
// a key hold slots; a job that finds none free waits, off the ready index,
// in its key's waiting list (ordered: by enqueue order; unordered: by
// delivery order), and each slot freed admits the first waiting job. A job
// is admitted when it arrives (ArrivesAt): ordered, when it is enqueued or
// made deliverable again by a requeue, and only when no job of its key
// waits before it; unordered, when it is enqueued due, or made deliverable
// by an expired lease. An unordered job that comes due later (run-at in
// the future, or a retry) is admitted when Reserve reaches it. So a key
// has waiting jobs only while all its slots are held, a hot key's backlog
// waits off the ready index from the start, and Reserve never scans a job
// twice for a key at its limit.

// KeyCount is a concurrency key's count: the jobs holding its slots and
// those waiting for one.
type KeyCount struct{ Active, Waiting int64 }

// Admits reports whether a job of concurrency c may take a slot of its
// key, counted n, now: one is free, and (ordered) no job waits before it.
func Admits(c *store.ConcurrencyKey, n KeyCount) bool {
	return n.Active < int64(c.Limit) && (!c.Ordered || n.Waiting == 0)
}

// KeepsSlot reports whether a job of concurrency c that leaves the reserved
// state for state keeps its slot: only an ordered job that will run again.
func KeepsSlot(c *store.ConcurrencyKey, state store.JobState) bool {
	return c.Ordered && !state.Finalized()
}

// ArrivesAt reports whether a job of concurrency c, with run-at runAt,
// that becomes deliverable at now is admitted (or set waiting) at once:
// always when ordered (its place in its key's order is taken when it
// arrives), and when due otherwise (a later one is admitted by Reserve).
func ArrivesAt(c *store.ConcurrencyKey, runAt, now int64) bool {
	return c.Ordered || runAt <= now
}

// The delivery side: per-key rate ([queues.rate]). A rate key keeps the
// times its last Limit jobs were reserved (its slots, as a rule key's): a
// job is reserved only when fewer than Limit of them lie within the last
// Period. One that finds the window full waits, off the ready index, in
// its key's waiting list (in delivery order) until the window has room:
// then as many waiting jobs as it has room for become deliverable again.

// RateRoom returns how many jobs of rate rk may be reserved at now beside
// slots (in order), and, when none, the first moment one may.
func RateRoom(rk *store.RateKey, slots []int64, now int64) (room int, freesAt int64) {
	r := Rule{Window: rk.Period.Microseconds(), Limit: rk.Limit}
	n := 0
	for _, s := range slots {
		if s > now-r.Window {
			n++
		}
	}
	if n < r.Limit {
		return r.Limit - n, now
	}
	return 0, RuleFree(slots, &r, now)
}

// RateTake returns the slots of rate rk once a job is reserved at now.
func RateTake(rk *store.RateKey, slots []int64, now int64) []int64 {
	return TakeSlot(slots, rk.Period.Microseconds(), rk.Limit, now, now)
}

// RateNext returns when a rate key whose jobs still wait, after n of them
// were made deliverable at now, beside slots, should be looked at again:
// the moment its window has room once those n are reserved.
func RateNext(rk *store.RateKey, slots []int64, n int, now int64) int64 {
	for range n {
		slots = RateTake(rk, slots, now)
	}
	_, at := RateRoom(rk, slots, now)
	return max(at, now+1)
}
