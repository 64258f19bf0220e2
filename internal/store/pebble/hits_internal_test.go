package pebble

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// TestAwaitSynced: a hit answered from records that commit n made visible
// waits until commit n has returned, and no longer.
func TestAwaitSynced(t *testing.T) {
	s, err := Open(context.Background(), Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	base := s.synced.Load()
	if err := s.awaitSynced(context.Background(), base); err != nil {
		t.Fatalf("a commit already returned: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.awaitSynced(context.Background(), base+2) }()
	s.markSynced(base + 1)
	select {
	case err := <-done:
		t.Fatalf("returned (%v) before commit %d returned", err, base+2)
	case <-time.After(50 * time.Millisecond):
	}
	s.markSynced(base + 2)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after the commit returned")
	}
	go func() { done <- s.awaitSynced(context.Background(), base+10) }()
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrClosed) {
			t.Fatalf("after Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after Close")
	}
}
