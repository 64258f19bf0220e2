package main

import (
	"context"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store/pebble"
	"github.com/sepp-dev/sepp/internal/store/postgres"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// skewWallClock makes this host's clock, as serve sees it, run d ahead
// until the test ends. Tests that call it must not run in parallel.
func skewWallClock(t *testing.T, d time.Duration) {
	t.Helper()
	saved := wallClock
	wallClock = func() time.Time { return time.Now().Add(d) }
	t.Cleanup(func() { wallClock = saved })
}

// TestServerClockPostgres: on PostgreSQL serve's clock is the database's,
// even when this host's clock is 30 s ahead, and serve logs the offset at
// INFO and warns about it. Needs SEPP_TEST_POSTGRES_URL (CI sets it).
func TestServerClockPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, postgres.Options{URL: testserver.PostgresSchema(t, "sepp_serveclock"), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	skewWallClock(t, 30*time.Second)
	logs := &testserver.SyncBuffer{}
	now, stop, err := serverClock(ctx, st, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	before, err := st.DBTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := now()
	after, err := st.DBTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The midpoint of the first read may be off by half its round trip.
	if got.Before(before.Add(-time.Second)) || got.After(after.Add(time.Second)) {
		t.Fatalf("serve's clock on PostgreSQL = %v, want the database's, between %v and %v (the host's is %v)", got, before, after, wallClock())
	}
	out := logs.String()
	info := regexp.MustCompile(`level=INFO msg=clock source=database offset=(\S+)`).FindStringSubmatch(out)
	if info == nil || !about(info[1], -30*time.Second) {
		t.Errorf("no INFO line with an offset of about -30s:\n%s", out)
	}
	warn := regexp.MustCompile(`level=WARN msg="this node's clock is off by (\S+) from the database's; .*dedup windows and leases are unaffected`).FindStringSubmatch(out)
	if warn == nil || !about(warn[1], 30*time.Second) {
		t.Errorf("no warning that this node's clock is off by about 30s:\n%s", out)
	}
}

// about reports whether s is a duration within a second of want.
func about(s string, want time.Duration) bool {
	d, err := time.ParseDuration(s)
	return err == nil && (d-want).Abs() < time.Second
}

// TestServerClockEmbedded: on the embedded store serve's clock is the
// host's, wallClock, and nothing is logged about it.
func TestServerClockEmbedded(t *testing.T) {
	st, err := pebble.Open(context.Background(), pebble.Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	skewWallClock(t, time.Hour)
	logs := &testserver.SyncBuffer{}
	now, stop, err := serverClock(context.Background(), st, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if d := now().Sub(time.Now()); d < time.Hour-time.Minute || d > time.Hour+time.Minute {
		t.Fatalf("serve's clock on the embedded store is %v from the host's, want wallClock's hour", d)
	}
	if out := logs.String(); out != "" {
		t.Fatalf("logged on the embedded store: %s", out)
	}
}
