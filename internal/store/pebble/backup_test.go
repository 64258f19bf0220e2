package pebble_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

// restoreCopy copies the files a backup lists into a new directory, as
// sepp restore does, and opens it.
func restoreCopy(t *testing.T, c *store.BackupCopy) *pebble.Store {
	t.Helper()
	dst := t.TempDir()
	for _, f := range c.Files {
		b, err := os.ReadFile(filepath.Join(c.Dir, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.FromSlash(f.Path)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := pebble.Open(context.Background(), pebble.Options{Path: dst})
	if err != nil {
		t.Fatalf("open the restored copy: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A backup taken while producers enqueue holds every key acknowledged
// before it was asked for, with its job, and its copy opens with nothing
// reported damaged or lost: the mark it carries is the count it holds.
func TestBackupWhileWriting(t *testing.T) {
	for _, mem := range []uint64{0, 256 << 10} {
		t.Run(fmt.Sprintf("memtable %d", mem), func(t *testing.T) { backupWhileWriting(t, mem) })
	}
}

// backupWhileWriting runs TestBackupWhileWriting with memtables of mem
// bytes (0: the default): small ones are flushed while the producers write,
// so the copy holds tables as well as logs, and Pebble reuses log files.
func backupWhileWriting(t *testing.T, mem uint64) {
	ctx := context.Background()
	s, err := pebble.Open(ctx, pebble.Options{Path: t.TempDir(), MemTableSize: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const producers = 8
	var (
		mu    sync.Mutex
		acked = map[string]store.JobID{} // key -> job, acknowledged
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	started := make(chan struct{}, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := "p" + strconv.Itoa(p) + "-" + strconv.Itoa(i)
				res, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Now: recT0, Jobs: []store.EnqueueJob{{
					Queue: "q", JobType: "t", IdempotencyKey: &key, MaxAttempts: 3, DedupWindow: 24 * time.Hour,
				}}})
				if err != nil {
					t.Errorf("enqueue %s: %v", key, err)
					return
				}
				mu.Lock()
				acked[key] = res[0].JobID
				mu.Unlock()
				if i == 400 {
					started <- struct{}{}
				}
			}
		}()
	}
	for range producers { // every producer has enqueued, and goes on
		<-started
	}
	mu.Lock()
	before := make(map[string]store.JobID, len(acked))
	for k, id := range acked {
		before[k] = id
	}
	mu.Unlock()
	c, err := s.Backup(ctx, &store.BackupParams{ID: "b1", Now: recT0})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if c.Dir != filepath.Join(s.BackupRoot(), "b1") || c.SchemaVersion != 2 || c.AckedCommits == 0 || c.AckedJobs < int64(len(before)) {
		t.Fatalf("copy %+v: want the folder b1 under %s, schema 2, and at least %d jobs acknowledged", c, s.BackupRoot(), len(before))
	}
	t.Logf("%d keys acknowledged before the backup; the copy: %d commits, %d jobs, files %v", len(before), c.AckedCommits, c.AckedJobs, c.Files)
	var haveMark bool
	for _, f := range c.Files {
		haveMark = haveMark || f.Path == pebble.AckMarkFile
		if f.Path == "LOCK" {
			t.Errorf("the copy lists Pebble's lock file")
		}
	}
	if !haveMark {
		t.Fatalf("the copy's files %v have no %s", c.Files, pebble.AckMarkFile)
	}
	var jobs, records int64
	for _, q := range c.Queues {
		jobs += q.Counts[store.JobStateAvailable]
		records += q.DedupRecords
	}
	if jobs != c.AckedJobs || records != c.AckedJobs {
		t.Fatalf("the copy counts %d jobs and %d dedup records, its mark %d jobs", jobs, records, c.AckedJobs)
	}

	r := restoreCopy(t, c)
	if rec := r.Recovery(); len(rec.Damaged) != 0 {
		t.Fatalf("the restored copy reports damage: %q", rec.Damaged)
	}
	for key, id := range before {
		got, err := r.LookupDedup(ctx, &store.LookupDedupParams{Queue: "q", Key: key, Now: recT0})
		if err != nil {
			t.Fatalf("lookup %s: %v", key, err)
		}
		if got == nil || got.Record.JobID != id || got.JobState != store.JobStateAvailable {
			t.Fatalf("key %s, acknowledged before the backup as job %v: the copy has %+v", key, id, got)
		}
	}
	if n := countJobs(t, r); n != c.AckedJobs {
		t.Fatalf("the restored copy holds %d jobs, its manifest %d", n, c.AckedJobs)
	}
}

// A backup folder under the data directory is not taken for the store's
// files: the store reopens with the copy beside it.
func TestBackupBesideData(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := pebble.Open(ctx, pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	enqueueEach(t, s, 10)
	if _, err := s.Backup(ctx, &store.BackupParams{ID: "b1", Now: recT0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(ctx, &store.BackupParams{ID: "b1", Now: recT0}); err == nil {
		t.Fatal("a second backup under the same id succeeded")
	}
	for _, id := range []string{"", "..", "a/b"} {
		if _, err := s.Backup(ctx, &store.BackupParams{ID: id, Now: recT0}); err == nil {
			t.Fatalf("backup id %q accepted", id)
		}
	}
	enqueueRange(t, s, 10, 20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebble.Open(ctx, pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rec := s.Recovery(); len(rec.Damaged) != 0 {
		t.Fatalf("the store reports damage after a backup: %q", rec.Damaged)
	}
	if n := countJobs(t, s); n != 20 {
		t.Fatalf("%d jobs after the reopen, want 20", n)
	}
}
