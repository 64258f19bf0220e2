package schedule

import (
	"fmt"
	"time"
)

// CatchUp is a schedule's catch_up: what a node does with ticks that came
// while no node could fire them (every node down, or behind).
type CatchUp string

const (
	// CatchUpNone fires none of them; the schedule goes on from the next tick.
	CatchUpNone CatchUp = "none"
	// CatchUpLast fires the latest of them only (the default): a job that
	// refreshes something runs once after an outage, not once per missed tick.
	CatchUpLast CatchUp = "last"
	// CatchUpAll fires every one of them, oldest first.
	CatchUpAll CatchUp = "all"
)

// ParseCatchUp checks a catch_up value; "" is the default, "last".
func ParseCatchUp(s string) (CatchUp, error) {
	switch c := CatchUp(s); c {
	case "":
		return CatchUpLast, nil
	case CatchUpNone, CatchUpLast, CatchUpAll:
		return c, nil
	}
	return "", fmt.Errorf(`must be "none", "last" or "all", got %q`, s)
}

// Plan is what a node does with the ticks pending in (after, now].
type Plan struct {
	// Fire are the ticks whose jobs to enqueue, oldest first.
	Fire []time.Time
	// Skipped counts the pending ticks passed over under catch_up.
	Skipped int
	// Through is the latest tick the plan deals with (fired or skipped);
	// zero when nothing is pending.
	Through time.Time
}

// Decide plans the ticks pending in (after, now]. A single pending tick is
// simply due and fires, unless starting is set (the node's first look since
// it started): then, as whenever more than one tick is pending, the ticks
// came while no node fired them and policy decides. Under CatchUpAll at most
// batch ticks fire per plan; the caller plans again for the rest.
func Decide(spec *Spec, policy CatchUp, after, now time.Time, starting bool, batch int) Plan {
	latest, n := spec.Latest(after, now)
	if n == 0 {
		return Plan{}
	}
	if n == 1 && !starting {
		return Plan{Fire: []time.Time{latest}, Through: latest}
	}
	switch policy {
	case CatchUpAll:
		fire := spec.Ticks(after, now, max(batch, 1))
		return Plan{Fire: fire, Through: fire[len(fire)-1]}
	case CatchUpNone:
		return Plan{Skipped: n, Through: latest}
	default: // CatchUpLast
		return Plan{Fire: []time.Time{latest}, Skipped: n - 1, Through: latest}
	}
}
