package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/clock"
	"github.com/sepp-dev/sepp/internal/clock/clocktest"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/postgres"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// TestPostgresNodesShareTheDatabaseClock: three nodes on one PostgreSQL
// database and a queue with a 20 s window. A and B take their time from the
// database, as sepp serve does there, but B's host clock runs 30 s ahead;
// C is built as Sepp was before, on its host clock, 30 s ahead. A creates a
// job for key K; B's enqueue of K is a hit on it, since B's skew does not
// reach its clock. C's enqueue of K creates a second job: C judges A's
// record expired, which is why nodes on PostgreSQL do not use their own
// clock. Needs SEPP_TEST_POSTGRES_URL (CI sets it).
func TestPostgresNodesShareTheDatabaseClock(t *testing.T) {
	at := testserver.PostgresSchema(t, "sepp_clock")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const skew = 30 * time.Second
	const config = `
[[queues]]
name = "orders"
dedup_window_ms = 20000
`
	ahead := func() time.Time { return time.Now().Add(skew) }
	node := func(name string, clockOf func(*postgres.Store) func() time.Time) *sepp.Client {
		pg, err := postgres.Open(ctx, postgres.Options{URL: at, MaxConns: 4})
		if err != nil {
			t.Fatalf("node %s: %v", name, err)
		}
		t.Cleanup(func() { pg.Close() }) // after the server's shutdown (cleanups run last first)
		srv := testserver.Start(t, testserver.Options{Config: config, Now: clockOf(pg),
			WrapStore: func(store.Store) store.Store { return pg }})
		return connectClient(t, srv)
	}
	databaseClock := func(local clock.Local) func(*postgres.Store) func() time.Time {
		return func(pg *postgres.Store) func() time.Time {
			c, err := clock.NewAnchored(ctx, clock.AnchoredOptions{Source: pg.DBTime, Local: local})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close) // after the server's shutdown
			return c.Now
		}
	}
	a := node("A", databaseClock(nil))
	b := node("B", databaseClock(clocktest.Skewed(skew)))
	c := node("C", func(*postgres.Store) func() time.Time { return ahead })

	req := sepp.EnqueueRequest{Queue: "orders", JobType: "ship", IdempotencyKey: sepp.Key("order-7")}
	first, err := a.Enqueue(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Deduplicated {
		t.Fatalf("A's first enqueue of the key: %+v, want a new job", first)
	}
	hit, err := b.Enqueue(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !hit.Deduplicated || hit.JobID != first.JobID {
		t.Fatalf("B (host clock %v ahead, on the database's clock) enqueued the key within its window: %+v, want a hit on %s", skew, hit, first.JobID)
	}
	second, err := c.Enqueue(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if second.Deduplicated || second.JobID == first.JobID {
		t.Fatalf("C (on its own clock, %v ahead): %+v, want a second job: the skew expires A's record early, "+
			"or this test no longer shows what the database's clock prevents", skew, second)
	}
}
