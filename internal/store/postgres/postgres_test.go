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

// place creates a schema of its own in the database at
// SEPP_TEST_POSTGRES_URL, dropped when the test ends, and returns the URL
// that opens it. Without the variable the test is skipped; CI sets it, and
// there an unreachable database fails.
func place(t *testing.T) string {
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
	return u.String()
}

func openAt(ctx context.Context, url string) (store.Store, error) {
	return postgres.Open(ctx, postgres.Options{URL: url, MaxConns: 8})
}

// open returns a store on a fresh schema (see place).
func open(t *testing.T) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := openAt(ctx, place(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

func TestDurable(t *testing.T) {
	storetest.RunDurable(t, storetest.Durable{
		Place: place,
		Open:  openAt,
		SetSchemaVersion: func(t *testing.T, url string, version int) {
			c, err := pgx.Connect(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			if _, err := c.Exec(context.Background(), `INSERT INTO sepp_schema_migrations (version) VALUES ($1)`, version); err != nil {
				t.Fatal(err)
			}
		},
	})
}
