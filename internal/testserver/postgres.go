package testserver

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var schemas atomic.Int64

// PostgresSchema creates a schema of its own, named prefix and a unique
// suffix, in the database at SEPP_TEST_POSTGRES_URL, drops it when the test
// ends, and returns the URL that opens it: search_path and application_name
// are the schema's name, so a test can also find its connections in
// pg_stat_activity. Without the variable the test is skipped; CI sets it,
// and there an unreachable database fails the test.
func PostgresSchema(t testing.TB, prefix string) string {
	t.Helper()
	base := os.Getenv("SEPP_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("SEPP_TEST_POSTGRES_URL is not set (CI sets it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano(), schemas.Add(1))
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL at SEPP_TEST_POSTGRES_URL: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), base); err == nil {
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
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
