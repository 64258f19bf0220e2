package storerule

import (
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// The sweep horizon. An enqueue carries the time the server read when the
// request arrived (its Now) and is judged against the dedup records as they
// were at that time: a record is live while Now is before its expiry. The
// store may decide the enqueue later (a transaction that waited on a slow
// link or a restarting database, a busy writer), after a sweep with a later
// clock, on this node or another, ran; had that sweep deleted every record
// expired at its own Now, the late enqueue would find no record and create
// a second job inside the first one's window.
//
// So a sweep deletes only records that expired DedupSweepGrace before its
// Now (SweepCut), and first raises the store's dedup horizon to that cut
// (never lowers it). An enqueue that reads dedup records and whose Now is at
// or before the horizon it reads after its record lookups fails whole with
// store.ErrStaleEnqueue (Stale). This is exact: a sweep that deleted a
// record the enqueue would have found had raised the horizon to a cut at or
// after the record's expiry before (or with) the deletion, so the enqueue,
// reading the horizon after its lookups, sees that cut; its Now was before
// the record's expiry, hence before the cut, and it refuses instead of
// creating. An enqueue no sweep got in the way of is refused only when it is
// more than DedupSweepGrace old.

// DedupSweepGrace is how long a dedup record is kept past its expiry before
// a sweep deletes it: longer than a request may plausibly wait in the store
// (a database restart, a failover) between the server reading its clock and
// the store reading the record, so that such a late enqueue still finds the
// record and is judged by it (a record past its expiry is absent to it
// whether swept or not), instead of failing with store.ErrStaleEnqueue.
// It also covers the sweeps of nodes whose clocks run ahead of the one that
// took the request by less than that.
const DedupSweepGrace = time.Minute

// SweepCut is the time up to which a sweep at now deletes dedup records
// (those with an expiry at or before it), and to which it raises the dedup
// horizon.
func SweepCut(now int64) int64 { return now - DedupSweepGrace.Microseconds() }

// Stale judges an enqueue made at now that reads dedup records, against the
// dedup horizon read after its record lookups: store.ErrStaleEnqueue when
// now is at or before the horizon (a sweep may have deleted a record the
// enqueue would have found), otherwise nil.
func Stale(now, horizon int64) error {
	if now <= horizon {
		return store.ErrStaleEnqueue
	}
	return nil
}

// ReadsRecords reports whether any of jobs is judged against dedup records,
// by its key or its uniqueness rules, and so against the horizon.
func ReadsRecords(jobs []Job) bool {
	for i := range jobs {
		if jobs[i].Keyed || len(jobs[i].Rules) > 0 {
			return true
		}
	}
	return false
}
