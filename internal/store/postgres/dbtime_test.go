package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store/postgres"
)

// TestDBTime: DBTime is the database's current time, within a second of
// this host's while it was read (the test database runs beside the tests);
// it advances from one read to the next; on a closed store it fails.
func TestDBTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, postgres.Options{URL: place(t), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := time.Now()
	first, err := st.DBTime(ctx)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	// Read between before and after, give or take the second the two
	// clocks of one machine may differ by.
	if first.Before(before.Add(-time.Second)) || first.After(after.Add(time.Second)) {
		t.Fatalf("DBTime = %v, read between %v and %v by this host's clock; want within 1 s of that", first, before, after)
	}
	// A round trip takes far longer than the clock's microsecond.
	second, err := st.DBTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !second.After(first) {
		t.Fatalf("DBTime did not advance: %v, then %v", first, second)
	}
	st.Close()
	if _, err := st.DBTime(ctx); err == nil {
		t.Fatal("DBTime on a closed store: no error")
	}
}
