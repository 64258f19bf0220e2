package history

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Kind names a violation (or a warning) the checker reports.
type Kind string

// The violations.
const (
	// An ok enqueue (or batch item) named a job the final state does not hold
	// and retention did not delete.
	KindAckedJobMissing Kind = "acked job missing"
	// Two ok acks of one (queue, key), both within the dedup window, named
	// different jobs (or a DUPLICATE_JOB error named another job).
	KindDedupMismatch Kind = "dedup ack mismatch"
	// On an on_duplicate = "reject" queue, a second enqueue of a key within
	// the window was acknowledged instead of failing with DUPLICATE_JOB.
	KindDuplicateAccepted Kind = "duplicate accepted"
	// The final state holds two jobs of one (queue, key) within the window.
	KindDuplicateJob Kind = "duplicate job"
	// A job in the final state that no ok ack names and no enqueue of
	// unknown outcome could have created.
	KindPhantomJob Kind = "phantom job"
	// An ok complete whose job is not completed (or gone) in the final state.
	KindCompletionLost Kind = "completion lost"
	// Two ok completes of one job under different leases.
	KindCompletedTwice Kind = "completed twice"
	// A job in the final state neither finished nor deliverable.
	KindJobLost Kind = "job lost"
	// Two ACQUIRED claims of one effect were each followed by an ok
	// complete_effect: the effect ran twice.
	KindEffectRanTwice Kind = "effect ran twice"
	// An effect was ACQUIRED again after an earlier claim had completed it.
	KindEffectReacquired Kind = "effect reacquired after completion"
	// A job completed ok after claiming an effect, and the final state has no
	// completed record (no stored result) of that effect.
	KindEffectResultMissing Kind = "effect result missing"
	// A claim answered COMPLETED with a result other than the stored one.
	KindEffectResultMismatch Kind = "effect result mismatch"
	// An ok deduplicated=true ack ended before any enqueue that could have
	// created its job started.
	KindDedupBeforeCreate Kind = "dedup hit on a job not yet created"
	// An atomic batch was acknowledged with some of its items failed.
	KindAtomicBatchPartial Kind = "atomic batch partial"
	// More jobs of a queue with a uniqueness rule, with one rule key, than
	// the rule's limit (1 unless rule_limit says) were created within one
	// rule window (a delayed job counts at its delayed_until).
	KindRuleViolated Kind = "rule violated"
	// On a when_running = "run_again" queue, two follow-ups were created of
	// one running job: more than one waited for it.
	KindFollowUpTwice Kind = "two follow-ups of one job"
	// On a when_running = "run_again" queue, an enqueue made while the job
	// it named was running was not followed by a run: it was answered as a
	// plain hit on a job certainly running, or the follow-up it created (or
	// hit while that follow-up certainly waited) ended without a delivery
	// that could have started after it.
	KindTriggerLost Kind = "run_again trigger lost"
	// A follow-up was delivered before the job it follows had ended (by the
	// calls that could have ended it), or while that job's lease was
	// certainly live.
	KindFollowUpEarly Kind = "follow-up ran before its original ended"
	// A follow-up still held (held_by follow_up) in the final state although
	// the job it follows had ended.
	KindFollowUpStuck Kind = "follow-up never released"
	// More jobs of one concurrency key than the queue's concurrency limit
	// held certainly live leases at one moment.
	KindConcurrencyExceeded Kind = "concurrency limit exceeded"
	// On an ordered concurrency queue, a job was delivered while at least
	// limit jobs of its key, created before it, had certainly not yet ended.
	KindOrderViolated Kind = "ordered key delivered out of order"
	// More jobs of one rate key than the queue's rate limit were reserved
	// within one rate period.
	KindRateExceeded Kind = "rate limit exceeded"
	// A log the driver deleted (a Loss) lost acknowledged jobs its node's
	// recovery report did not count: it reported no loss, or fewer jobs
	// than are missing.
	KindLossUnreported Kind = "loss not reported"
	// A job of a debounce queue was delivered sooner than debounce_ms after
	// the enqueue that created or replaced it.
	KindDebouncedEarly Kind = "debounced job delivered early"
	// A record the checker cannot use (an ok enqueue without a job id, an
	// unknown op or outcome, an end before its start).
	KindMalformed Kind = "malformed record"
	// The outbox (check_outbox.go): a committed outbox row that is neither
	// a job in the final state nor in the dead table, nor left in the table.
	KindOutboxLost Kind = "outbox row lost"
	// Two jobs of one outbox row: two of its id's, or two of its own key's
	// within one dedup window.
	KindOutboxDuplicate Kind = "outbox row relayed twice"
	// A job (or a dead row, or a row left in the table) that only rows of
	// rolled-back transactions account for.
	KindOutboxRolledBack Kind = "rolled-back outbox row relayed"
	// A job on an outbox queue keyed by no row the history wrote (a row id
	// never written), and no enqueue made; or a dead or left row never
	// written.
	KindOutboxPhantom Kind = "outbox job of no row"
	// A valid row in the dead table.
	KindOutboxDead Kind = "valid outbox row dead"
	// A job of an outbox row whose job type or payload is none of its
	// rows'.
	KindOutboxMismatch Kind = "outbox job differs from its row"
	// A schedule (check_schedule.go): two jobs of one tick.
	KindScheduleTickTwice Kind = "schedule tick fired twice"
	// A tick between two ticks that have jobs has none.
	KindScheduleTickMissing Kind = "schedule tick missing"
	// A job on the schedule's queue that is no tick's: its key names no
	// tick of the schedule, a tick off its grid, or another job type.
	KindScheduleBadJob Kind = "schedule job of no tick"
)

// Kinds lists every violation kind.
var Kinds = []Kind{KindAckedJobMissing, KindDedupMismatch, KindDuplicateAccepted, KindDuplicateJob,
	KindPhantomJob, KindCompletionLost, KindCompletedTwice, KindJobLost, KindEffectRanTwice,
	KindEffectReacquired, KindEffectResultMissing, KindEffectResultMismatch, KindDedupBeforeCreate,
	KindAtomicBatchPartial, KindRuleViolated, KindDebouncedEarly, KindMalformed, KindLossUnreported,
	KindFollowUpTwice, KindTriggerLost, KindFollowUpEarly, KindFollowUpStuck, KindConcurrencyExceeded,
	KindOrderViolated, KindRateExceeded, KindOutboxLost, KindOutboxDuplicate, KindOutboxRolledBack, KindOutboxPhantom,
	KindOutboxDead, KindOutboxMismatch, KindScheduleTickTwice, KindScheduleTickMissing, KindScheduleBadJob}

// The warnings: reported, not violations.
const (
	// A job still available, scheduled or reserved when the state was read.
	WarnNotSettled Kind = "not settled"
	// The history has no state section: the checks against the store did
	// not run.
	WarnNoState Kind = "no state section"
	// A violation one of whose operations overlaps a loss the node
	// reported with counts (see Check).
	WarnExcusedByLoss Kind = "explained by a reported loss"
	// An outbox row of a committed (or unknown) transaction still in the
	// outbox table when the state was read: the relay had not drained it.
	WarnOutboxLeft Kind = "outbox row not relayed"
	// The schedule's first tick with a job came long after the first node
	// started, or its last long before the state was read (or it made no
	// job at all).
	WarnScheduleLate Kind = "schedule late"
)

// OpRef names an operation: its line (in the file, or its 1-based position
// in History.Ops when built in memory), its id when it has one, and the
// 1-based item of a batch (0: the whole operation).
type OpRef struct {
	Line int    `json:"line"`
	ID   string `json:"id,omitempty"`
	Item int    `json:"item,omitempty"`
}

func (r OpRef) String() string {
	s := fmt.Sprintf("line %d", r.Line)
	if r.ID != "" {
		s += " (" + r.ID + ")"
	}
	if r.Item > 0 {
		s += fmt.Sprintf(" item %d", r.Item)
	}
	return s
}

// Violation is one break of the promise (or one warning).
type Violation struct {
	Kind    Kind    `json:"kind"`
	Message string  `json:"message"`
	Ops     []OpRef `json:"ops,omitempty"`
	// Job is the missing job of an acked-job-missing violation.
	Job string `json:"job,omitempty"`
}

func (v Violation) String() string {
	refs := make([]string, len(v.Ops))
	for i, r := range v.Ops {
		refs[i] = r.String()
	}
	s := string(v.Kind) + ": " + v.Message
	if len(refs) > 0 {
		s += " [" + strings.Join(refs, ", ") + "]"
	}
	return s
}

// Report is what Check found.
type Report struct {
	Ops        int                        `json:"ops"`
	Counts     map[OpKind]map[Outcome]int `json:"counts"`
	Violations []Violation                `json:"violations"`
	Warnings   []Violation                `json:"warnings"`
	HasState   bool                       `json:"has_state"`
	// Outbox counts the outbox rows and what became of them; nil when the
	// history wrote none.
	Outbox *OutboxCounts `json:"outbox,omitempty"`
	// Schedule sums the schedule's ticks; nil when the state has none.
	Schedule   *ScheduleCounts `json:"schedule,omitempty"`
	stateSizes [4]int
}

// OK reports whether there is no violation (warnings do not count).
func (r Report) OK() bool { return len(r.Violations) == 0 }

// ByKind counts the violations by kind.
func (r Report) ByKind() map[Kind]int {
	m := map[Kind]int{}
	for _, v := range r.Violations {
		m[v.Kind]++
	}
	return m
}

// String is a summary for people.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operations: %d\n", r.Ops)
	ops := make([]string, 0, len(r.Counts))
	for op := range r.Counts {
		ops = append(ops, string(op))
	}
	sort.Strings(ops)
	for _, op := range ops {
		c := r.Counts[OpKind(op)]
		fmt.Fprintf(&b, "  %-16s ok %d, fail %d, unknown %d\n", op, c[OK], c[Fail], c[Unknown])
	}
	if r.HasState {
		fmt.Fprintf(&b, "state: %d jobs, %d dedup records, %d effects, %d queue policies\n",
			r.stateSizes[0], r.stateSizes[1], r.stateSizes[2], r.stateSizes[3])
	} else {
		b.WriteString("state: none\n")
	}
	byKind := r.ByKind()
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	fmt.Fprintf(&b, "violations: %d\n", len(r.Violations))
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %s: %d\n", k, byKind[Kind(k)])
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  - %s\n", v)
	}
	if r.Outbox != nil {
		b.WriteString(r.Outbox.String())
	}
	if r.Schedule != nil {
		b.WriteString(r.Schedule.String())
	}
	fmt.Fprintf(&b, "warnings: %d\n", len(r.Warnings))
	for _, v := range r.Warnings {
		fmt.Fprintf(&b, "  - %s\n", v)
	}
	if r.OK() {
		b.WriteString("result: valid (no violation found)\n")
	} else {
		b.WriteString("result: INVALID\n")
	}
	return b.String()
}

// enq is one enqueue: a single enqueue, or one item of a batch with the
// batch's outcome applied.
type enq struct {
	ref           OpRef
	queue, key    string
	ruleKey       string
	start, end    time.Time
	outcome       Outcome
	reason, jobID string
	dedup         bool
	replaced      bool
	follows       string    // the job a follow-up ack says it follows
	delayedUntil  time.Time // the run-at a delaying rule gave the job
	concKey       string
}

func (e *enq) canCreate() bool {
	return e.outcome == Unknown || (e.outcome == OK && !e.dedup)
}

type checker struct {
	h        *History
	rep      *Report
	refs     []OpRef
	bad      []bool // malformed records, left out of the checks
	enqs     []*enq
	policies map[string]QueuePolicy
	jobs     map[string]*Job
	deleted  map[string]bool
	naming   map[string][]OpRef // job id -> the operations naming it (refsNaming)
	flow     *flowIndex         // leases, ends and follow-ups
	ob       *outboxIndex       // the outbox rows (check_outbox.go)
}

// Check checks the history against Sepp's promise and reports every
// violation found. It only reports what the history proves: an operation of
// unknown outcome may or may not have taken effect, and an ack counts as
// within a dedup window only when it is within it whatever the real order
// of the concurrent operations was.
//
// Two jobs of one key must have been created a whole window apart; the
// checker bounds when each was created by the calls that name it (and by the
// state's created_at) and reports a pair only when no such spacing fits. It
// compares the times of different processes, and those with the store's
// created_at, as one clock: the driver's clients should share the host's
// clock, or findings near a window's edge cannot be trusted. On a
// when_running = "run_again" queue the jobs of one chain of follow-ups (each
// made while the one before it ran) are not held to the window among
// themselves. The flow-control checks (follow-ups, rules with a limit,
// per-key concurrency and rate) judge leases and ends by what is certain;
// see the comment before clockTolerance.
//
// A loss the driver caused (History.Losses) may take any write its node
// made while it wrote the deleted log: a violation one of whose operations
// overlaps that time is explained by the loss, and reported as a warning,
// only when the node's recovery reported the loss with counts, and only as
// long as the acknowledged jobs missing there are no more than the jobs it
// reported; otherwise the loss is a violation of its own
// (KindLossUnreported), besides what it explains.
func Check(h *History) Report {
	rep := Report{Counts: map[OpKind]map[Outcome]int{}, Ops: len(h.Ops), Violations: []Violation{}, Warnings: []Violation{}}
	c := &checker{h: h, rep: &rep, policies: map[string]QueuePolicy{}, jobs: map[string]*Job{}, deleted: map[string]bool{}}
	if h.State != nil {
		rep.HasState = true
		s := h.State
		rep.stateSizes = [4]int{len(s.Jobs), len(s.Dedup), len(s.Effects), len(s.Queues)}
		for _, p := range s.Queues {
			c.policies[p.Queue] = p
		}
		for i := range s.Jobs {
			c.jobs[s.Jobs[i].ID] = &s.Jobs[i]
		}
		for _, id := range s.Deleted {
			c.deleted[id] = true
		}
	} else {
		c.warn(WarnNoState, "the history has no state section: durability, phantom, completion and effect result checks did not run")
	}
	c.ob = newOutboxIndex()
	c.flatten()
	c.flow = c.indexFlow()
	c.checkAcked()
	c.checkDedupAcks()
	c.checkDedupBeforeCreate()
	c.checkFinalJobs()
	c.checkCompletions()
	c.checkEffects()
	c.checkRules()
	c.checkDebounce()
	c.checkRunAgain()
	c.checkConcurrency()
	c.checkRate()
	c.checkOutbox()
	c.checkSchedule()
	c.explainLosses()
	return rep
}

// explainLosses moves the violations the driver's reported losses explain
// to the warnings, and reports a loss whose report did not count what it
// lost.
func (c *checker) explainLosses() {
	losses := c.h.Losses
	if len(losses) == 0 {
		return
	}
	byLine := make(map[int]int, len(c.refs))
	for i, r := range c.refs {
		byLine[r.Line] = i
	}
	// overlaps is the first loss whose span one of refs' operations
	// overlaps, or -1. An outbox row lost overlaps a loss whose span ends
	// after its transaction began: the relay may have enqueued it at any
	// moment after that. (A row refused for good, lost, names no job: the
	// store never held it, and no loss of the store's explains it.)
	overlaps := func(v Violation) int {
		for _, r := range v.Ops {
			i, ok := byLine[r.Line]
			if !ok {
				continue
			}
			op := &c.h.Ops[i]
			for li, l := range losses {
				if !op.Start.After(l.To.Time) && (v.Kind == KindOutboxLost || !op.End.Before(l.From.Time)) {
					return li
				}
			}
		}
		return -1
	}
	missing := make([]map[string]bool, len(losses))
	missingRefs := make([][]OpRef, len(losses))
	kept := c.rep.Violations[:0]
	var explained []Violation
	for _, v := range c.rep.Violations {
		li := overlaps(v)
		if li < 0 || (v.Kind == KindOutboxLost && v.Job == "") {
			kept = append(kept, v)
			continue
		}
		if v.Kind == KindAckedJobMissing || v.Kind == KindOutboxLost {
			if missing[li] == nil {
				missing[li] = map[string]bool{}
			}
			missing[li][v.Job] = true
			missingRefs[li] = append(missingRefs[li], v.Ops...)
		}
		if !losses[li].Reported {
			kept = append(kept, v)
			continue
		}
		explained = append(explained, v)
	}
	c.rep.Violations = kept
	for _, v := range explained {
		c.warn(WarnExcusedByLoss, v.String(), v.Ops...)
	}
	for li, l := range losses {
		n := int64(len(missing[li]))
		switch {
		case n > 0 && !l.Reported:
			c.violate(KindLossUnreported, fmt.Sprintf("node %d's deleted log %s lost %d acknowledged jobs, and its recovery reported no loss", l.Node, l.File, n), missingRefs[li]...)
		case n > l.Jobs:
			c.violate(KindLossUnreported, fmt.Sprintf("node %d's deleted log %s lost %d acknowledged jobs, and its recovery reported %d (%q)", l.Node, l.File, n, l.Jobs, l.Report), missingRefs[li]...)
		}
	}
}

func (c *checker) violate(k Kind, msg string, refs ...OpRef) {
	c.rep.Violations = append(c.rep.Violations, Violation{Kind: k, Message: msg, Ops: refs})
}

func (c *checker) warn(k Kind, msg string, refs ...OpRef) {
	c.rep.Warnings = append(c.rep.Warnings, Violation{Kind: k, Message: msg, Ops: refs})
}

func (c *checker) policy(queue string) (window time.Duration, bounded bool, mode string) {
	p, ok := c.policies[queue]
	mode = "return_original"
	if !ok {
		return 0, false, mode
	}
	if p.OnDuplicate != "" {
		mode = p.OnDuplicate
	}
	return p.Window(), p.DedupWindowMS > 0, mode
}

var knownOps = map[OpKind]bool{OpEnqueue: true, OpEnqueueBatch: true, OpReserve: true, OpComplete: true,
	OpFail: true, OpClaimEffect: true, OpCompleteEffect: true, OpReleaseEffect: true, OpGetJob: true, OpLookup: true, OpOutboxTx: true}

func (c *checker) flatten() {
	c.refs = make([]OpRef, len(c.h.Ops))
	c.bad = make([]bool, len(c.h.Ops))
	for i := range c.h.Ops {
		r := &c.h.Ops[i]
		ref := OpRef{Line: r.Line, ID: r.ID}
		if ref.Line == 0 {
			ref.Line = i + 1
		}
		c.refs[i] = ref
		if c.rep.Counts[r.Op] == nil {
			c.rep.Counts[r.Op] = map[Outcome]int{}
		}
		c.rep.Counts[r.Op][r.Outcome]++
		bad := ""
		switch {
		case !knownOps[r.Op]:
			bad = fmt.Sprintf("unknown op %q", r.Op)
		case r.Outcome != OK && r.Outcome != Fail && r.Outcome != Unknown:
			bad = fmt.Sprintf("unknown outcome %q", r.Outcome)
		case r.Start.IsZero() || r.End.IsZero():
			bad = "no start or no end time"
		case r.End.Before(r.Start.Time):
			bad = "end before start"
		}
		if bad != "" {
			c.bad[i] = true
			c.violate(KindMalformed, bad, ref)
			continue
		}
		switch r.Op {
		case OpEnqueue:
			c.addEnq(&enq{ref: ref, queue: r.Queue, key: r.Key, ruleKey: r.RuleKey, start: r.Start.Time, end: r.End.Time,
				outcome: r.Outcome, reason: r.Reason, jobID: r.JobID, dedup: r.Deduplicated, replaced: r.Replaced,
				follows: r.FollowsJobID, delayedUntil: r.DelayedUntil.Time, concKey: r.ConcKey})
		case OpEnqueueBatch:
			failed := 0
			for j, it := range r.Items {
				e := &enq{ref: ref, queue: it.Queue, key: it.Key, ruleKey: it.RuleKey, start: r.Start.Time, end: r.End.Time,
					outcome: r.Outcome, reason: r.Reason, concKey: it.ConcKey}
				e.ref.Item = j + 1
				if e.queue == "" {
					e.queue = r.Queue
				}
				if r.Outcome == OK {
					e.outcome = it.Outcome
					if e.outcome == "" {
						e.outcome = OK
					}
					e.reason, e.jobID, e.dedup, e.replaced = it.Reason, it.JobID, it.Deduplicated, it.Replaced
					e.follows, e.delayedUntil = it.FollowsJobID, it.DelayedUntil.Time
					if e.outcome == Fail {
						failed++
					}
				}
				c.addEnq(e)
			}
			if r.Atomic && r.Outcome == OK && failed > 0 {
				c.violate(KindAtomicBatchPartial, fmt.Sprintf("atomic batch acknowledged with %d of %d items failed", failed, len(r.Items)), ref)
			}
		case OpOutboxTx:
			c.addOutboxTx(i, ref)
		}
	}
}

func (c *checker) addEnq(e *enq) {
	if e.outcome == OK && e.jobID == "" {
		c.violate(KindMalformed, "ok enqueue without a job id", e.ref)
	}
	c.enqs = append(c.enqs, e)
}

func (c *checker) checkAcked() {
	if c.h.State == nil {
		return
	}
	for _, e := range c.enqs {
		if e.outcome != OK || e.jobID == "" || c.deleted[e.jobID] {
			continue
		}
		if _, ok := c.jobs[e.jobID]; !ok {
			c.rep.Violations = append(c.rep.Violations, Violation{Kind: KindAckedJobMissing, Job: e.jobID, Ops: []OpRef{e.ref},
				Message: fmt.Sprintf("enqueue of %s/%q acknowledged job %s, which the final state does not hold", e.queue, e.key, e.jobID)})
		}
	}
}

type qk struct{ queue, key string }

func (c *checker) groups() (map[qk][]*enq, []qk) {
	g := map[qk][]*enq{}
	var order []qk
	for _, e := range c.enqs {
		if e.key == "" {
			continue
		}
		k := qk{e.queue, e.key}
		if g[k] == nil {
			order = append(order, k)
		}
		g[k] = append(g[k], e)
	}
	for _, k := range order {
		sort.SliceStable(g[k], func(i, j int) bool { return g[k][i].start.Before(g[k][j].start) })
	}
	return g, order
}

// span is when a job may have been created: from lo to hi, either end
// open when nothing bounds it.
type span struct {
	lo, hi         time.Time
	loOpen, hiOpen bool
}

var openSpan = span{loOpen: true, hiOpen: true}

// separable reports whether two jobs created within a and b can have been
// created a whole window apart, as two jobs of one key must be.
func separable(a, b span, window time.Duration, bounded bool) bool {
	if !bounded {
		return false
	}
	if a.loOpen || a.hiOpen || b.loOpen || b.hiOpen {
		return true
	}
	return b.hi.Sub(a.lo) >= window || a.hi.Sub(b.lo) >= window
}

// names reports whether e's answer names a job: an ok ack, or a
// DUPLICATE_JOB error with the original's id.
func (e *enq) names() bool {
	return e.jobID != "" && (e.outcome == OK || (e.outcome == Fail && e.reason == "DUPLICATE_JOB"))
}

// keyJob is a job of one (queue, key) and the answers that name it.
type keyJob struct {
	id      string
	evs     []*enq // the answers naming it, by start
	oks     []*enq // the ok acks among them
	creator *enq   // the ok ack with deduplicated = false, if any
}

func (j *keyJob) ref() OpRef {
	if j.creator != nil {
		return j.creator.ref
	}
	return j.evs[0].ref
}

// keyJobs lists the jobs the answers of one key name, in order of their first
// answer.
func keyJobs(evs []*enq) []*keyJob {
	var jobs []*keyJob
	byID := map[string]*keyJob{}
	for _, e := range evs {
		if !e.names() {
			continue
		}
		j := byID[e.jobID]
		if j == nil {
			j = &keyJob{id: e.jobID}
			byID[e.jobID] = j
			jobs = append(jobs, j)
		}
		j.evs = append(j.evs, e)
		if e.outcome == OK {
			j.oks = append(j.oks, e)
			if !e.dedup && j.creator == nil {
				j.creator = e
			}
		}
	}
	return jobs
}

// creation bounds when j was created, from the answers of its key (evs): not
// after any answer naming it ended, within its creator's call when an ack
// says it created it, else not before the first enqueue of unknown outcome
// that could have created it started; and less than a window before any
// answer naming it started (the answer found its dedup record alive).
func creation(j *keyJob, evs []*enq, window time.Duration, bounded bool) span {
	sp := span{loOpen: true}
	for i, e := range j.evs {
		if i == 0 || e.end.Before(sp.hi) {
			sp.hi = e.end
		}
	}
	if j.creator != nil {
		sp.lo, sp.loOpen = j.creator.start, false
	} else {
		for _, e := range evs {
			if e.outcome == Unknown && !e.start.After(sp.hi) && (sp.loOpen || e.start.Before(sp.lo)) {
				sp.lo, sp.loOpen = e.start, false
			}
		}
	}
	if bounded {
		for _, e := range j.evs {
			if lo := e.start.Add(-window); sp.loOpen || lo.After(sp.lo) {
				sp.lo, sp.loOpen = lo, false
			}
		}
	}
	return sp
}

func (c *checker) checkDedupAcks() {
	g, order := c.groups()
	for _, k := range order {
		window, bounded, mode := c.policy(k.queue)
		reject := mode == "reject"
		jobs := keyJobs(g[k])
		if reject {
			for _, j := range jobs {
				switch {
				case len(j.oks) >= 2:
					var refs []OpRef
					for _, e := range j.oks {
						refs = append(refs, e.ref)
					}
					c.violate(KindDuplicateAccepted, fmt.Sprintf("%s/%q: %d enqueues acknowledged with job %s on an on_duplicate = \"reject\" queue; all but the first want DUPLICATE_JOB", k.queue, k.key, len(j.oks), j.id), refs...)
				case len(j.oks) == 1 && j.oks[0].dedup:
					c.violate(KindDuplicateAccepted, fmt.Sprintf("%s/%q: a dedup hit on job %s was acknowledged on an on_duplicate = \"reject\" queue; want DUPLICATE_JOB", k.queue, k.key, j.id), j.oks[0].ref)
				}
			}
		}
		spans := make([]span, len(jobs))
		for i, j := range jobs {
			spans[i] = creation(j, g[k], window, bounded)
		}
		for a := range jobs {
			for b := a + 1; b < len(jobs); b++ {
				if separable(spans[a], spans[b], window, bounded) || c.sameChain(k.queue, jobs[a].id, jobs[b].id) {
					continue
				}
				ja, jb := jobs[a], jobs[b]
				if reject && len(ja.oks) > 0 && len(jb.oks) > 0 {
					c.violate(KindDuplicateAccepted, fmt.Sprintf("%s/%q: enqueues acknowledged with jobs %s and %s within one dedup window on an on_duplicate = \"reject\" queue; want DUPLICATE_JOB", k.queue, k.key, ja.id, jb.id), ja.ref(), jb.ref())
					continue
				}
				c.violate(KindDedupMismatch, fmt.Sprintf("%s/%q: within one dedup window, answers named job %s and job %s", k.queue, k.key, ja.id, jb.id), ja.ref(), jb.ref())
			}
		}
	}
}

func (c *checker) checkDedupBeforeCreate() {
	g, _ := c.groups()
	for _, e := range c.enqs {
		if e.outcome != OK || !e.dedup || e.key == "" {
			continue
		}
		evs := g[qk{e.queue, e.key}]
		var creator *enq
		for _, o := range evs {
			if o.outcome == OK && !o.dedup && o.jobID == e.jobID {
				creator = o
				break
			}
		}
		if creator != nil {
			if e.end.Before(creator.start) {
				c.violate(KindDedupBeforeCreate, fmt.Sprintf("%s/%q: a deduplicated ack of job %s ended before the enqueue that created it started", e.queue, e.key, e.jobID), e.ref, creator.ref)
			}
			continue
		}
		could := false
		var first *enq
		for _, o := range evs {
			if o.outcome == Unknown && o.start.Before(e.end) {
				could = true
			}
			if first == nil && o.outcome == OK && !o.dedup {
				first = o
			}
		}
		if could {
			continue
		}
		refs := []OpRef{e.ref}
		if first != nil && e.end.Before(first.start) {
			refs = append(refs, first.ref)
		}
		c.violate(KindDedupBeforeCreate, fmt.Sprintf("%s/%q: a deduplicated ack of job %s, which no ack says it created, ended before any enqueue of unknown outcome of the key started", e.queue, e.key, e.jobID), refs...)
	}
}

func lower(s string) string { return strings.ToLower(s) }

// refsNaming lists the operations (and batch items) whose answer names
// jobID. The index is built once, on the first call: a run that ends with
// thousands of jobs still queued asks for each.
func (c *checker) refsNaming(jobID string) []OpRef {
	if c.naming == nil {
		c.naming = map[string][]OpRef{}
		for i := range c.h.Ops {
			r := &c.h.Ops[i]
			if r.JobID != "" {
				c.naming[r.JobID] = append(c.naming[r.JobID], c.refs[i])
				continue
			}
			for j, it := range r.Items {
				if it.JobID != "" {
					ref := c.refs[i]
					ref.Item = j + 1
					c.naming[it.JobID] = append(c.naming[it.JobID], ref)
				}
			}
		}
	}
	refs := c.naming[jobID]
	return refs[:len(refs):len(refs)] // a caller's append copies
}

func (c *checker) checkFinalJobs() {
	if c.h.State == nil {
		return
	}
	named := map[string]*enq{} // job id -> the earliest ok ack naming it
	for _, e := range c.enqs {
		if e.outcome == OK && e.jobID != "" {
			if o := named[e.jobID]; o == nil || e.start.Before(o.start) {
				named[e.jobID] = e
			}
		}
	}
	byKey := map[qk][]*Job{}
	var order []qk
	for i := range c.h.State.Jobs {
		j := &c.h.State.Jobs[i]
		switch lower(j.State) {
		case "completed", "dead", "cancelled":
		case "available", "scheduled", "reserved":
			c.warn(WarnNotSettled, fmt.Sprintf("job %s (%s/%q) is %s", j.ID, j.Queue, j.Key, lower(j.State)), c.refsNaming(j.ID)...)
		default:
			c.violate(KindJobLost, fmt.Sprintf("job %s (%s/%q) is %q: neither finished nor deliverable", j.ID, j.Queue, j.Key, j.State), c.refsNaming(j.ID)...)
		}
		if named[j.ID] == nil && !c.ob.queues[j.Queue] {
			could := false
			for _, e := range c.enqs {
				if e.outcome == Unknown && e.queue == j.Queue && e.key == j.Key && (j.CreatedAt.IsZero() || !e.start.After(j.CreatedAt.Time)) {
					could = true
					break
				}
			}
			if !could {
				c.violate(KindPhantomJob, fmt.Sprintf("job %s (%s/%q) is in the final state, but no ok ack names it and no enqueue of unknown outcome could have created it", j.ID, j.Queue, j.Key), c.refsNaming(j.ID)...)
			}
		}
		if j.Key != "" && c.ob.byKey[qk{j.Queue, j.Key}] == nil {
			k := qk{j.Queue, j.Key}
			if byKey[k] == nil {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], j)
		}
	}
	g, _ := c.groups()
	for _, k := range order {
		jobs := byKey[k]
		window, bounded, _ := c.policy(k.queue)
		kjobs := map[string]*keyJob{}
		for _, j := range keyJobs(g[k]) {
			kjobs[j.id] = j
		}
		spanOf := func(j *Job) span {
			if !j.CreatedAt.IsZero() {
				return span{lo: j.CreatedAt.Time, hi: j.CreatedAt.Time}
			}
			if kj := kjobs[j.ID]; kj != nil {
				return creation(kj, g[k], window, bounded)
			}
			return openSpan
		}
		for a := 0; a < len(jobs); a++ {
			for b := a + 1; b < len(jobs); b++ {
				if separable(spanOf(jobs[a]), spanOf(jobs[b]), window, bounded) || c.sameChain(k.queue, jobs[a].ID, jobs[b].ID) {
					continue
				}
				var refs []OpRef
				for _, j := range []*Job{jobs[a], jobs[b]} {
					if kj := kjobs[j.ID]; kj != nil {
						refs = append(refs, kj.ref())
					}
				}
				c.violate(KindDuplicateJob, fmt.Sprintf("%s/%q: the final state holds jobs %s and %s within one dedup window", k.queue, k.key, jobs[a].ID, jobs[b].ID), refs...)
			}
		}
	}
}

func (c *checker) checkCompletions() {
	first := map[string]int{} // job id -> index of its first ok complete
	reported := map[string]bool{}
	for i := range c.h.Ops {
		r := &c.h.Ops[i]
		if c.bad[i] {
			continue
		}
		if r.Op != OpComplete || r.Outcome != OK || r.JobID == "" {
			continue
		}
		if f, ok := first[r.JobID]; !ok {
			first[r.JobID] = i
		} else if !reported[r.JobID] && r.LeaseToken != "" && c.h.Ops[f].LeaseToken != "" && r.LeaseToken != c.h.Ops[f].LeaseToken {
			reported[r.JobID] = true
			c.violate(KindCompletedTwice, fmt.Sprintf("job %s completed ok under lease %s and again under lease %s", r.JobID, c.h.Ops[f].LeaseToken, r.LeaseToken), c.refs[f], c.refs[i])
		}
		if c.h.State == nil || c.deleted[r.JobID] {
			continue
		}
		j, ok := c.jobs[r.JobID]
		switch {
		case !ok:
			c.violate(KindCompletionLost, fmt.Sprintf("job %s completed ok but is not in the final state", r.JobID), c.refs[i])
		case lower(j.State) != "completed":
			c.violate(KindCompletionLost, fmt.Sprintf("job %s completed ok but is %s in the final state", r.JobID, lower(j.State)), c.refs[i])
		}
	}
}

func (c *checker) checkEffects() {
	type claim struct {
		i    int
		done int // index of the ok complete_effect, -1 if none
	}
	type eff struct{ scope, key string }
	claims := map[eff][]*claim{}
	var order []eff
	completedJobs := map[string]bool{}
	for i := range c.h.Ops {
		r := &c.h.Ops[i]
		if c.bad[i] {
			continue
		}
		if r.Op == OpComplete && r.Outcome == OK {
			completedJobs[r.JobID] = true
		}
		if r.Op == OpClaimEffect && r.Outcome == OK && r.EffectOutcome == EffectAcquired {
			k := eff{r.Scope, r.Key}
			if claims[k] == nil {
				order = append(order, k)
			}
			claims[k] = append(claims[k], &claim{i: i, done: -1})
		}
	}
	for k := range claims {
		sort.SliceStable(claims[k], func(a, b int) bool {
			return c.h.Ops[claims[k][a].i].Start.Before(c.h.Ops[claims[k][b].i].Start.Time)
		})
	}
	// Link each ok complete_effect to its claim: by token, else the latest
	// earlier claim of the same process.
	for i := range c.h.Ops {
		r := &c.h.Ops[i]
		if c.bad[i] {
			continue
		}
		if r.Op != OpCompleteEffect || r.Outcome != OK {
			continue
		}
		var match *claim
		for _, cl := range claims[eff{r.Scope, r.Key}] {
			o := &c.h.Ops[cl.i]
			if r.EffectToken != "" && o.EffectToken != "" {
				if o.EffectToken == r.EffectToken {
					match = cl
				}
				continue
			}
			if o.Process == r.Process && !o.Start.After(r.Start.Time) {
				match = cl
			}
		}
		if match != nil && match.done < 0 {
			match.done = i
		}
	}
	for _, k := range order {
		var done []*claim
		for _, cl := range claims[k] {
			if cl.done >= 0 {
				done = append(done, cl)
			}
		}
		if len(done) >= 2 {
			var refs []OpRef
			for _, cl := range done {
				refs = append(refs, c.refs[cl.i], c.refs[cl.done])
			}
			c.violate(KindEffectRanTwice, fmt.Sprintf("effect %s/%q: %d ACQUIRED claims each completed ok", k.scope, k.key, len(done)), refs...)
			continue
		}
		if len(done) == 1 {
			d := done[0]
			end := c.h.Ops[d.done].End.Time
			for _, cl := range claims[k] {
				if cl != d && c.h.Ops[cl.i].Start.After(end) {
					c.violate(KindEffectReacquired, fmt.Sprintf("effect %s/%q was ACQUIRED again after it had been completed", k.scope, k.key), c.refs[d.i], c.refs[d.done], c.refs[cl.i])
				}
			}
		}
	}
	if c.h.State == nil {
		return
	}
	stored := map[eff]*Effect{}
	for i := range c.h.State.Effects {
		e := &c.h.State.Effects[i]
		stored[eff{e.Scope, e.Key}] = e
	}
	released := map[string]bool{} // effect tokens released ok
	for i := range c.h.Ops {
		r := &c.h.Ops[i]
		if c.bad[i] {
			continue
		}
		if r.Op == OpReleaseEffect && r.Outcome == OK && r.EffectToken != "" {
			released[r.EffectToken] = true
		}
	}
	missing := map[eff]bool{}
	for i := range c.h.Ops {
		r := &c.h.Ops[i]
		if c.bad[i] {
			continue
		}
		if r.Op != OpClaimEffect || r.Outcome != OK {
			continue
		}
		k := eff{r.Scope, r.Key}
		s := stored[k]
		if r.EffectOutcome == EffectCompleted && s != nil && lower(s.State) == "completed" && r.EffectResult != s.Result {
			c.violate(KindEffectResultMismatch, fmt.Sprintf("effect %s/%q: a claim answered COMPLETED with result %q, the stored result is %q", k.scope, k.key, r.EffectResult, s.Result), c.refs[i])
		}
		if (r.EffectOutcome != EffectAcquired && r.EffectOutcome != EffectCompleted) || r.JobID == "" || !completedJobs[r.JobID] || missing[k] || (r.EffectToken != "" && released[r.EffectToken]) {
			continue
		}
		if s == nil || lower(s.State) != "completed" {
			missing[k] = true
			c.violate(KindEffectResultMissing, fmt.Sprintf("effect %s/%q was claimed by job %s, which completed ok, but the final state has no stored result for it", k.scope, k.key, r.JobID), c.refs[i])
		}
	}
}

// debounceTolerance is how far apart the checker lets the clocks of the
// clients and the server be when it judges a debounced delivery.
const debounceTolerance = 2 * time.Millisecond

// checkDebounce checks the queues with on_duplicate = "debounce": a job
// created, or replaced by a hit, is scheduled debounce_ms after that enqueue,
// so no reserve that started after the enqueue ended may deliver it before
// debounce_ms after the enqueue started.
func (c *checker) checkDebounce() {
	reserves := map[string][]int{} // job id -> its ok reserves
	for i := range c.h.Ops {
		r := &c.h.Ops[i]
		if !c.bad[i] && r.Op == OpReserve && r.Outcome == OK && r.JobID != "" {
			reserves[r.JobID] = append(reserves[r.JobID], i)
		}
	}
	for _, e := range c.enqs {
		d := time.Duration(c.policies[e.queue].DebounceMS) * time.Millisecond
		if d <= 0 || e.outcome != OK || e.jobID == "" || (e.dedup && !e.replaced) {
			continue
		}
		due := e.start.Add(d - debounceTolerance)
		for _, i := range reserves[e.jobID] {
			r := &c.h.Ops[i]
			if r.Start.After(e.end) && r.End.Before(due) {
				c.violate(KindDebouncedEarly, fmt.Sprintf("%s/%q: job %s was delivered %v after the enqueue that scheduled it started; debounce_ms is %v",
					e.queue, e.key, e.jobID, r.End.Sub(e.start).Round(time.Millisecond), d), e.ref, c.refs[i])
			}
		}
	}
}

// groupBy groups the items key accepts by their key, and lists the keys in
// the order of their first item.
func groupBy[T any](items []T, key func(T) (qk, bool)) (map[qk][]T, []qk) {
	groups := map[qk][]T{}
	var order []qk
	for _, it := range items {
		k, ok := key(it)
		if !ok {
			continue
		}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], it)
	}
	return groups, order
}

// The checks of per-key flow control: rules with a limit and an action,
// when_running = "run_again" follow-ups, [queues.concurrency] and
// [queues.rate].
//
// They judge what is certain whatever the real order of concurrent calls:
//
//   - A reserve delivered its job at some moment within its call, and the
//     job certainly held that lease from the reserve's end until the
//     earliest of: the start of a complete or fail under that lease whose
//     outcome is ok or unknown, and the lease's expiry (lease_expires_at,
//     less clockTolerance). A lease without an expiry in the record is not
//     certainly held at all.
//   - A job certainly had not reached a final state before its finalLo:
//     never, when the final state shows it still to run; for a completed
//     job, the start of the first complete of it that may have taken effect
//     (and its finalized_at less clockTolerance); for a dead or cancelled
//     one, its finalized_at less clockTolerance.
//   - Times of the store (created_at, delayed_until, lease_expires_at,
//     finalized_at) and of the clients are compared with clockTolerance to
//     spare when they meet; times of the store among themselves (the rule
//     slots of the final state) are compared exactly, as the store compares
//     them.

// clockTolerance is how far apart the clocks of the driver's processes and
// of the nodes (each anchored to the database's on PostgreSQL, the host's
// on the embedded store) may be when the checker compares them.
const clockTolerance = 100 * time.Millisecond

// forever is the finalLo of a job that had not ended when the state was
// read.
var forever = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// lease is what one ok reserve shows: job held that lease certainly from
// from to until (empty when until is not after from).
type lease struct {
	i           int // the reserve's index in History.Ops
	job, token  string
	queue       string
	conc, rate  string
	from, until time.Time
}

func (l *lease) live() bool { return l.until.After(l.from) }

type flowIndex struct {
	leases   []*lease
	leasesOf map[string][]*lease // job id -> its leases, by reserve start
	reserves map[string][]int    // job id -> its ok reserves
	unknown  []int               // reserves of unknown outcome
	follows  map[string]string   // follow-up -> the job it follows
	creators map[string][]*enq   // follow-up -> the ok acks that created it
	compl    map[string][]int    // job id -> its completes of ok or unknown outcome
}

func (c *checker) indexFlow() *flowIndex {
	f := &flowIndex{leasesOf: map[string][]*lease{}, reserves: map[string][]int{}, follows: map[string]string{},
		creators: map[string][]*enq{}, compl: map[string][]int{}}
	type lk struct{ job, token string }
	ends := map[lk]time.Time{} // the earliest start of a call that may have ended the lease
	for i := range c.h.Ops {
		r := &c.h.Ops[i]
		if c.bad[i] {
			continue
		}
		switch r.Op {
		case OpReserve:
			switch {
			case r.Outcome == Unknown:
				f.unknown = append(f.unknown, i)
			case r.Outcome == OK && r.JobID != "":
				f.reserves[r.JobID] = append(f.reserves[r.JobID], i)
			}
		case OpComplete, OpFail:
			if r.Outcome == Fail || r.JobID == "" {
				continue
			}
			if r.Op == OpComplete {
				f.compl[r.JobID] = append(f.compl[r.JobID], i)
			}
			k := lk{r.JobID, r.LeaseToken}
			if e, ok := ends[k]; !ok || r.Start.Before(e) {
				ends[k] = r.Start.Time
			}
		}
	}
	for job, is := range f.reserves {
		for _, i := range is {
			r := &c.h.Ops[i]
			l := &lease{i: i, job: job, token: r.LeaseToken, queue: r.Queue, conc: r.ConcKey, rate: r.RateKey, from: r.End.Time, until: r.End.Time}
			if !r.LeaseExpiresAt.IsZero() {
				l.until = r.LeaseExpiresAt.Add(-clockTolerance)
				if e, ok := ends[lk{job, r.LeaseToken}]; ok && e.Before(l.until) {
					l.until = e
				}
			}
			f.leases = append(f.leases, l)
			f.leasesOf[job] = append(f.leasesOf[job], l)
		}
	}
	sort.Slice(f.leases, func(a, b int) bool { return f.leases[a].i < f.leases[b].i })
	for _, ls := range f.leasesOf {
		sort.Slice(ls, func(a, b int) bool { return ls[a].i < ls[b].i })
	}
	for _, e := range c.enqs {
		if e.outcome == OK && !e.dedup && e.follows != "" && e.jobID != "" {
			f.follows[e.jobID] = e.follows
			f.creators[e.jobID] = append(f.creators[e.jobID], e)
		}
	}
	if c.h.State != nil {
		for _, j := range c.h.State.Jobs {
			if j.FollowsJobID != "" && f.follows[j.ID] == "" {
				f.follows[j.ID] = j.FollowsJobID
			}
		}
	}
	return f
}

func (c *checker) runsAgain(queue string) bool {
	return c.policies[queue].WhenRunning == "run_again"
}

// root is the first job of the chain of follow-ups id belongs to.
func (f *flowIndex) root(id string) string {
	for n := 0; n < 1000; n++ {
		o, ok := f.follows[id]
		if !ok {
			break
		}
		id = o
	}
	return id
}

// sameChain reports whether jobs a and b of a run_again queue are one
// chain of follow-ups (each created while the one before it ran, within its
// key's window, as run_again wants).
func (c *checker) sameChain(queue, a, b string) bool {
	return c.runsAgain(queue) && c.flow.root(a) == c.flow.root(b)
}

func lowerState(j *Job) string { return lower(j.State) }

func pending(state string) bool {
	return state == "available" || state == "scheduled" || state == "reserved"
}

// finalLo is a moment before which job id had certainly not reached a
// final state; false when nothing bounds it.
func (c *checker) finalLo(id string) (time.Time, bool) {
	if c.h.State == nil {
		return time.Time{}, false
	}
	j := c.jobs[id]
	if j == nil {
		return time.Time{}, false
	}
	st := lowerState(j)
	if pending(st) {
		return forever, true
	}
	var lo time.Time
	ok := false
	if !j.FinalizedAt.IsZero() {
		lo, ok = j.FinalizedAt.Add(-clockTolerance), true
	}
	if st == "completed" {
		is := c.flow.compl[id]
		if len(is) > 0 {
			first := c.h.Ops[is[0]].Start.Time
			for _, i := range is[1:] {
				if s := c.h.Ops[i].Start.Time; s.Before(first) {
					first = s
				}
			}
			if !ok || first.After(lo) {
				lo, ok = first, true
			}
		}
	}
	return lo, ok
}

// checkRunAgain checks the queues with when_running = "run_again".
func (c *checker) checkRunAgain() {
	f := c.flow
	// One follow-up per original.
	byOrig := map[string][]string{}
	var origs []string
	add := func(o, id string) {
		ids := byOrig[o]
		if ids == nil {
			origs = append(origs, o)
		}
		for _, x := range ids {
			if x == id {
				return
			}
		}
		byOrig[o] = append(ids, id)
	}
	for _, e := range c.enqs {
		if c.runsAgain(e.queue) && e.outcome == OK && !e.dedup && e.follows != "" && e.jobID != "" {
			add(e.follows, e.jobID)
		}
	}
	if c.h.State != nil {
		for _, j := range c.h.State.Jobs {
			if c.runsAgain(j.Queue) && j.FollowsJobID != "" {
				add(j.FollowsJobID, j.ID)
			}
		}
	}
	for _, o := range origs {
		if ids := byOrig[o]; len(ids) > 1 {
			var refs []OpRef
			for _, id := range ids {
				if cr := f.creators[id]; len(cr) > 0 {
					refs = append(refs, cr[0].ref)
				} else {
					refs = append(refs, c.refsNaming(id)...)
				}
			}
			c.violate(KindFollowUpTwice, fmt.Sprintf("job %s has %d follow-ups (%s): at most one may wait for a running job", o, len(ids), strings.Join(ids, ", ")), refs...)
		}
	}
	// certainLease is a lease of job certainly live throughout [s, e].
	certainLease := func(job string, s, e time.Time) *lease {
		for _, l := range f.leasesOf[job] {
			if l.from.Before(s) && l.until.After(e) {
				return l
			}
		}
		return nil
	}
	for _, e := range c.enqs {
		if !c.runsAgain(e.queue) || e.outcome != OK || e.jobID == "" {
			continue
		}
		// A hit on a job certainly running should have made a follow-up.
		if e.dedup {
			if l := certainLease(e.jobID, e.start, e.end); l != nil {
				c.violate(KindTriggerLost, fmt.Sprintf("%s/%q: an enqueue was answered as a hit on job %s, which held a live lease throughout the call; a run_again queue makes a follow-up", e.queue, e.key, e.jobID), c.refs[l.i], e.ref)
				continue
			}
		}
		// A follow-up created, or hit while certainly waiting, must be
		// delivered after the trigger.
		o, isFollow := f.follows[e.jobID]
		if !isFollow || c.h.State == nil {
			continue
		}
		var held *lease
		if e.dedup {
			if held = certainLease(o, e.start, e.end); held == nil {
				continue // the follow-up may have run and ended before
			}
		}
		j := c.jobs[e.jobID]
		if j == nil || pending(lowerState(j)) {
			continue
		}
		delivered := false
		for _, i := range f.reserves[e.jobID] {
			delivered = delivered || c.h.Ops[i].End.After(e.start)
		}
		if !delivered && lowerState(j) != "completed" {
			for _, i := range f.unknown {
				delivered = delivered || c.h.Ops[i].End.After(e.start)
			}
		}
		if delivered {
			continue
		}
		refs := []OpRef{e.ref}
		if held != nil {
			refs = append(refs, c.refs[held.i])
		}
		c.violate(KindTriggerLost, fmt.Sprintf("%s/%q: follow-up %s of job %s, named by an enqueue made while it waited, is %s, and no reserve that ended after that enqueue started delivered it", e.queue, e.key, e.jobID, o, lowerState(j)), refs...)
	}
	// A follow-up runs only after its original ended.
	var fus []string
	for id := range f.follows {
		fus = append(fus, id)
	}
	sort.Strings(fus)
	for _, id := range fus {
		o := f.follows[id]
		refs := func(extra ...OpRef) []OpRef {
			var rs []OpRef
			if cr := f.creators[id]; len(cr) > 0 {
				rs = append(rs, cr[0].ref)
			}
			return append(rs, extra...)
		}
		reported := false
		if lo, ok := c.finalLo(o); ok {
			for _, i := range f.reserves[id] {
				if c.h.Ops[i].End.Before(lo) {
					what := "had not ended when the final state was read"
					if !lo.Equal(forever) {
						what = "had certainly not ended by then (" + lowerState(c.jobs[o]) + " no sooner than " + lo.UTC().Format(time.RFC3339Nano) + ")"
					}
					c.violate(KindFollowUpEarly, fmt.Sprintf("follow-up %s was delivered while the job it follows, %s, %s", id, o, what), refs(c.refs[i])...)
					reported = true
					break
				}
			}
		}
		if !reported {
		overlap:
			for _, lf := range f.leasesOf[id] {
				for _, lo := range f.leasesOf[o] {
					if lf.live() && lo.live() && lf.from.Before(lo.until) && lo.from.Before(lf.until) {
						c.violate(KindFollowUpEarly, fmt.Sprintf("follow-up %s and the job it follows, %s, held live leases at once", id, o), refs(c.refs[lo.i], c.refs[lf.i])...)
						break overlap
					}
				}
			}
		}
		if c.h.State == nil {
			continue
		}
		if j, oj := c.jobs[id], c.jobs[o]; j != nil && oj != nil && lower(j.HeldBy) == "follow_up" && !pending(lowerState(oj)) {
			c.violate(KindFollowUpStuck, fmt.Sprintf("follow-up %s is still held (%s, held_by follow_up) though the job it follows, %s, is %s", id, lowerState(j), o, lowerState(oj)), refs()...)
		}
	}
}

// checkConcurrency checks the queues with [queues.concurrency]: at no
// moment more than the limit of one key's jobs certainly held leases, and,
// ordered, no job was delivered while limit jobs of its key created before
// it had certainly not ended.
func (c *checker) checkConcurrency() {
	limit := func(q string) int { return c.policies[q].ConcurrencyLimit }
	byKey, order := groupBy(c.flow.leases, func(l *lease) (qk, bool) {
		return qk{l.queue, l.conc}, limit(l.queue) > 0 && l.live()
	})
	for _, k := range order {
		ls := byKey[k]
		n := limit(k.queue)
		sort.SliceStable(ls, func(a, b int) bool { return ls[a].from.Before(ls[b].from) })
		var active []*lease
		for _, l := range ls {
			kept := active[:0]
			for _, a := range active {
				if a.until.After(l.from) {
					kept = append(kept, a)
				}
			}
			active = append(kept, l)
			jobs := map[string]bool{}
			for _, a := range active {
				jobs[a.job] = true
			}
			if len(jobs) > n {
				var refs []OpRef
				var ids []string
				for _, a := range active {
					refs = append(refs, c.refs[a.i])
					ids = append(ids, a.job)
				}
				c.violate(KindConcurrencyExceeded, fmt.Sprintf("%s: %d jobs of concurrency key %q (%s) held live leases at once; the limit is %d", k.queue, len(jobs), k.key, strings.Join(ids, ", "), n), refs...)
			}
		}
	}
	// Ordered: by the acks, the jobs of each key, and when each was
	// certainly created by (the earliest end of an ok ack naming it) and
	// certainly not before (its creating ack's start).
	type created struct {
		id     string
		lo, hi time.Time
		hasLo  bool
		ref    OpRef
	}
	jobsOf := map[qk][]*created{}
	var keys []qk
	byID := map[string]*created{}
	for _, e := range c.enqs {
		p := c.policies[e.queue]
		if p.ConcurrencyLimit <= 0 || !p.ConcurrencyOrdered || e.outcome != OK || e.jobID == "" {
			continue
		}
		k := qk{e.queue, e.concKey}
		j := byID[e.jobID]
		if j == nil {
			j = &created{id: e.jobID, hi: e.end, ref: e.ref}
			byID[e.jobID] = j
			if jobsOf[k] == nil {
				keys = append(keys, k)
			}
			jobsOf[k] = append(jobsOf[k], j)
		}
		if e.end.Before(j.hi) {
			j.hi = e.end
		}
		if !e.dedup && (!j.hasLo || e.start.Before(j.lo)) {
			j.lo, j.hasLo, j.ref = e.start, true, e.ref
		}
	}
	type bound struct {
		at time.Time
		ok bool
	}
	ends := map[string]bound{}
	finalLo := func(id string) (time.Time, bool) {
		b, seen := ends[id]
		if !seen {
			b.at, b.ok = c.finalLo(id)
			ends[id] = b
		}
		return b.at, b.ok
	}
	for _, k := range keys {
		n := c.policies[k.queue].ConcurrencyLimit
		js := jobsOf[k]
		for _, b := range js {
			if !b.hasLo {
				continue
			}
			first := -1 // b's delivery that ended first
			for _, i := range c.flow.reserves[b.id] {
				if first < 0 || c.h.Ops[i].End.Before(c.h.Ops[first].End.Time) {
					first = i
				}
			}
			if first < 0 {
				continue
			}
			d := c.h.Ops[first].End.Time
			var open []*created
			for _, a := range js {
				if a == b || !a.hi.Before(b.lo) {
					continue
				}
				if lo, ok := finalLo(a.id); ok && lo.After(d) {
					open = append(open, a)
				}
			}
			if len(open) >= n {
				refs := []OpRef{b.ref, c.refs[first]}
				var ids []string
				for _, a := range open[:n] {
					refs = append(refs, a.ref)
					ids = append(ids, a.id)
				}
				c.violate(KindOrderViolated, fmt.Sprintf("%s: job %s of ordered concurrency key %q was delivered while %d jobs of the key created before it (%s) had not ended; the limit is %d", k.queue, b.id, k.key, len(open), strings.Join(ids, ", "), n), refs...)
			}
		}
	}
}

// slotted is one thing that takes a slot of a key at some moment within
// [lo, hi]: a job created under a rule, a job reserved under a rate.
type slotted struct {
	lo, hi time.Time
	id     string
	refs   []OpRef
}

// crowded returns the sets of limit+1 items that certainly took their
// slots within less than window of each other (the smallest span each item
// can begin), each set by the items' indexes, the item that begins it
// first.
func crowded(items []slotted, limit int, window time.Duration) [][]int {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return items[idx[a]].lo.Before(items[idx[b]].lo) })
	var out [][]int
	for a, i := range idx {
		var later []int
		for _, j := range idx[a+1:] {
			if items[j].lo.Sub(items[i].lo) >= window {
				break // no set beginning at i can hold it
			}
			later = append(later, j)
		}
		if len(later) < limit {
			continue
		}
		sort.SliceStable(later, func(x, y int) bool { return items[later[x]].hi.Before(items[later[y]].hi) })
		set := append([]int{i}, later[:limit]...)
		hi := items[i].hi
		for _, j := range set {
			if items[j].hi.After(hi) {
				hi = items[j].hi
			}
		}
		if hi.Sub(items[i].lo) < window {
			out = append(out, set)
		}
	}
	return out
}

// checkRules checks each queue's uniqueness rule: no more than its limit of
// jobs with one rule key created within any rule window, by the acks that
// created them (each at a moment within its call, or, delayed, at its
// delayed_until) and by the final state (created_at, or the ack's
// delayed_until on a delaying rule's queue).
func (c *checker) checkRules() {
	rule := func(queue string) (w time.Duration, limit int, delay bool) {
		p := c.policies[queue]
		limit = max(p.RuleLimit, 1)
		return time.Duration(p.RuleWindowMS) * time.Millisecond, limit, p.RuleAction == "delay"
	}
	seen := map[string]bool{}
	ackSlot := map[string]*enq{} // job id -> the ack that created it
	created, order := groupBy(c.enqs, func(e *enq) (qk, bool) {
		w, _, _ := rule(e.queue)
		if e.outcome != OK || e.dedup || e.ruleKey == "" || e.jobID == "" || seen[e.jobID] || w <= 0 {
			return qk{}, false
		}
		seen[e.jobID] = true
		ackSlot[e.jobID] = e
		return qk{e.queue, e.ruleKey}, true
	})
	reported := map[string]bool{} // sets of jobs the acks showed, not reported again from the state
	setKey := func(ids []string) string {
		s := append([]string(nil), ids...)
		sort.Strings(s)
		return strings.Join(s, ",")
	}
	for _, k := range order {
		w, limit, delay := rule(k.queue)
		var items []slotted
		for _, e := range created[k] {
			it := slotted{lo: e.start, hi: e.end, id: e.jobID, refs: []OpRef{e.ref}}
			if delay && !e.delayedUntil.IsZero() {
				it.lo, it.hi = e.delayedUntil, e.delayedUntil
			}
			items = append(items, it)
		}
		for _, set := range crowded(items, limit, w-clockTolerance) {
			var refs []OpRef
			var ids []string
			for _, i := range set {
				refs = append(refs, items[i].refs...)
				ids = append(ids, items[i].id)
			}
			reported[setKey(ids)] = true
			c.violate(KindRuleViolated, fmt.Sprintf("%s: jobs %s, all with rule key %q, were created within the rule's %v window; its limit is %d", k.queue, strings.Join(ids, ", "), k.key, w, limit), refs...)
		}
	}
	if c.h.State == nil {
		return
	}
	type slot struct {
		at time.Time
		j  *Job
	}
	slots, order := groupBy(c.h.State.Jobs, func(j Job) (qk, bool) {
		w, _, _ := rule(j.Queue)
		return qk{j.Queue, j.RuleKey}, j.RuleKey != "" && w > 0 && !j.CreatedAt.IsZero()
	})
	for _, k := range order {
		w, limit, delay := rule(k.queue)
		var ss []slot
		for i := range slots[k] {
			j := &slots[k][i]
			at := j.CreatedAt.Time
			if delay {
				// A delaying rule counts a job at its run-at: known only
				// from the ack that created it.
				e := ackSlot[j.ID]
				if e == nil {
					continue
				}
				if !e.delayedUntil.IsZero() {
					at = e.delayedUntil
				}
			}
			ss = append(ss, slot{at, j})
		}
		sort.SliceStable(ss, func(a, b int) bool { return ss[a].at.Before(ss[b].at) })
		for i := 0; i+limit < len(ss); i++ {
			d := ss[i+limit].at.Sub(ss[i].at)
			if d >= w {
				continue
			}
			var ids []string
			var refs []OpRef
			for _, s := range ss[i : i+limit+1] {
				ids = append(ids, s.j.ID)
				refs = append(refs, c.refsNaming(s.j.ID)...)
			}
			// Acks of slow calls may leave room for a window between
			// creations that created_at shows were closer: judge every set by
			// created_at too, unless the acks reported it.
			if reported[setKey(ids)] {
				continue
			}
			c.violate(KindRuleViolated, fmt.Sprintf("%s: the final state holds jobs %s, all with rule key %q, created %v apart, within the rule's %v window; its limit is %d", k.queue, strings.Join(ids, ", "), k.key, d, w, limit), refs...)
		}
	}
}

// checkRate checks the queues with [queues.rate]: no more than the limit of
// one rate key's jobs reserved within any period, each at a moment within
// its ok reserve.
func (c *checker) checkRate() {
	byKey, order := groupBy(c.flow.leases, func(l *lease) (qk, bool) {
		p := c.policies[l.queue]
		return qk{l.queue, l.rate}, p.RateLimit > 0 && p.RatePeriodMS > 0
	})
	for _, k := range order {
		p := c.policies[k.queue]
		period := time.Duration(p.RatePeriodMS) * time.Millisecond
		var items []slotted
		for _, l := range byKey[k] {
			r := &c.h.Ops[l.i]
			items = append(items, slotted{lo: r.Start.Time, hi: r.End.Time, id: l.job, refs: []OpRef{c.refs[l.i]}})
		}
		for _, set := range crowded(items, p.RateLimit, period-clockTolerance) {
			var refs []OpRef
			var ids []string
			for _, i := range set {
				refs = append(refs, items[i].refs...)
				ids = append(ids, items[i].id)
			}
			c.violate(KindRateExceeded, fmt.Sprintf("%s: %d reservations of rate key %q (jobs %s) within one %v period; the limit is %d", k.queue, len(set), k.key, strings.Join(ids, ", "), period, p.RateLimit), refs...)
		}
	}
}
