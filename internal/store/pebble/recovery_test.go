package pebble_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

var recT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// enqueueEach enqueues n keyed jobs on queue q, one commit each.
func enqueueEach(t *testing.T, s store.Store, n int) {
	t.Helper()
	for i := range n {
		key := "k" + strconv.Itoa(i)
		_, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Now: recT0, Jobs: []store.EnqueueJob{{
			Queue: "q", JobType: "t", Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`), IdempotencyKey: &key,
			MaxAttempts: 3, DedupWindow: 24 * time.Hour,
		}}})
		if err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
	}
}

func countJobs(t *testing.T, s store.Store) int64 {
	t.Helper()
	qs, err := s.ListQueues(context.Background(), &store.ListQueuesParams{Now: recT0})
	if err != nil {
		t.Fatalf("ListQueues: %v", err)
	}
	var n int64
	for _, q := range qs {
		for _, c := range q.Counts {
			n += c
		}
	}
	return n
}

func TestRecoveryReportAfterCleanClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := pebble.Open(ctx, pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Recovery(); r.WALBatches != 0 || r.DedupRecords != 0 || len(r.Damaged) != 0 {
		t.Errorf("a new store's report: %+v, want nothing replayed", r)
	}
	enqueueEach(t, s, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebble.Open(ctx, pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.Recovery()
	// The memtable was not flushed: the ten commits come back from the WAL.
	if r.WALFiles < 1 || r.WALBatches < 10 || r.WALKeys < 10 {
		t.Errorf("report after a reopen: %+v, want at least 1 WAL and 10 batches replayed", r)
	}
	if r.DedupRecords != 10 {
		t.Errorf("DedupRecords = %d, want 10", r.DedupRecords)
	}
	if len(r.Damaged) != 0 {
		t.Errorf("Damaged = %q, want none", r.Damaged)
	}
	if n := countJobs(t, s); n != 10 {
		t.Errorf("jobs after reopen: %d, want 10", n)
	}
}

// copyOpenStore enqueues n jobs (each synced before it returns) and copies
// the data directory while the store is still open, as a crash would leave
// it, then closes the original. It returns the copy and its newest WAL.
func copyOpenStore(t *testing.T, n int) (string, string) {
	t.Helper()
	src := t.TempDir()
	s, err := pebble.Open(context.Background(), pebble.Options{Path: src})
	if err != nil {
		t.Fatal(err)
	}
	enqueueEach(t, s, n)
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var wals []string
	for _, e := range entries {
		if e.IsDir() || e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name(), ".log") {
			wals = append(wals, e.Name())
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(wals) == 0 {
		t.Fatal("no WAL file in the data directory")
	}
	sort.Strings(wals)
	return dst, filepath.Join(dst, wals[len(wals)-1])
}

// dataEnd is the offset after the last non-zero byte of a file (a WAL may
// be preallocated with zeroes past its records).
func dataEnd(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(bytes.TrimRight(b, "\x00")))
}

// TestRecoveryTornWALTail: the tail of the newest WAL of a store that was
// not closed is cut inside its last record. Every acknowledged write is
// there, or the report says what was dropped: never silently fewer jobs.
func TestRecoveryTornWALTail(t *testing.T) {
	const n = 20
	dir, wal := copyOpenStore(t, n)
	end := dataEnd(t, wal)
	if err := os.Truncate(wal, end-3); err != nil {
		t.Fatal(err)
	}
	s, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatalf("Open after a torn tail: %v", err)
	}
	defer s.Close()
	r := s.Recovery()
	got := countJobs(t, s)
	t.Logf("jobs %d of %d; report %+v", got, n, r)
	if got < n && len(r.Damaged) == 0 {
		t.Fatalf("%d of %d acknowledged jobs after the reopen, and the report says nothing was damaged: %+v", got, n, r)
	}
	// The cut is inside the last record, so exactly that one is lost, and
	// said so.
	if got != n-1 || len(r.Damaged) != 1 || !strings.Contains(r.Damaged[0], "incomplete record") {
		t.Errorf("jobs %d (want %d), Damaged %q (want the torn record)", got, n-1, r.Damaged)
	}
}

// TestRecoveryCleanCopy: the same copy, not cut, reopens with every job and
// nothing damaged.
func TestRecoveryCleanCopy(t *testing.T) {
	const n = 20
	dir, _ := copyOpenStore(t, n)
	s, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.Recovery()
	if got := countJobs(t, s); got != n || len(r.Damaged) != 0 || r.WALBatches < n {
		t.Errorf("jobs %d (want %d), report %+v (want nothing damaged, %d batches replayed)", got, n, r, n)
	}
}

// TestRecoveryCorruptWAL: a damaged record in the middle of the WAL. Pebble
// either refuses it (pebble.ErrCorruption, said loudly) or stops replaying
// at it; then the report must say that what came after was dropped.
func TestRecoveryCorruptWAL(t *testing.T) {
	const n = 20
	dir, wal := copyOpenStore(t, n)
	f, err := os.OpenFile(wal, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	end := dataEnd(t, wal)
	buf := make([]byte, 8)
	if _, err := f.ReadAt(buf, end/2); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] ^= 0xff
	}
	if _, err := f.WriteAt(buf, end/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		if !errors.Is(err, pebbledb.ErrCorruption) || !strings.Contains(err.Error(), "is damaged") {
			t.Errorf("Open: %v, want pebble.ErrCorruption, said loudly", err)
		}
		return
	}
	defer s.Close()
	r := s.Recovery()
	got := countJobs(t, s)
	t.Logf("jobs %d of %d; report %+v", got, n, r)
	if got == n {
		t.Fatalf("every job survived a damaged WAL record")
	}
	if len(r.Damaged) != 1 || !strings.Contains(r.Damaged[0], "damaged record") {
		t.Errorf("%d of %d jobs, Damaged %q: want the damaged record and what followed it reported", got, n, r.Damaged)
	}
}
