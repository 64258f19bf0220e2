package history

import (
	"strings"
	"testing"
	"time"
)

// The schedule's histories: a schedule `@every 1s` that every node ran, and
// its queue's jobs read back.

var scheduleBase = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// tickJob is the job of the tick n seconds after scheduleBase.
func tickJob(id string, n int) Job {
	tick := scheduleBase.Add(time.Duration(n) * time.Second)
	return Job{ID: id, Queue: "ticks", Key: "schedule:tick:" + tick.Format(time.RFC3339), JobType: "tick", State: "available", CreatedAt: At(tick)}
}

// validSchedule: ten ticks, one job each, read two seconds after the last.
func validSchedule() *History {
	var jobs []Job
	for n := range 10 {
		jobs = append(jobs, tickJob(string(rune('A'+n)), n))
	}
	return &History{State: &State{
		ReadAt: At(scheduleBase.Add(12 * time.Second)),
		Jobs:   []Job{}, Dedup: []DedupRecord{}, Effects: []Effect{},
		Schedule: &ScheduleState{Name: "tick", Queue: "ticks", JobType: "tick", EveryMS: 1000, Start: At(scheduleBase.Add(-time.Second)), Jobs: jobs},
	}}
}

func breakSchedule(f func(s *ScheduleState)) *History {
	h := validSchedule()
	f(h.State.Schedule)
	return h
}

// scheduleViolationCases: each a single break of validSchedule. The
// violations name no operation: ticks are fired by the nodes, not by the
// driver's calls.
func scheduleViolationCases() []violationCase {
	return []violationCase{
		{KindScheduleTickTwice, breakSchedule(func(s *ScheduleState) { s.Jobs = append(s.Jobs, tickJob("Z", 4)) }), nil},
		{KindScheduleTickMissing, breakSchedule(func(s *ScheduleState) { s.Jobs = append(s.Jobs[:5], s.Jobs[6:]...) }), nil},
		{KindScheduleBadJob, breakSchedule(func(s *ScheduleState) {
			s.Jobs = append(s.Jobs, Job{ID: "W", Queue: "ticks", Key: "k", JobType: "tick"})
		}), nil},
	}
}

func TestValidSchedule(t *testing.T) {
	rep := Check(validSchedule())
	if !rep.OK() || len(rep.Warnings) != 0 {
		t.Fatalf("want no violation and no warning, got:\n%s", rep)
	}
	if s := rep.String(); !strings.Contains(s, "schedule: 10 ticks from 2026-12-05T12:00:00Z to 2026-12-05T12:00:09Z; 0 fired twice, 0 missing") {
		t.Errorf("summary:\n%s", s)
	}
}

// TestScheduleBadJobs: a tick off the schedule's grid and a job of another
// type on its queue are no ticks of it.
func TestScheduleBadJobs(t *testing.T) {
	for name, f := range map[string]func(j *Job){
		"off the grid": func(j *Job) {
			j.Key = "schedule:tick:" + scheduleBase.Add(3500*time.Millisecond).Format(time.RFC3339Nano)
		},
		"another job type":       func(j *Job) { j.JobType = "tock" },
		"another schedule":       func(j *Job) { j.Key = strings.Replace(j.Key, ":tick:", ":other:", 1) },
		"a time not in RFC 3339": func(j *Job) { j.Key = "schedule:tick:1764936003" },
	} {
		t.Run(name, func(t *testing.T) {
			h := validSchedule()
			f(&h.State.Schedule.Jobs[3])
			rep := Check(h)
			if got := rep.ByKind()[KindScheduleBadJob]; got != 1 {
				t.Errorf("%d %q, want 1:\n%s", got, KindScheduleBadJob, rep)
			}
		})
	}
}

// TestScheduleLate: a schedule whose last tick came long before the state
// was read, or whose first came long after the first node started, or that
// made no job, is a warning, not a violation.
func TestScheduleLate(t *testing.T) {
	for name, f := range map[string]func(h *History){
		"stopped long before the read": func(h *History) { h.State.ReadAt = At(scheduleBase.Add(time.Minute)) },
		"began long after the start":   func(h *History) { h.State.Schedule.Start = At(scheduleBase.Add(-time.Minute)) },
		"no job at all":                func(h *History) { h.State.Schedule.Jobs = nil },
	} {
		t.Run(name, func(t *testing.T) {
			h := validSchedule()
			f(h)
			rep := Check(h)
			if !rep.OK() || len(rep.Warnings) != 1 || rep.Warnings[0].Kind != WarnScheduleLate {
				t.Errorf("want one %q warning and no violation:\n%s", WarnScheduleLate, rep)
			}
		})
	}
}
