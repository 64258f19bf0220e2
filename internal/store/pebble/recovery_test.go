package pebble_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	flip(t, wal, dataEnd(t, wal)/2)
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

// enqueueBatches enqueues batches of 100 new keyed jobs, one commit each,
// from batch from to to-1.
func enqueueBatches(t *testing.T, s store.Store, from, to int) {
	t.Helper()
	for b := from; b < to; b++ {
		jobs := make([]store.EnqueueJob, 100)
		for i := range jobs {
			key := "k" + strconv.Itoa(b*100+i)
			jobs[i] = store.EnqueueJob{Queue: "q", JobType: "t", Payload: []byte(`{"n":1}`), IdempotencyKey: &key, MaxAttempts: 3, DedupWindow: 24 * time.Hour}
		}
		if _, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Now: recT0, Jobs: jobs}); err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
	}
}

// walFiles lists the write-ahead logs of dir, oldest first.
func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// TestRecoveryOlderLogDamaged damages the write-ahead logs of a crashed
// store that holds several (Pebble rotates to a new log with each memtable,
// and the first memtables are small) in every way a disk or an operator
// can: a log deleted (an older one, the oldest, the newest, all of them),
// an older log cut where a record begins or inside a record, bytes of an
// older log overwritten. Each start either refuses the directory, saying it
// is damaged and what to do, or serves a consistent state (every write up
// to the damage, none after it: the jobs are a prefix of the enqueues) and
// reports exactly how many acknowledged commits and jobs are missing: never
// fewer jobs silently. Before the log scan, a missing older log, and one
// cut where a record begins, lost their jobs with "damaged=0" (and the
// later logs were replayed over the hole); and an older log cut inside a
// record was refused with a bare "pebble/record: unexpected EOF".
func TestRecoveryOlderLogDamaged(t *testing.T) {
	src := t.TempDir()
	s, err := pebble.Open(context.Background(), pebble.Options{Path: src})
	if err != nil {
		t.Fatal(err)
	}
	// The store copied here has at least four logs; boundary is where a
	// record of the third one begins, taken while it was the newest.
	var boundary int64
	var third string
	batches := 0
	for len(walFiles(t, src)) < 4 {
		enqueueBatches(t, s, batches, batches+10)
		batches += 10
		if wals := walFiles(t, src); len(wals) == 3 && boundary == 0 {
			fi, err := os.Stat(wals[2])
			if err != nil {
				t.Fatal(err)
			}
			boundary, third = fi.Size(), filepath.Base(wals[2])
		}
	}
	enqueueBatches(t, s, batches, batches+10) // the newest log holds some too
	batches += 10
	crashed, _ := copyDir(t, src)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	total := int64(batches * 100)
	if boundary == 0 || third != filepath.Base(walFiles(t, crashed)[2]) {
		t.Fatalf("no record boundary taken in the third log (%q, %d)", third, boundary)
	}
	t.Logf("%d jobs in %d commits; logs %v; the third log's record boundary at %d", total, batches, walFiles(t, crashed), boundary)

	cases := []struct {
		name   string
		damage func(t *testing.T, wals []string)
		refuse bool // Pebble can prove the damage: the directory is not served
		hole   bool // the logs after the damage are set aside
	}{
		{"nothing", func(*testing.T, []string) {}, false, false},
		{"delete an older log", func(t *testing.T, w []string) { remove(t, w[2]) }, false, true},
		{"delete the oldest log", func(t *testing.T, w []string) { remove(t, w[0]) }, false, true},
		{"delete the newest log", func(t *testing.T, w []string) { remove(t, w[len(w)-1]) }, false, false},
		{"delete every log", func(t *testing.T, w []string) {
			for _, f := range w {
				remove(t, f)
			}
		}, false, false},
		{"cut an older log where a record begins", func(t *testing.T, w []string) { truncate(t, w[2], boundary) }, false, true},
		{"cut an older log inside a record", func(t *testing.T, w []string) { truncate(t, w[2], dataEnd(t, w[2])-100) }, true, false},
		{"overwrite bytes of an older log", func(t *testing.T, w []string) { flip(t, w[2], dataEnd(t, w[2])/2) }, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := copyDir(t, crashed)
			tc.damage(t, walFiles(t, dir))
			s, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
			if tc.refuse {
				if err == nil {
					s.Close()
					t.Fatal("Open served a directory whose older log is damaged")
				}
				want := "the data in " + dir + " is damaged and was not served (pebble.ErrCorruption); restore your latest backup with sepp restore --from BACKUP --data " + dir + " --force, which moves this directory aside (kept for inspection)"
				if !errors.Is(err, pebbledb.ErrCorruption) || !strings.Contains(err.Error(), want) {
					t.Fatalf("Open: %v\nwant pebble.ErrCorruption and %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := countJobs(t, s)
			prefix := jobsArePrefix(t, s, got)
			r := s.Recovery()
			s.Close()
			lostJobs := total - got
			if !prefix {
				t.Errorf("the %d jobs left are not the first %d enqueued: a write after the damage was replayed over it", got, got)
			}
			t.Logf("%d of %d jobs; Damaged %q", got, total, r.Damaged)
			if lostJobs == 0 {
				if len(r.Damaged) != 0 {
					t.Fatalf("every job is there, yet Damaged %q", r.Damaged)
				}
				if tc.name != "nothing" {
					t.Fatal("the damage lost no job: the test damaged nothing that mattered")
				}
				return
			}
			want := fmt.Sprintf("lost %s, which created %d jobs", commitsText(lostJobs/100), lostJobs)
			if len(r.Damaged) != 1 || !strings.Contains(r.Damaged[0], want) {
				t.Fatalf("%d of %d jobs; Damaged %q, want one report saying %q", got, total, r.Damaged, want)
			}
			if aside := "moved to " + filepath.Join(dir, pebble.LostWALDir); tc.hole != strings.Contains(r.Damaged[0], aside) {
				t.Errorf("Damaged %q: saying %q is %v, want %v", r.Damaged, aside, !tc.hole, tc.hole)
			}
			// Reported once.
			s, err = pebble.Open(context.Background(), pebble.Options{Path: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if r := s.Recovery(); len(r.Damaged) != 0 || countJobs(t, s) != got {
				t.Fatalf("second start: Damaged %q, %d jobs; want nothing reported and %d jobs", r.Damaged, countJobs(t, s), got)
			}
		})
	}
}

func commitsText(n int64) string {
	if n == 1 {
		return "1 acknowledged commit"
	}
	return fmt.Sprintf("%d acknowledged commits", n)
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// flip inverts 8 bytes of path at off.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 8)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] ^= 0xff
	}
	if _, err := f.WriteAt(buf, off); err != nil {
		t.Fatal(err)
	}
}

// jobsArePrefix says whether the n jobs on queue q of s are those of the
// first n keys enqueued (k0, k1, ...).
func jobsArePrefix(t *testing.T, s *pebble.Store, n int64) bool {
	t.Helper()
	for _, i := range []int64{0, n - 1, n} {
		if i < 0 {
			continue
		}
		key := "k" + strconv.FormatInt(i, 10)
		l, err := s.LookupDedup(context.Background(), &store.LookupDedupParams{Now: recT0, Queue: "q", Key: key})
		if err != nil && !errors.Is(err, store.ErrDedupNotFound) {
			t.Fatal(err)
		}
		if found := err == nil && l != nil && l.JobState != store.JobStateDeleted; found != (i < n) {
			return false
		}
	}
	return true
}

// TestRecoveryLossCountedOnce: a loss reported at one start is not counted
// again when a later loss takes the log that recorded it (the count the
// first start brought the database up to).
func TestRecoveryLossCountedOnce(t *testing.T) {
	src := t.TempDir()
	s, err := pebble.Open(context.Background(), pebble.Options{Path: src})
	if err != nil {
		t.Fatal(err)
	}
	enqueueBatches(t, s, 0, 10)
	for len(walFiles(t, src)) < 2 {
		enqueueBatches(t, s, 10, 11)
	}
	crashed, _ := copyDir(t, src)
	s.Close()
	remove(t, walFiles(t, crashed)[0])
	s, err = pebble.Open(context.Background(), pebble.Options{Path: crashed})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Recovery(); len(r.Damaged) != 1 || countJobs(t, s) != 0 {
		t.Fatalf("first loss: Damaged %q, %d jobs; want it reported and no job left", r.Damaged, countJobs(t, s))
	}
	// Again: batches 100 on, until the store has started a second log
	// (Pebble may keep an old log file to recycle: it holds only commits
	// the tables have), then the first log written since the start (which
	// holds the count the start wrote) deleted.
	first := walFiles(t, crashed)
	b := 100
	for len(walFiles(t, crashed)) < len(first)+1 || b == 100 {
		enqueueBatches(t, s, b, b+1)
		b++
	}
	again, _ := copyDir(t, crashed)
	s.Close()
	remove(t, filepath.Join(again, filepath.Base(first[len(first)-1])))
	s, err = pebble.Open(context.Background(), pebble.Options{Path: again})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := countJobs(t, s)
	want := fmt.Sprintf("lost %s, which created %d jobs", commitsText(int64(b-100)-got/100), int64(b-100)*100-got)
	if r := s.Recovery(); len(r.Damaged) != 1 || !strings.Contains(r.Damaged[0], want) {
		t.Fatalf("second loss: %d jobs; Damaged %q, want it saying %q (only the commits since the first loss)", got, r.Damaged, want)
	}
}

// TestRecoveryReusedLogAfterCrash: with small memtables Pebble reuses old
// log files, and the live log's file goes on, past its last record, with
// the records of the log it held before. A crash there (the directory
// copied while the store is open) loses nothing and is no damage: the store
// reopens with every job and nothing reported.
func TestRecoveryReusedLogAfterCrash(t *testing.T) {
	src := t.TempDir()
	s, err := pebble.Open(context.Background(), pebble.Options{Path: src, MemTableSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	const n = 4000
	enqueueEach(t, s, n)
	dst, wal := copyDir(t, src)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(wal)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pebble.Open(context.Background(), pebble.Options{Path: dst})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d := c.Recovery().Damaged; len(d) != 0 {
		t.Fatalf("a crash on a reused log file (%s, %d bytes) reported as damage: %q", filepath.Base(wal), info.Size(), d)
	}
	if got := countJobs(t, c); got != n {
		t.Fatalf("%d jobs after the crash, want %d", got, n)
	}
}
