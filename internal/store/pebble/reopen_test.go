package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// TestEmptyWriteAfterReopen: after a restart, a write that writes nothing
// (a Reserve that finds no job and no lease to end) is answered at once.
// It used to wait until this process committed something: the commits the
// database replayed counted as not yet synced, so a worker's Reserve on an
// idle store hung (its context ignored) until another write or a sweep came,
// and a job whose lease had ended in the meantime stayed reserved.
func TestEmptyWriteAfterReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(ctx, Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	enqueueN(t, s, time.Now(), 1, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := s.Reserve(ctx, &store.ReserveParams{Queues: []string{"empty"}, WorkerID: "w", Max: 1, Lease: time.Minute, Now: time.Now()})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Reserve on an empty queue after the reopen: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Reserve on an empty queue after the reopen has not answered in 5 s: it waits for a commit of this process")
	}
}
