package schedule

import (
	"testing"
	"time"
)

func mustParse(t *testing.T, expr, tz string) *Spec {
	t.Helper()
	s, err := Parse(expr, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", expr, tz, err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// TestNext checks the ticks: cron fields read in the schedule's zone,
// across both DST changes, and @every on multiples of its interval since
// the epoch, whenever it is asked.
func TestNext(t *testing.T) {
	for _, tc := range []struct {
		expr, tz, after, want string
	}{
		{"0 3 * * *", "", "2026-03-01T03:00:00Z", "2026-03-02T03:00:00Z"},
		{"0 3 * * *", "Europe/Berlin", "2026-03-01T00:00:00Z", "2026-03-01T02:00:00Z"}, // CET, UTC+1
		{"0 3 * * *", "Europe/Berlin", "2026-07-01T00:00:00Z", "2026-07-01T01:00:00Z"}, // CEST, UTC+2
		// 29 March 2026: Berlin's clocks go from 02:00 to 03:00; 02:30 does
		// not exist that day and is skipped.
		{"30 2 * * *", "Europe/Berlin", "2026-03-28T02:00:00Z", "2026-03-30T00:30:00Z"},
		// 25 October 2026: 02:00-03:00 happens twice, and 02:30 ticks in
		// each (00:30 and 01:30 UTC, two ticks, two keys).
		{"30 2 * * *", "Europe/Berlin", "2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"},
		{"@hourly", "America/New_York", "2026-11-30T12:00:00Z", "2026-11-30T13:00:00Z"},
		{"@daily", "America/New_York", "2026-11-30T12:00:00Z", "2026-12-01T05:00:00Z"},
		{"@every 30s", "", "2026-11-30T12:00:00Z", "2026-11-30T12:00:30Z"},
		{"@every 30s", "", "2026-11-30T12:00:29.999Z", "2026-11-30T12:00:30Z"},
		{"@every 7s", "", "1970-01-01T00:00:00Z", "1970-01-01T00:00:07Z"},
		{"@every 1h", "Asia/Kolkata", "2026-11-30T12:10:00Z", "2026-11-30T13:00:00Z"}, // zone ignored
	} {
		got := mustParse(t, tc.expr, tc.tz).Next(utc(tc.after))
		if want := utc(tc.want); !got.Equal(want) {
			t.Errorf("%s in %q after %s: got %s, want %s", tc.expr, tc.tz, tc.after, got.Format(time.RFC3339), tc.want)
		}
	}
}

func TestEveryOnEpochMultiples(t *testing.T) {
	s := mustParse(t, "@every 7s", "")
	for _, at := range []string{"2026-11-30T12:00:00Z", "2026-01-01T00:00:03Z", "1969-12-31T23:59:59Z"} {
		n := s.Next(utc(at))
		if n.Unix()%7 != 0 || !n.After(utc(at)) || n.Sub(utc(at)) > 7*time.Second {
			t.Errorf("after %s: %s is not the next multiple of 7 s since the epoch", at, n)
		}
	}
}

func TestLatestAndTicks(t *testing.T) {
	for _, expr := range []string{"@every 60s", "* * * * *"} {
		s := mustParse(t, expr, "")
		after, now := utc("2026-11-30T12:00:00Z"), utc("2026-11-30T12:05:30Z")
		last, n := s.Latest(after, now)
		if n != 5 || !last.Equal(utc("2026-11-30T12:05:00Z")) {
			t.Errorf("%s: Latest = %s, %d; want 12:05, 5", expr, last, n)
		}
		ticks := s.Ticks(after, now, 3)
		if len(ticks) != 3 || !ticks[0].Equal(utc("2026-11-30T12:01:00Z")) || !ticks[2].Equal(utc("2026-11-30T12:03:00Z")) {
			t.Errorf("%s: Ticks = %v", expr, ticks)
		}
		if _, n := s.Latest(now, now.Add(20*time.Second)); n != 0 {
			t.Errorf("%s: a tick in (12:05:30, 12:05:50]", expr)
		}
	}
}

// TestDecide checks which pending ticks a node fires under each catch_up.
func TestDecide(t *testing.T) {
	s := mustParse(t, "@every 10s", "")
	after := utc("2026-11-30T12:00:00Z")
	tick := func(i int) time.Time { return after.Add(time.Duration(i) * 10 * time.Second) }
	for _, tc := range []struct {
		name     string
		policy   CatchUp
		now      time.Time
		starting bool
		fire     []time.Time
		skipped  int
	}{
		{"nothing pending", CatchUpAll, tick(0).Add(9 * time.Second), false, nil, 0},
		{"one due", CatchUpNone, tick(1), false, []time.Time{tick(1)}, 0},
		{"one due at start, none", CatchUpNone, tick(1), true, nil, 1},
		{"one due at start, last", CatchUpLast, tick(1), true, []time.Time{tick(1)}, 0},
		{"behind, all (batch 3)", CatchUpAll, tick(5), false, []time.Time{tick(1), tick(2), tick(3)}, 0},
		{"behind, last", CatchUpLast, tick(5).Add(time.Second), false, []time.Time{tick(5)}, 4},
		{"behind, none", CatchUpNone, tick(5), false, nil, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(s, tc.policy, after, tc.now, tc.starting, 3)
			if len(p.Fire) != len(tc.fire) || p.Skipped != tc.skipped {
				t.Fatalf("got %+v, want fire %v, skipped %d", p, tc.fire, tc.skipped)
			}
			for i := range p.Fire {
				if !p.Fire[i].Equal(tc.fire[i]) {
					t.Fatalf("fire[%d] = %s, want %s", i, p.Fire[i], tc.fire[i])
				}
			}
		})
	}
}

func TestKey(t *testing.T) {
	tick := time.Date(2026, 11, 30, 13, 0, 0, 0, time.FixedZone("CET", 3600))
	if got := Key("nightly", tick); got != "schedule:nightly:2026-11-30T12:00:00Z" {
		t.Errorf("Key = %q", got)
	}
}
