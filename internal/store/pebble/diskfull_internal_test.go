package pebble

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sepp-dev/sepp/internal/store"
)

// walFaultFS fails every write to a write-ahead log (*.log) with ENOSPC
// once armed, as a full disk does.
type walFaultFS struct {
	vfs.FS
	armed atomic.Bool
}

func (fs *walFaultFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &walFaultFile{File: f, fs: fs}, nil
}

func (fs *walFaultFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *walFaultFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(old, name, c)
	return fs.wrap(name, f, err)
}

type walFaultFile struct {
	vfs.File
	fs *walFaultFS
}

func (f *walFaultFile) Write(p []byte) (int, error) {
	if f.fs.armed.Load() {
		return 0, syscall.ENOSPC
	}
	return f.File.Write(p)
}

func enqueueKey(t *testing.T, s *Store, key string) (store.EnqueueResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := key
	res, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Now: time.Now().UTC(),
		Jobs: []store.EnqueueJob{{Queue: "q", JobType: "t", IdempotencyKey: &k, DedupWindow: time.Hour, MaxAttempts: 3}}})
	if err != nil {
		return store.EnqueueResult{}, err
	}
	return res[0], res[0].Err
}

// TestFailedSyncStopsTheStore: once a write-ahead log write fails (a full
// disk), the store acknowledges nothing more. Before, the job whose commit
// failed stayed visible in memory, and a second enqueue of its key was
// answered as a dedup hit on it: acknowledged, and lost at the restart.
func TestFailedSyncStopsTheStore(t *testing.T) {
	dir := t.TempDir()
	fs := &walFaultFS{FS: vfs.Default}
	var failures atomic.Int32
	s, err := Open(context.Background(), Options{Path: dir, FS: fs, OnFailed: func(error) { failures.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	a, err := enqueueKey(t, s, "a")
	if err != nil {
		t.Fatal(err)
	}

	fs.armed.Store(true)
	if _, err := enqueueKey(t, s, "b"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("enqueue whose log write failed: %v, want ErrUnavailable", err)
	}
	// The same key again, and a key already stored: neither is answered
	// from what memory holds.
	for _, key := range []string{"b", "a"} {
		if r, err := enqueueKey(t, s, key); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("enqueue of %q after the failed commit: %+v, %v; want ErrUnavailable", key, r, err)
		}
	}
	if _, err := s.GetJob(context.Background(), &store.GetJobParams{ID: a.JobID}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("GetJob after the failed commit: %v, want ErrUnavailable", err)
	}
	if err := s.Ping(context.Background()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping after the failed commit: %v, want ErrUnavailable", err)
	}
	if n := failures.Load(); n != 1 {
		t.Fatalf("OnFailed called %d times, want 1", n)
	}
	_ = s.Close() // Pebble reports the failed log again; the store stops all the same

	// The disk has room again: a restart has what was acknowledged, and
	// nothing that was not.
	s, err = Open(context.Background(), Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, err := enqueueKey(t, s, "a"); err != nil || !r.Deduplicated || r.JobID != a.JobID {
		t.Fatalf("after the restart, key a: %+v, %v; want a hit on %v", r, err, a.JobID)
	}
	if r, err := enqueueKey(t, s, "b"); err != nil || r.Deduplicated {
		t.Fatalf("after the restart, key b: %+v, %v; want a new job (its first commit failed)", r, err)
	}
}
