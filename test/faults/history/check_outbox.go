package history

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The checks of the transactional outbox: an app writes rows into the
// outbox table of its own database inside its own transactions (the
// history's outbox_tx records, each row with its id, its own key if any,
// and the transaction's outcome), and Sepp relays every committed row into
// exactly one job, keyed by the row's own key or else by its id, and never
// a row of a transaction that rolled back. The state section holds the
// outbox queues' jobs (with their keys and payload fingerprints) and the
// outbox table read back: the rows left in it and its dead table.
//
// What the checker judges:
//
//   - A row of a committed transaction, valid, becomes a job: the final
//     state holds a job of its queue with its key (its own key, which other
//     rows may share, or its id), unless it is still in the table (a
//     warning, as a job not settled is). A row written to be refused for
//     good (refused) ends in the dead table instead.
//   - A row's id keys at most one job, whatever its transaction's outcome;
//     the jobs of a key that rows bring themselves are held to the queue's
//     dedup window, as the enqueue checks hold them.
//   - Only rows of transactions that committed or may have (unknown) make
//     jobs, dead rows or rows left in the table; a job is a row's only when
//     its payload and job type are that row's.
//   - No valid row is in the dead table.
//
// A row of unknown outcome may or may not have committed: it may have a
// job or none, and it is never counted lost.

// obRow is one outbox row of the history, with its transaction's outcome.
type obRow struct {
	OutboxRow
	ref     OpRef
	outcome Outcome // the transaction's: ok committed, fail rolled back, unknown
}

// outboxIndex is the history's outbox rows.
type outboxIndex struct {
	rows   []*obRow
	byID   map[string]*obRow
	byKey  map[qk][]*obRow // (queue, RowKey) -> its rows
	keys   []qk            // byKey's keys, in the order of their first row
	queues map[string]bool // the queues rows were written to
	txs    map[Outcome]int
}

func newOutboxIndex() *outboxIndex {
	return &outboxIndex{byID: map[string]*obRow{}, byKey: map[qk][]*obRow{}, queues: map[string]bool{}, txs: map[Outcome]int{}}
}

// addOutboxTx indexes the rows of the outbox_tx at index i.
func (c *checker) addOutboxTx(i int, ref OpRef) {
	r := &c.h.Ops[i]
	ob := c.ob
	ob.txs[r.Outcome]++
	for j, row := range r.Rows {
		rref := ref
		rref.Item = j + 1
		bad := ""
		switch {
		case row.ID == "":
			bad = "outbox row without an id"
		case row.Queue == "":
			bad = "outbox row without a queue"
		case ob.byID[row.ID] != nil:
			bad = fmt.Sprintf("outbox row %s written twice (first at %s)", row.ID, ob.byID[row.ID].ref)
		}
		if bad != "" {
			c.violate(KindMalformed, bad, rref)
			continue
		}
		o := &obRow{OutboxRow: row, ref: rref, outcome: r.Outcome}
		ob.rows = append(ob.rows, o)
		ob.byID[row.ID] = o
		k := qk{row.Queue, row.RowKey()}
		if ob.byKey[k] == nil {
			ob.keys = append(ob.keys, k)
		}
		ob.byKey[k] = append(ob.byKey[k], o)
		ob.queues[row.Queue] = true
	}
}

// OutboxCounts is what the history's outbox rows went through.
type OutboxCounts struct {
	// Txs and Rows count the transactions, and their rows, by outcome: ok
	// (committed), fail (rolled back), unknown.
	Txs  map[Outcome]int `json:"txs"`
	Rows map[Outcome]int `json:"rows"`
	// OwnKey counts the rows with their own idempotency key; Refused, the
	// rows written to be refused for good.
	OwnKey  int `json:"own_key"`
	Refused int `json:"refused"`
	// Relayed counts the valid rows of transactions that committed (or of
	// unknown outcome) whose key has a job in the final state;
	// UnknownRelayed, those of unknown outcome among them.
	Relayed        int `json:"relayed"`
	UnknownRelayed int `json:"unknown_relayed"`
	// Dead and Left count the rows of the dead table and those left in the
	// outbox table; Jobs, the final state's jobs on the outbox's queues.
	Dead int `json:"dead"`
	Left int `json:"left"`
	Jobs int `json:"jobs"`
}

func (o *OutboxCounts) String() string {
	rows := o.Rows[OK] + o.Rows[Fail] + o.Rows[Unknown]
	return fmt.Sprintf("outbox: %d transactions (%d committed, %d rolled back, %d unknown), %d rows (%d committed, %d rolled back, %d unknown; %d with their own key, %d refused on purpose)\n"+
		"  relayed %d rows (%d of unknown outcome) into %d jobs; %d rows dead, %d left in the table\n",
		o.Txs[OK]+o.Txs[Fail]+o.Txs[Unknown], o.Txs[OK], o.Txs[Fail], o.Txs[Unknown],
		rows, o.Rows[OK], o.Rows[Fail], o.Rows[Unknown], o.OwnKey, o.Refused,
		o.Relayed, o.UnknownRelayed, o.Jobs, o.Dead, o.Left)
}

func (c *checker) checkOutbox() {
	ob := c.ob
	var st *OutboxState
	if c.h.State != nil {
		st = c.h.State.Outbox
	}
	if len(ob.rows) == 0 && len(ob.txs) == 0 && st == nil {
		return
	}
	counts := &OutboxCounts{Txs: map[Outcome]int{}, Rows: map[Outcome]int{}}
	for o, n := range ob.txs {
		counts.Txs[o] = n
	}
	for _, r := range ob.rows {
		counts.Rows[r.outcome]++
		if r.Key != "" {
			counts.OwnKey++
		}
		if r.Refused != "" {
			counts.Refused++
		}
	}
	c.rep.Outbox = counts
	if c.h.State == nil {
		return
	}
	acked := map[string]bool{} // jobs an ok enqueue ack names
	for _, e := range c.enqs {
		if e.outcome == OK && e.jobID != "" {
			acked[e.jobID] = true
		}
	}
	// enqueued: j was made by an enqueue, not by the relay: an ack names
	// it, or an enqueue of unknown outcome of its key could have made it.
	enqueued := func(j *Job) bool {
		if acked[j.ID] {
			return true
		}
		for _, e := range c.enqs {
			if e.outcome == Unknown && e.queue == j.Queue && e.key == j.Key && (j.CreatedAt.IsZero() || !e.start.After(j.CreatedAt.Time)) {
				return true
			}
		}
		return false
	}
	rowRefs := func(rows []*obRow, j *Job) []OpRef {
		var refs []OpRef
		for _, r := range rows {
			refs = append(refs, r.ref)
		}
		if j != nil {
			refs = append(refs, c.refsNaming(j.ID)...)
		}
		return refs
	}

	jobsOf := map[qk][]*Job{}
	for i := range c.h.State.Jobs {
		j := &c.h.State.Jobs[i]
		if !ob.queues[j.Queue] {
			continue
		}
		counts.Jobs++
		k := qk{j.Queue, j.Key}
		if ob.byKey[k] != nil {
			jobsOf[k] = append(jobsOf[k], j)
			continue
		}
		if enqueued(j) {
			continue
		}
		what := fmt.Sprintf("the key %q of no row the history wrote", j.Key)
		if j.Key == "" {
			what = "no key, which no outbox row's job lacks"
		}
		c.violate(KindOutboxPhantom, fmt.Sprintf("job %s on outbox queue %s has %s, and no enqueue made it", j.ID, j.Queue, what), c.refsNaming(j.ID)...)
	}

	dead := map[string]DeadRow{}
	left := map[string]bool{}
	if st != nil {
		counts.Dead, counts.Left = len(st.Dead), len(st.Left)
		for _, d := range st.Dead {
			dead[d.ID] = d
			if ob.byID[d.ID] == nil {
				c.violate(KindOutboxPhantom, fmt.Sprintf("the dead table holds row %s (%s/%q, %s), which the history never wrote", d.ID, d.Queue, d.Key, d.Reason))
			}
		}
		for _, id := range st.Left {
			left[id] = true
			if ob.byID[id] == nil {
				c.violate(KindOutboxPhantom, fmt.Sprintf("the outbox table holds row %s, which the history never wrote", id))
			}
		}
	} else if len(ob.rows) > 0 {
		c.warn(WarnNoState, "the state section has no outbox section: lost, dead and left outbox rows were not checked")
	}

	for _, k := range ob.keys {
		rows, jobs := ob.byKey[k], jobsOf[k]
		var live, gone []*obRow // rows of transactions that committed or may have; that rolled back
		idKeyed := false
		for _, r := range rows {
			if r.Key == "" {
				idKeyed = true
			}
			if r.outcome == Fail {
				gone = append(gone, r)
			} else {
				live = append(live, r)
			}
		}
		if len(live) == 0 {
			for _, j := range jobs {
				if !enqueued(j) {
					c.violate(KindOutboxRolledBack, fmt.Sprintf("job %s (%s/%q) is keyed by rows of rolled-back transactions only", j.ID, j.Queue, j.Key), rowRefs(rows, j)...)
				}
			}
			continue
		}
		c.outboxDuplicates(k, rows, jobs, idKeyed)
		for _, j := range jobs {
			if rowOf(j, live) || enqueued(j) {
				continue
			}
			if rowOf(j, gone) {
				c.violate(KindOutboxRolledBack, fmt.Sprintf("job %s (%s/%q) has the payload and job type of a row of a rolled-back transaction, and of none that committed", j.ID, j.Queue, j.Key), rowRefs(rows, j)...)
				continue
			}
			c.violate(KindOutboxMismatch, fmt.Sprintf("job %s (%s/%q, job type %q, payload %s) has the job type or payload of none of its key's rows", j.ID, j.Queue, j.Key, j.JobType, j.Payload), rowRefs(live, j)...)
		}
		if len(jobs) > 0 {
			for _, r := range live {
				if r.Refused == "" {
					counts.Relayed++
					if r.outcome == Unknown {
						counts.UnknownRelayed++
					}
				}
			}
		}
	}

	for _, r := range ob.rows {
		d, isDead := dead[r.ID]
		isLeft := left[r.ID]
		desc := fmt.Sprintf("row %s (%s/%q)", r.ID, r.Queue, r.RowKey())
		switch {
		case r.outcome == Fail && isDead:
			c.violate(KindOutboxRolledBack, desc+" of a rolled-back transaction is in the dead table ("+d.Reason+")", r.ref)
		case r.outcome == Fail && isLeft:
			c.violate(KindOutboxRolledBack, desc+" of a rolled-back transaction is in the outbox table", r.ref)
		case r.outcome == Fail:
		case isDead && r.Refused == "":
			c.violate(KindOutboxDead, fmt.Sprintf("%s is valid, and the relay moved it to the dead table (%s)", desc, d.Reason), r.ref)
		case isLeft:
			c.warn(WarnOutboxLeft, desc+" is still in the outbox table", r.ref)
		case st == nil || r.outcome != OK:
			// No outbox read back; or a row of unknown outcome, which may
			// never have committed.
		case r.Refused != "":
			if !isDead {
				// No Job: the store never held it, so no loss of the
				// store's explains it (explainLosses).
				c.violate(KindOutboxLost, fmt.Sprintf("%s, committed and refused for good (%s), is neither in the dead table nor in the outbox table", desc, r.Refused), r.ref)
			}
		case len(jobsOf[qk{r.Queue, r.RowKey()}]) == 0:
			// Job names the key's job, which a loss counts once however
			// many rows share it.
			c.rep.Violations = append(c.rep.Violations, Violation{Kind: KindOutboxLost, Job: "outbox job " + r.Queue + "/" + r.RowKey(), Ops: []OpRef{r.ref},
				Message: fmt.Sprintf("%s committed, and the final state holds no job of its key, nor the outbox or its dead table the row", desc)})
		}
	}
}

// rowOf reports whether job j can be one of rows': its payload and job
// type (when the state recorded them) are that row's.
func rowOf(j *Job, rows []*obRow) bool {
	for _, r := range rows {
		if (j.Payload == "" || r.Payload == "" || j.Payload == r.Payload) && (j.JobType == "" || r.JobType == "" || j.JobType == r.JobType) {
			return true
		}
	}
	return false
}

// outboxDuplicates reports the jobs of one outbox key beyond one: any
// second job of a row's id, and a second job of a key rows bring
// themselves within the queue's dedup window (by the jobs' created_at, as
// the enqueue checks judge two jobs of a key).
func (c *checker) outboxDuplicates(k qk, rows []*obRow, jobs []*Job, idKeyed bool) {
	if len(jobs) < 2 {
		return
	}
	var refs []OpRef
	for _, r := range rows {
		refs = append(refs, r.ref)
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	if idKeyed {
		c.violate(KindOutboxDuplicate, fmt.Sprintf("row %s (queue %s) has %d jobs: %s", k.key, k.queue, len(jobs), strings.Join(ids, ", ")), refs...)
		return
	}
	window, bounded, _ := c.policy(k.queue)
	spanOf := func(j *Job) span {
		if j.CreatedAt.IsZero() {
			return openSpan
		}
		return span{lo: j.CreatedAt.Time, hi: j.CreatedAt.Time}
	}
	sorted := append([]*Job(nil), jobs...)
	sort.SliceStable(sorted, func(a, b int) bool { return sorted[a].CreatedAt.Before(sorted[b].CreatedAt.Time) })
	for a := 0; a < len(sorted); a++ {
		for b := a + 1; b < len(sorted); b++ {
			if separable(spanOf(sorted[a]), spanOf(sorted[b]), window, bounded) {
				continue
			}
			gap := time.Duration(0)
			if !sorted[a].CreatedAt.IsZero() && !sorted[b].CreatedAt.IsZero() {
				gap = sorted[b].CreatedAt.Sub(sorted[a].CreatedAt.Time)
			}
			c.violate(KindOutboxDuplicate, fmt.Sprintf("%s/%q, the own key of %d outbox rows: jobs %s and %s, created %v apart, within one dedup window", k.queue, k.key, len(rows), sorted[a].ID, sorted[b].ID, gap), refs...)
		}
	}
}
