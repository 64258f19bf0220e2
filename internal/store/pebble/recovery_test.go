package pebble_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	enqueueRange(t, s, 0, n)
}

// enqueueRange enqueues the jobs from to to-1, one commit each.
func enqueueRange(t *testing.T, s store.Store, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
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
	dst, wal := copyDir(t, src)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dst, wal
}

// copyDir copies the data directory of an open store, as a crash leaves it,
// and returns the copy and its newest WAL.
func copyDir(t *testing.T, src string) (string, string) {
	t.Helper()
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
	// said so: the record was torn, and the acknowledgement mark says it had
	// been acknowledged.
	if got != n-1 || len(r.Damaged) != 2 || !strings.Contains(r.Damaged[0], "incomplete record") ||
		!strings.Contains(r.Damaged[1], "lost 1 acknowledged commit, which created 1 job:") {
		t.Errorf("jobs %d (want %d), Damaged %q (want the torn record, acknowledged)", got, n-1, r.Damaged)
	}
}

// TestRecoveryWALCutAtRecordBoundary: the newest WAL loses its last records
// whole, cut exactly where a record begins, as a disk that lost synced
// writes leaves it. The log reads as if they were never written; the
// acknowledgement mark says how many acknowledged commits and jobs are
// missing.
func TestRecoveryWALCutAtRecordBoundary(t *testing.T) {
	src := t.TempDir()
	s, err := pebble.Open(context.Background(), pebble.Options{Path: src})
	if err != nil {
		t.Fatal(err)
	}
	enqueueRange(t, s, 0, 17)
	_, wal := copyDir(t, src)
	fi, err := os.Stat(filepath.Join(src, filepath.Base(wal)))
	if err != nil {
		t.Fatal(err)
	}
	boundary := fi.Size() // the WAL is appended to: this is where record 18 starts
	enqueueRange(t, s, 17, 20)
	dir, wal := copyDir(t, src)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(wal, boundary); err != nil {
		t.Fatal(err)
	}
	s, err = pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := s.Recovery()
	got := countJobs(t, s)
	s.Close()
	if got != 17 || len(r.Damaged) != 1 || !strings.Contains(r.Damaged[0], "lost 3 acknowledged commits, which created 3 jobs: the last commit acknowledged before the stop was number ") {
		t.Fatalf("jobs %d (want 17), Damaged %q (want 3 acknowledged commits lost)", got, r.Damaged)
	}
	// Reported once: the next start finds the database caught up with the mark.
	s, err = pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r := s.Recovery(); len(r.Damaged) != 0 {
		t.Fatalf("second start: %q, want nothing", r.Damaged)
	}
	enqueueRange(t, s, 17, 18) // the lost key makes a new job
	if got := countJobs(t, s); got != 18 {
		t.Fatalf("%d jobs after enqueueing a lost key again, want 18", got)
	}
}

// TestRecoveryMarkBehind: a crash between a commit's WAL sync and the mark's
// leaves the mark behind the log; the commits past it were never
// acknowledged, and nothing is reported.
func TestRecoveryMarkBehind(t *testing.T) {
	src := t.TempDir()
	s, err := pebble.Open(context.Background(), pebble.Options{Path: src})
	if err != nil {
		t.Fatal(err)
	}
	enqueueRange(t, s, 0, 5)
	old, err := os.ReadFile(filepath.Join(src, pebble.AckMarkFile))
	if err != nil {
		t.Fatal(err)
	}
	enqueueRange(t, s, 5, 10)
	dir, _ := copyDir(t, src)
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, pebble.AckMarkFile), old, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, got := s.Recovery(), countJobs(t, s); got != 10 || len(r.Damaged) != 0 {
		t.Fatalf("jobs %d (want 10), Damaged %q (want nothing)", got, r.Damaged)
	}
}

// TestRecoveryMarkDamaged: a mark that fails its checksum, or is missing
// from a store that has commits, is reported: the store cannot vouch for
// its log.
func TestRecoveryMarkDamaged(t *testing.T) {
	for _, tc := range []struct {
		name string
		harm func(path string) error
		want string
	}{
		{"flipped", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[6] ^= 0x40
			return os.WriteFile(p, b, 0o644)
		}, "is damaged (24 bytes)"},
		{"missing", os.Remove, "is missing although the database holds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := copyOpenStore(t, 4)
			if err := tc.harm(filepath.Join(dir, pebble.AckMarkFile)); err != nil {
				t.Fatal(err)
			}
			s, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if r, got := s.Recovery(), countJobs(t, s); got != 4 || len(r.Damaged) != 1 || !strings.Contains(r.Damaged[0], tc.want) {
				t.Fatalf("jobs %d (want 4), Damaged %q (want %q)", got, r.Damaged, tc.want)
			}
		})
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
	lost := fmt.Sprintf("lost %d acknowledged commits, which created %d jobs:", int64(n)-got, int64(n)-got)
	if len(r.Damaged) != 2 || !strings.Contains(r.Damaged[0], "damaged record") || !strings.Contains(r.Damaged[1], lost) {
		t.Errorf("%d of %d jobs, Damaged %q: want the damaged record and what followed it reported, and %q", got, n, r.Damaged, lost)
	}
}
