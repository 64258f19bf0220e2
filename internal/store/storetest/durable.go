package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/sepp-dev/sepp/internal/store"
)

// Durable is what the suite needs to test what must hold across a Close:
// a place the store keeps its data in (a directory, a database schema), and
// a way to make that data look as if a newer sepp had written it.
type Durable struct {
	// Place returns a new, empty place for a store, removed when t ends.
	Place func(t *testing.T) string
	// Open opens the store kept at place, creating it if empty.
	Open func(ctx context.Context, place string) (store.Store, error)
	// SetSchemaVersion records, in the closed store at place, that its
	// schema is at version, as a newer binary's migrations would.
	SetSchemaVersion func(t *testing.T, place string, version int)
}

// RunDurable runs the cases that close and reopen a store.
func RunDurable(t *testing.T, d Durable) {
	tests := []struct {
		name string
		fn   func(t *testing.T, d Durable)
	}{
		{"ReopenKeepsData", testReopenKeepsData},
		{"NewerSchemaRefused", testNewerSchemaRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, d)
		})
	}
}

func openAt(t *testing.T, d Durable, place string) store.Store {
	t.Helper()
	s, err := d.Open(context.Background(), place)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func testReopenKeepsData(t *testing.T, d Durable) {
	place := d.Place(t)
	s := openAt(t, d, place)
	res := enqueueOne(t, s, t0, job("q", "k"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = openAt(t, d, place)
	defer s.Close()
	if _, err := s.GetJob(context.Background(), &store.GetJobParams{ID: res.JobID}); err != nil {
		t.Fatalf("job lost across reopen: %v", err)
	}
	if again := enqueueOne(t, s, t0.Add(1), job("q", "k")); !again.Deduplicated || again.JobID != res.JobID {
		t.Fatalf("dedup record lost across reopen: %+v", again)
	}
}

// testNewerSchemaRefused: a binary must not open data a newer binary
// migrated, whatever the backend.
func testNewerSchemaRefused(t *testing.T, d Durable) {
	place := d.Place(t)
	s := openAt(t, d, place)
	enqueueOne(t, s, t0, job("q", "k"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	d.SetSchemaVersion(t, place, 9999)
	s, err := d.Open(context.Background(), place)
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a schema newer than the binary")
	}
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open: %v, want ErrSchemaTooNew", err)
	}
}
