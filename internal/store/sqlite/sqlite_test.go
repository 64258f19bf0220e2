package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sepp-dev/sepp/internal/store"
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

// benchmarkEnqueue measures the store alone: batches of size jobs with
// random keys (the dedup index's worst case), each call durable on return.
// Results are recorded in docs/benchmarks.md.
func benchmarkEnqueue(b *testing.B, size int) {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := make([]byte, 256)
	b.ResetTimer()
	for i := range b.N {
		jobs := make([]store.EnqueueJob, size)
		for k := range jobs {
			key := fmt.Sprintf("bench-%d-%d", rand.Uint64(), i)
			jobs[k] = store.EnqueueJob{Queue: "bench", JobType: "bench", Payload: payload, IdempotencyKey: &key,
				DedupWindow: time.Hour, MaxAttempts: 25}
		}
		if _, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Jobs: jobs, Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "jobs/s")
}

func BenchmarkEnqueue1(b *testing.B)   { benchmarkEnqueue(b, 1) }
func BenchmarkEnqueue32(b *testing.B)  { benchmarkEnqueue(b, 32) }
func BenchmarkEnqueue256(b *testing.B) { benchmarkEnqueue(b, 256) }
