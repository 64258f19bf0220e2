package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/postgres"
	"github.com/sepp-dev/sepp/internal/store/storetest"
)

var schemas atomic.Int64

// open returns a store on a schema of its own in the database at
// SEPP_TEST_POSTGRES_URL, dropped when the test ends. Without the variable
// the test is skipped; CI sets it, and there an unreachable database fails.
func open(t *testing.T) store.Store {
	t.Helper()
	base := os.Getenv("SEPP_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("SEPP_TEST_POSTGRES_URL is not set (CI sets it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := fmt.Sprintf("sepp_test_%d_%d", time.Now().UnixNano(), schemas.Add(1))
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL at SEPP_TEST_POSTGRES_URL: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			c.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	s, err := postgres.Open(ctx, postgres.Options{URL: u.String(), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}
