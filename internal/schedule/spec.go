// Package schedule fires the jobs of [[schedules]] (docs/schedules.md): it
// computes a schedule's ticks (spec.go), decides which pending ticks a node
// fires under its catch_up policy (plan.go), and runs one loop per schedule
// that enqueues each tick's job with the key schedule:<name>:<tick> and
// advances the tick state every node shares (runner.go).
//
// There is no leader: every node computes the same ticks from the same
// config and the same stored state, any number of them may fire a tick, and
// the tick's idempotency key makes one job of it.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Spec is a parsed schedule: its ticks are the instants Next steps through.
type Spec struct {
	// every is set for "@every D": ticks at the multiples of every since the
	// Unix epoch, so every node and every restart agrees on them.
	every time.Duration
	// cron is set otherwise: five fields or a descriptor, read in loc.
	cron cron.Schedule
	loc  *time.Location
}

// parser takes the standard five fields and the descriptors (@hourly, ...);
// @every is handled before it (Parse), since robfig's @every counts from
// whenever it is asked, which two nodes would not agree on.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses a cron expression (five fields, a descriptor like "@hourly",
// or "@every 30s") whose fields are read in the IANA zone timezone ("" is
// UTC). Its errors say what is wrong and how to write it.
func Parse(expr, timezone string) (*Spec, error) {
	loc, err := LoadZone(timezone)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	if rest, ok := strings.CutPrefix(expr, "@every"); ok {
		d, err := parseEvery(strings.TrimSpace(rest))
		if err != nil {
			return nil, err
		}
		return &Spec{every: d, loc: loc}, nil
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, errors.New(`must not name a zone itself: set timezone = "Europe/Berlin" instead`)
	}
	if expr == "" {
		return nil, errors.New(`must not be empty: five fields like "0 3 * * *", a descriptor like "@hourly", or "@every 30s"`)
	}
	c, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf(`%v: write five fields (minute hour day-of-month month day-of-week) like "0 3 * * *", a descriptor like "@daily", or "@every 30s"`, err)
	}
	return &Spec{cron: c, loc: loc}, nil
}

func parseEvery(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf(`@every takes a duration like "@every 30s" or "@every 1h30m", got %q`, s)
	case d < time.Second:
		return 0, fmt.Errorf("@every %s is shorter than the shortest interval, 1s", s)
	case d%time.Second != 0:
		return 0, fmt.Errorf("@every %s is not a whole number of seconds; ticks fall on whole seconds", s)
	}
	return d, nil
}

// LoadZone loads an IANA zone; "" is UTC.
func LoadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return nil, fmt.Errorf(`unknown time zone %q: name an IANA zone, like "Europe/Berlin" or "America/New_York" ("UTC" when not set)`, name)
	}
	return loc, nil
}

// Every returns the interval of an "@every" schedule, else 0.
func (s *Spec) Every() time.Duration { return s.every }

// Next returns the first tick strictly after t, in UTC.
func (s *Spec) Next(t time.Time) time.Time {
	if s.every > 0 {
		d := s.every.Nanoseconds()
		n := t.UnixNano()
		// The next multiple of d after n, flooring toward -inf for times
		// before the epoch.
		q := n / d
		if n%d < 0 {
			q--
		}
		return time.Unix(0, (q+1)*d).UTC()
	}
	next := s.cron.Next(t.In(s.loc))
	if next.IsZero() {
		return next // a date that never comes, like 30 February
	}
	return next.UTC()
}

// Latest returns the latest tick in (after, now] and how many ticks that
// interval holds; zero and 0 when none. It enumerates cron ticks, so the
// caller bounds the interval it asks about (see maxScan).
func (s *Spec) Latest(after, now time.Time) (time.Time, int) {
	if s.every > 0 {
		first := s.Next(after)
		if first.After(now) {
			return time.Time{}, 0
		}
		d := s.every.Nanoseconds()
		n := (now.UnixNano() - first.UnixNano()) / d
		return first.Add(time.Duration(n * d)), int(n) + 1
	}
	var last time.Time
	count := 0
	for t := s.Next(after); !t.IsZero() && !t.After(now); t = s.Next(t) {
		last, count = t, count+1
	}
	return last, count
}

// Ticks returns up to max ticks in (after, now], oldest first.
func (s *Spec) Ticks(after, now time.Time, max int) []time.Time {
	var out []time.Time
	for t := s.Next(after); len(out) < max && !t.IsZero() && !t.After(now); t = s.Next(t) {
		out = append(out, t)
	}
	return out
}

// Key is the idempotency key of a tick's job: schedule:<name>:<tick in UTC,
// RFC 3339>. Ticks fall on whole seconds, so no fraction is written.
func Key(name string, tick time.Time) string {
	return "schedule:" + name + ":" + tick.UTC().Format(time.RFC3339)
}
