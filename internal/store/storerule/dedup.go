package storerule

import "github.com/sepp-dev/sepp/internal/store"

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

// Created is the result of an enqueue of j, at now, that creates the job.
func Created(j *Job, now int64) store.EnqueueResult {
	r := store.EnqueueResult{JobID: j.ID}
	if j.Keyed {
		r.OriginalEnqueuedAt, r.ExpiresAt = FromMicros(now), FromMicros(now+j.Window)
	}
	return r
}

// NewRecord is the record an enqueue of j at now creates.
func NewRecord(j *Job, now int64) Record {
	return Record{JobID: j.ID, FirstEnqueuedAt: now, ExpiresAt: now + j.Window, Fingerprint: j.Fingerprint}
}

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
}

// Group decides a group of enqueue calls that one backend transaction
// writes together, against the stored records and against each other, in
// submission order. The backend fills Records with the stored records of the
// group's keys (Stored set), calls Decide for each call, then writes New,
// the Created records (deleting the Replaced ones first, if it must) and the
// hits of the other records it read.
type Group struct {
	Records map[Key]*Entry
	// New are the jobs to write, in order.
	New []*Job
	// Created are the records to write, in order.
	Created []Key
	// Replaced are stored records, expired, that a Created record replaces.
	Replaced []Key
}

// NewGroup returns an empty group.
func NewGroup() *Group { return &Group{Records: map[Key]*Entry{}} }

// Keys calls fn once for every distinct key of jobs: what the backend must
// read before deciding.
func Keys(jobs []Job, seen map[Key]bool, fn func(Key)) {
	for i := range jobs {
		if !jobs[i].Keyed {
			continue
		}
		k := Key{jobs[i].Queue, jobs[i].Key}
		if !seen[k] {
			seen[k] = true
			fn(k)
		}
	}
}

// Decide decides the jobs of one enqueue call made at now, filling results
// (one per job). A hit is a hit on whatever the group holds for the key, so
// the same key twice, in one call or in two calls of the group, makes the
// second a hit on the first. A conflict fails that job alone, or, in an
// atomic call, the whole call: Decide then returns a *store.JobError and the
// call leaves no trace in the group (its writes and hits are staged and
// dropped).
func (g *Group) Decide(atomic bool, now int64, jobs []Job, results []store.EnqueueResult) error {
	staged := map[Key]*Entry{}
	var (
		stagedKeys []Key // in job order
		hits       []*Entry
		fresh      []*Job
		replaced   []Key
	)
	for i := range jobs {
		j := &jobs[i]
		if !j.Keyed {
			results[i] = Created(j, now)
			fresh = append(fresh, j)
			continue
		}
		k := Key{j.Queue, j.Key}
		e := staged[k]
		if e == nil {
			e = g.Records[k]
		}
		if e != nil && e.Live(now) {
			r, err := Hit(&e.Record, j)
			if err != nil && atomic {
				clear(results)
				return &store.JobError{Index: i, Err: err}
			}
			results[i] = r
			results[i].Err = err
			if err == nil {
				hits = append(hits, e)
			}
			continue
		}
		if e != nil && e.Stored && !e.Created {
			replaced = append(replaced, k)
		}
		staged[k] = &Entry{Record: NewRecord(j, now), Created: true}
		stagedKeys = append(stagedKeys, k)
		fresh = append(fresh, j)
		results[i] = Created(j, now)
	}
	for _, e := range hits {
		e.Hits++
	}
	for _, k := range stagedKeys {
		e := staged[k]
		if old := g.Records[k]; old != nil && old.Created {
			// An earlier call of this group created this record and it has
			// expired by this call's clock (a window shorter than the time
			// between the two): the one write writes the newer record.
			*old = *e
			continue
		}
		g.Records[k] = e
		g.Created = append(g.Created, k)
	}
	g.New = append(g.New, fresh...)
	g.Replaced = append(g.Replaced, replaced...)
	return nil
}
