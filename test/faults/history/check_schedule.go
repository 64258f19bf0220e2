package history

import (
	"fmt"
	"strings"
	"time"
)

// The checks of a periodic job ([[schedules]]): every node runs the same
// schedule, `@every` a whole number of seconds with catch_up = "all", on a
// queue of its own that no worker takes from. Each tick's job has the key
// schedule:<name>:<tick, RFC 3339 UTC>, so the nodes that fire one tick make
// one job, and a node that was down (or a store that lost its last writes)
// enqueues the ticks it missed when it is back. The state section holds
// the schedule and its queue's jobs read back.
//
// What the checker judges:
//
//   - Every job of the queue is a tick's: its key names the schedule and a
//     tick on the schedule's grid (a multiple of its period since the Unix
//     epoch), and its job type is the schedule's.
//   - One job per tick: no two jobs share a tick's key.
//   - No tick missing: every tick between the first and the last the
//     state holds has its job.
//
// A schedule that stopped firing long before the state was read, or began
// long after the nodes started, is a warning: with faults that hold every
// node down (or its clock back) that long, it is what catch-up would fix
// later, not a broken promise.

// ScheduleState is the schedule every node ran and its queue read back.
type ScheduleState struct {
	Name    string `json:"name"`
	Queue   string `json:"queue"`
	JobType string `json:"job_type"`
	// EveryMS is the period of its `@every` spec.
	EveryMS int64 `json:"every_ms"`
	// Start is when the driver started the first node.
	Start Time  `json:"start"`
	Jobs  []Job `json:"jobs"`
}

// ScheduleCounts sums what the checker found of the schedule.
type ScheduleCounts struct {
	Ticks      int  `json:"ticks"`
	First      Time `json:"first"`
	Last       Time `json:"last"`
	Duplicates int  `json:"duplicates"`
	Missing    int  `json:"missing"`
}

func (s *ScheduleCounts) String() string {
	return fmt.Sprintf("schedule: %d ticks from %s to %s; %d fired twice, %d missing\n",
		s.Ticks, s.First.UTC().Format(time.RFC3339), s.Last.UTC().Format(time.RFC3339), s.Duplicates, s.Missing)
}

// scheduleLate is how far from the run's start and the state's read the
// first and last ticks may be before the checker warns.
const scheduleLate = 30 * time.Second

func (c *checker) checkSchedule() {
	if c.h.State == nil || c.h.State.Schedule == nil {
		return
	}
	s := c.h.State.Schedule
	every := time.Duration(s.EveryMS) * time.Millisecond
	if every < time.Second || every%time.Second != 0 {
		c.violate(KindMalformed, fmt.Sprintf("schedule %s: period %v is not a whole number of seconds", s.Name, every))
		return
	}
	counts := &ScheduleCounts{}
	c.rep.Schedule = counts
	prefix := "schedule:" + s.Name + ":"
	byTick := map[int64][]*Job{}
	var first, last int64
	for i := range s.Jobs {
		j := &s.Jobs[i]
		tick, ok := tickOf(j.Key, prefix)
		switch {
		case !ok:
			c.violate(KindScheduleBadJob, fmt.Sprintf("job %s on the schedule's queue %s has the key %q, which names no tick of schedule %s", j.ID, s.Queue, j.Key, s.Name))
			continue
		case tick.UnixNano()%int64(every) != 0:
			c.violate(KindScheduleBadJob, fmt.Sprintf("job %s: tick %s is not a multiple of %v since the Unix epoch", j.ID, tick.Format(time.RFC3339), every))
		case j.JobType != s.JobType:
			c.violate(KindScheduleBadJob, fmt.Sprintf("job %s of tick %s has the job type %q, not the schedule's %q", j.ID, tick.Format(time.RFC3339), j.JobType, s.JobType))
		}
		n := tick.UnixNano()
		if len(byTick) == 0 || n < first {
			first = n
		}
		if len(byTick) == 0 || n > last {
			last = n
		}
		byTick[n] = append(byTick[n], j)
	}
	if len(byTick) == 0 {
		c.warn(WarnScheduleLate, fmt.Sprintf("schedule %s made no job", s.Name))
		return
	}
	counts.Ticks = len(byTick)
	counts.First, counts.Last = At(time.Unix(0, first).UTC()), At(time.Unix(0, last).UTC())
	for n := first; n <= last; n += int64(every) {
		jobs := byTick[n]
		tick := time.Unix(0, n).UTC().Format(time.RFC3339)
		switch {
		case len(jobs) == 0:
			counts.Missing++
			c.violate(KindScheduleTickMissing, fmt.Sprintf("schedule %s: tick %s has no job, between ticks %s and %s that have", s.Name, tick, counts.First.Format(time.RFC3339), counts.Last.Format(time.RFC3339)))
		case len(jobs) > 1:
			counts.Duplicates++
			ids := make([]string, len(jobs))
			for i, j := range jobs {
				ids[i] = j.ID
			}
			c.violate(KindScheduleTickTwice, fmt.Sprintf("schedule %s: tick %s has %d jobs: %s", s.Name, tick, len(jobs), strings.Join(ids, ", ")))
		}
	}
	if !s.Start.IsZero() && counts.First.Sub(s.Start.Time) > scheduleLate {
		c.warn(WarnScheduleLate, fmt.Sprintf("schedule %s: the first tick with a job, %s, is %v after the first node started", s.Name, counts.First.Format(time.RFC3339), counts.First.Sub(s.Start.Time).Round(time.Second)))
	}
	if read := c.h.State.ReadAt; !read.IsZero() && read.Sub(counts.Last.Time) > scheduleLate {
		c.warn(WarnScheduleLate, fmt.Sprintf("schedule %s: the last tick with a job, %s, is %v before the state was read", s.Name, counts.Last.Format(time.RFC3339), read.Sub(counts.Last.Time).Round(time.Second)))
	}
}

// tickOf reads the tick a schedule job's key names.
func tickOf(key, prefix string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, rest)
	if err != nil || t.Format(time.RFC3339) != rest {
		return time.Time{}, false
	}
	return t, true
}
