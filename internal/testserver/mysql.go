package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQLDatabase creates a database of its own, named prefix and a unique
// suffix, on the MySQL or MariaDB server at SEPP_TEST_MYSQL_URL (a DSN like
// "root@tcp(127.0.0.1:3306)/"), drops it when the test ends, and returns the
// DSN that opens it. Without the variable the test is skipped; CI sets it,
// and there an unreachable server fails the test.
func MySQLDatabase(t testing.TB, prefix string) string {
	t.Helper()
	base := os.Getenv("SEPP_TEST_MYSQL_URL")
	if base == "" {
		t.Skip("SEPP_TEST_MYSQL_URL is not set (CI sets it)")
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("SEPP_TEST_MYSQL_URL: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano(), schemas.Add(1))
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("MySQL at SEPP_TEST_MYSQL_URL: %v", err)
	}
	t.Cleanup(func() {
		if db, err := sql.Open("mysql", cfg.FormatDSN()); err == nil {
			db.Exec("DROP DATABASE " + name)
			db.Close()
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}
