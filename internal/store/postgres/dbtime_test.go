package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store/postgres"
)

// TestDBTime: DBTime is the database's current time, within a second of
// this host's (the test database runs beside the tests); it advances from
// one read to the next; on a closed store it fails.
func TestDBTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, postgres.Options{URL: place(t), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first, err := st.DBTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(first); d.Abs() > time.Second {
		t.Fatalf("DBTime = %v, %v from this host's clock; want within 1 s", first, d)
	}
	time.Sleep(2 * time.Millisecond)
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
