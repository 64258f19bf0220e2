package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
	"github.com/sepp-dev/sepp/internal/store/sqlite"
	"github.com/sepp-dev/sepp/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), sqlite.Options{Path: t.TempDir()})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestDurable(t *testing.T) {
	storetest.RunDurable(t, storetest.Durable{
		Place: func(t *testing.T) string { return t.TempDir() },
		Open: func(ctx context.Context, dir string) (store.Store, error) {
			return sqlite.Open(ctx, sqlite.Options{Path: dir})
		},
		SetSchemaVersion: func(t *testing.T, dir string, version int) {
			db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, sqlite.DatabaseFile))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, version); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func benchStore(b *testing.B) store.Store {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// The storage micro-benchmarks of package storetest, the same as Pebble's.
func BenchmarkEnqueue1(b *testing.B)     { storetest.BenchmarkEnqueue(b, benchStore(b), 1) }
func BenchmarkEnqueue32(b *testing.B)    { storetest.BenchmarkEnqueue(b, benchStore(b), 32) }
func BenchmarkEnqueue256(b *testing.B)   { storetest.BenchmarkEnqueue(b, benchStore(b), 256) }
func BenchmarkEnqueueC32(b *testing.B)   { storetest.BenchmarkEnqueueConcurrent(b, benchStore(b), 32) }
func BenchmarkReserveFresh(b *testing.B) { storetest.BenchmarkReserve(b, benchStore(b), 0) }
func BenchmarkReserveAfter1M(b *testing.B) {
	storetest.BenchmarkReserve(b, benchStore(b), 1_000_000)
}

// TestRefusesPebbleDirectory: a data directory the Pebble store (the
// embedded default) wrote is not opened as a new, empty SQLite store beside
// it; Open names a Pebble file and says what to do.
func TestRefusesPebbleDirectory(t *testing.T) {
	dir := t.TempDir()
	p, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: dir})
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded on a Pebble directory")
	}
	var fe *store.ForeignDataError
	if !errors.As(err, &fe) || fe.Engine != "Pebble" || fe.Backend != "embedded" || fe.File == "" {
		t.Fatalf("got %v, want a ForeignDataError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "holds a Pebble store ("+fe.File+")") || !strings.Contains(msg, `set backend = "embedded"`) {
		t.Fatalf("message %q does not say what to do", msg)
	}
	if _, err := os.Stat(filepath.Join(dir, sqlite.DatabaseFile)); !os.IsNotExist(err) {
		t.Fatalf("Open created %s in a Pebble directory: %v", sqlite.DatabaseFile, err)
	}
}
