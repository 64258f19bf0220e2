package storerule

import (
	"github.com/sepp-dev/sepp/internal/store"
)

// The batch decision: every rule that decides a group of enqueue calls
// against the stored dedup records and against each other, for every
// backend. A backend does three things around it:
//
//  1. Read, under the lock it will write with, what the decision needs: the
//     stored record of every key Keys names into a Group's Records (Stored
//     set), the stored job that the record of every key Originals names
//     points to (Entry.Original), and then the dedup horizon (Horizon).
//  2. Call Decide for each call of the group, in submission order.
//  3. Write what the group then holds: the New jobs, the Created records
//     (over the Expired ones), the hits and fingerprints of the other
//     records it read, and the Replaced jobs.
//
// Decide applies, job by job in submission order:
//   - the horizon: a call that reads records at or before Horizon fails
//     whole with store.ErrStaleEnqueue (Stale);
//   - a record is honoured while live (Record.Live): at or past its expiry
//     it is absent, and a job creating the key replaces it;
//   - a job whose key has a live record is a hit on its job (Hit): flagged
//     when the fingerprints differ, store.ErrIdempotencyKeyConflict when the
//     queue rejects mismatches, a *store.DuplicateJobError when it rejects
//     duplicates;
//   - a hit on a queue that replaces or debounces gives the original job,
//     while it waits, the request's payload, headers, priority and run-at,
//     and the record the request's fingerprint (Replacement);
//   - a job to create must find every rule key free, else it is refused
//     with a *store.RuleViolationError naming the first rule held (RuleViolated);
//   - the earlier jobs of the group count as stored: the same key twice
//     makes the second a hit on the first, and a rule key an earlier job
//     took is held against a later one; a refused job leaves nothing, so a
//     later job with its key or its rule keys finds them free;
//   - an atomic call fails whole at its first refused job, with a
//     *store.JobError, and leaves nothing in the group.

// Entry is a dedup record as one group of enqueues sees it.
type Entry struct {
	Record
	// Stored: the backend read the record from storage before deciding.
	Stored bool
	// Created: this group writes the record (new, or replacing an expired
	// stored one); it is written with Hits as its hit count.
	Created bool
	// Hits is what this group adds to the record's hit count.
	Hits int64
	// Slots are a rule key's slots when it holds more than one
	// (RuleSlots); nil for every other record.
	Slots []int64
	// Original is the job the record names, as a hit that replaces it
	// (Replacement) or follows it (FollowUp) needs it. For a Stored record of a key Originals names,
	// the backend sets it to the stored job (at least ID, Queue, State and
	// RunAt), read under its write lock, or leaves it nil when that job is
	// gone (retention deleted it: nothing waits). For a record the group
	// created for a job's key, it is that new job.
	Original *Job
	// listed: Original is on the group's Replaced list.
	listed bool
}

// Group decides a group of enqueue calls that one backend transaction
// writes together (see the steps above).
type Group struct {
	Records map[Key]*Entry
	// Horizon is the dedup horizon the backend read after its lookups
	// (Stale); zero for a backend that decides only hits on records stored
	// and live at the call's now, which no sweep can have deleted.
	Horizon int64
	// New are the jobs to write, in order, as decided: a replacing hit of a
	// later job may have changed one.
	New []*Job
	// Created are the records to write, in order.
	Created []Key
	// Expired are stored records, expired, that a Created record replaces:
	// a backend that indexes records by expiry deletes their entries.
	Expired []Key
	// Replaced are stored jobs (Entry.Original) to which hits gave a new
	// payload, headers, priority, run-at and state, each once, in order.
	Replaced []*Job
}

// NewGroup returns an empty group.
func NewGroup() *Group { return &Group{Records: map[Key]*Entry{}} }

// Keys calls fn once for every distinct key of jobs, job keys and rule
// keys, in job order: what the backend must read before deciding. With it
// comes the record the first job naming the key writes if it is created; a
// backend that claims an absent key by inserting its record (PostgreSQL)
// inserts that one, so that in the usual case, that job created, the record
// needs no second write. seen holds the keys visited so far, across the
// calls of one group.
func Keys(jobs []Job, now int64, seen map[Key]bool, fn func(k Key, first Record)) {
	for i := range jobs {
		j := &jobs[i]
		if j.Keyed {
			if k := (Key{j.Queue, j.Key}); !seen[k] {
				seen[k] = true
				fn(k, NewRecord(j, now))
			}
		}
		for r := range j.Rules {
			rule := &j.Rules[r]
			if k := (Key{rule.Queue, rule.Key}); !seen[k] {
				seen[k] = true
				fn(k, RuleRecord(j, rule, now))
			}
		}
	}
}

// Originals calls fn with the key of every job of jobs whose hit needs the
// original job: one that may replace it (Job.Replace) or follow it
// (Job.RunAgain). The backend sets the Original of that key's stored
// record, if it read one, before deciding, reading it under a lock that
// keeps the original from changing state until the group is written. A key
// may come more than once.
func Originals(jobs []Job, fn func(Key)) {
	for i := range jobs {
		if jobs[i].Keyed && (jobs[i].Replace || jobs[i].RunAgain) {
			fn(Key{jobs[i].Queue, jobs[i].Key})
		}
	}
}

// Decide decides the jobs of one enqueue call made at now, filling results
// (one per job), and records in the group what to write. A refused job gets
// its error in its result; in an atomic call it fails the call instead:
// Decide then returns a *store.JobError and the call leaves nothing in the
// group. A call older than the horizon fails whole with
// store.ErrStaleEnqueue, deciding nothing.
func (g *Group) Decide(atomic bool, now int64, jobs []Job, results []store.EnqueueResult) error {
	if ReadsRecords(jobs) {
		if err := Stale(now, g.Horizon); err != nil {
			return err
		}
	}
	c := call{g: g, now: now, atomic: atomic, news: len(g.New), created: len(g.Created), expired: len(g.Expired), replaced: len(g.Replaced)}
	for i := range jobs {
		if err := c.decide(&jobs[i], &results[i]); err != nil {
			if atomic {
				c.undo()
				clear(results)
				return &store.JobError{Index: i, Err: err}
			}
			results[i] = store.EnqueueResult{Err: err}
		}
	}
	return nil
}

// call is one Decide call. It changes the group as it decides; an atomic
// call also keeps what the group held before each change, to take the
// changes back if it fails.
type call struct {
	g      *Group
	now    int64
	atomic bool
	// The lengths of the group's lists before the call.
	news, created, expired, replaced int
	records                          []savedRecord
	entries                          []savedEntry
	jobs                             []savedJob
}

type savedRecord struct {
	k   Key
	old *Entry // nil: the group had no record of k
}

type savedEntry struct {
	e   *Entry
	old Entry
}

type savedJob struct {
	j   *Job
	old Job
}

// decide decides one job, into r unless it refuses it.
func (c *call) decide(j *Job, r *store.EnqueueResult) error {
	var follows *Job
	if j.Keyed {
		if e := c.g.Records[Key{j.Queue, j.Key}]; e != nil && e.Live(c.now) {
			if !FollowUp(j, e) {
				return c.hit(e, j, r)
			}
			follows = e.Original
		}
	}
	if err := ruleRefusal(c.g.Records, j, c.now); err != nil {
		return err
	}
	// A delaying rule counts the job at its run-at: the requested one, or
	// the first moment after it that every delaying rule has room.
	requested := max(j.RunAt, c.now)
	at := ruleDelay(c.g.Records, j, c.now, requested)
	if at > requested {
		j.RunAt, j.State = at, store.JobStateScheduled
	}
	if follows != nil {
		// A follow-up waits, scheduled, until its original ends.
		j.Follows, j.State = follows.ID, store.JobStateScheduled
	}
	c.create(j, at)
	*r = Created(j, c.now)
	if at > requested {
		r.DelayedUntil = FromMicros(at)
	}
	if follows != nil {
		r.FollowsJobID = follows.ID
	}
	return nil
}

// hit counts a hit of j on the live record e and, when j replaces, gives
// the original j's content.
func (c *call) hit(e *Entry, j *Job, r *store.EnqueueResult) error {
	var err error
	if *r, err = Hit(&e.Record, j); err != nil {
		return err
	}
	c.saveEntry(e)
	e.Hits++
	if j.Replace {
		c.replace(e, j, r)
	}
	return nil
}

// replace gives the original job of e, while it waits, the payload,
// headers, priority and run-at of the hit j (Replacement), and e the
// fingerprint of j: the next request with the same payload is no mismatch.
func (c *call) replace(e *Entry, j *Job, r *store.EnqueueResult) {
	o := e.Original
	if o == nil {
		return // deleted by retention: nothing waits
	}
	runAt, st, ok := Replacement(j, &e.Record, VisibleState(o.State, o.RunAt, c.now, o.Follows != (store.JobID{})), o.RunAt, c.now)
	if !ok {
		return
	}
	if o.Follows != (store.JobID{}) {
		st = store.JobStateScheduled // a follow-up waits until its original ends
	}
	c.saveJob(o)
	o.Payload, o.Headers, o.Priority, o.RunAt, o.State = j.Payload, j.Headers, j.Priority, runAt, st
	e.Fingerprint = j.Fingerprint
	if e.Stored && !e.listed {
		e.listed = true
		c.g.Replaced = append(c.g.Replaced, o)
	}
	r.Replaced, r.RunAt = true, FromMicros(runAt)
}

// create records that j is created, with the record of its key and a slot
// of each rule key: at, its run-at as the delaying rules made it, for
// those, the enqueue time for the others.
func (c *call) create(j *Job, at int64) {
	if j.Keyed {
		c.put(Key{j.Queue, j.Key}, Entry{Record: NewRecord(j, c.now), Created: true, Original: j})
	}
	for i := range j.Rules {
		rule := &j.Rules[i]
		k := Key{rule.Queue, rule.Key}
		t := c.now
		if rule.Delay {
			t = at
		}
		rec, slots := RuleTake(RuleSlots(c.g.Records[k], rule, c.now), rule, j, t, c.now)
		c.put(k, Entry{Record: rec, Slots: slots, Created: true})
	}
	c.g.New = append(c.g.New, j)
}

// put makes e the record the group writes for k.
func (c *call) put(k Key, e Entry) {
	old := c.g.Records[k]
	if old != nil && old.Created {
		// An earlier call of this group created this record and it has
		// expired by this call's clock (a window shorter than the time
		// between the two): the one write writes the newer record.
		c.saveEntry(old)
		*old = e
		return
	}
	if old != nil {
		c.g.Expired = append(c.g.Expired, k)
	}
	if c.atomic {
		c.records = append(c.records, savedRecord{k, old})
	}
	c.g.Records[k] = &e
	c.g.Created = append(c.g.Created, k)
}

func (c *call) saveEntry(e *Entry) {
	if c.atomic {
		c.entries = append(c.entries, savedEntry{e, *e})
	}
}

func (c *call) saveJob(j *Job) {
	if c.atomic {
		c.jobs = append(c.jobs, savedJob{j, *j})
	}
}

// undo takes back every change of the call, the latest first.
func (c *call) undo() {
	for i := len(c.jobs) - 1; i >= 0; i-- {
		*c.jobs[i].j = c.jobs[i].old
	}
	for i := len(c.entries) - 1; i >= 0; i-- {
		*c.entries[i].e = c.entries[i].old
	}
	for i := len(c.records) - 1; i >= 0; i-- {
		if r := c.records[i]; r.old != nil {
			c.g.Records[r.k] = r.old
		} else {
			delete(c.g.Records, r.k)
		}
	}
	g := c.g
	g.New, g.Created, g.Expired, g.Replaced = g.New[:c.news], g.Created[:c.created], g.Expired[:c.expired], g.Replaced[:c.replaced]
}
