package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storetest"
)

// TestConformanceReleaseAcrossNodes runs the release_key_on cases on two
// stores on one schema, as two nodes on one database.
func TestConformanceReleaseAcrossNodes(t *testing.T) {
	storetest.RunReleaseNodes(t, func(t *testing.T) storetest.Nodes {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		at := place(t)
		a, err := openAt(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		b, err := openAt(ctx, at)
		if err != nil {
			a.Close()
			t.Fatal(err)
		}
		return storetest.Nodes{A: a, B: b}
	})
}

// TestConformanceFlowAcrossNodes runs the per-key flow control cases on
// three stores on one schema, as three nodes on one database.
func TestConformanceFlowAcrossNodes(t *testing.T) {
	storetest.RunFlowNodes(t, func(t *testing.T) [3]store.Store {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		at := place(t)
		var n [3]store.Store
		for i := range n {
			s, err := openAt(ctx, at)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			n[i] = s
		}
		return n
	})
}
