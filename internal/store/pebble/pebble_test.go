package pebble_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"go.uber.org/goleak"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
	"github.com/sepp-dev/sepp/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := pebble.Open(context.Background(), pebble.Options{Path: t.TempDir()})
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
			return pebble.Open(ctx, pebble.Options{Path: dir})
		},
		SetSchemaVersion: func(t *testing.T, dir string, version int) {
			db, err := pebbledb.Open(dir, &pebbledb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Set(pebble.SchemaKey(), []byte(strconv.Itoa(version)), pebbledb.Sync); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestDirectoryLocked: two stores on one directory would both decide dedup;
// the second Open must fail.
func TestDirectoryLocked(t *testing.T) {
	dir := t.TempDir()
	s, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if other, err := pebble.Open(context.Background(), pebble.Options{Path: dir}); err == nil {
		other.Close()
		t.Fatal("a second Open of a directory in use succeeded")
	}
}

// TestRefusesSQLiteDirectory: a data directory the earlier SQLite store
// wrote is not opened as a new, empty Pebble store beside it; Open names the
// file and says what to do, and leaves the directory as it was.
func TestRefusesSQLiteDirectory(t *testing.T) {
	for _, name := range []string{"sepp.db", "sepp.db-wal"} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("not really sqlite"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
		if err == nil {
			s.Close()
			t.Fatalf("%s: Open succeeded on a SQLite directory", name)
		}
		var fe *store.ForeignDataError
		if !errors.As(err, &fe) || fe.File != name || fe.Engine != "SQLite" {
			t.Fatalf("%s: got %v, want a ForeignDataError naming it", name, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "holds a SQLite store ("+name+")") || !strings.Contains(msg, "drain its jobs with the release that wrote it") || !strings.Contains(msg, "point path at a new directory") {
			t.Fatalf("message %q does not say what to do", msg)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("%s: Open wrote into the SQLite directory: %v", name, entries)
		}
	}
}

func benchStore(b *testing.B) store.Store {
	s, err := pebble.Open(context.Background(), pebble.Options{Path: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// The storage micro-benchmarks of package storetest, the same as PostgreSQL's.
func BenchmarkEnqueue1(b *testing.B)      { storetest.BenchmarkEnqueue(b, benchStore(b), 1) }
func BenchmarkEnqueue32(b *testing.B)     { storetest.BenchmarkEnqueue(b, benchStore(b), 32) }
func BenchmarkEnqueue256(b *testing.B)    { storetest.BenchmarkEnqueue(b, benchStore(b), 256) }
func BenchmarkEnqueueHits32(b *testing.B) { storetest.BenchmarkEnqueueHits(b, benchStore(b), 32) }
func BenchmarkEnqueueC32(b *testing.B)    { storetest.BenchmarkEnqueueConcurrent(b, benchStore(b), 32) }
func BenchmarkReserveFresh(b *testing.B)  { storetest.BenchmarkReserve(b, benchStore(b), 0) }
func BenchmarkReserveAfter1M(b *testing.B) {
	storetest.BenchmarkReserve(b, benchStore(b), 1_000_000)
}
