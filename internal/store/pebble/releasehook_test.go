package pebble_test

import (
	"context"
	"testing"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
	"github.com/sepp-dev/sepp/internal/store/storetest"
)

func TestReleaseHook(t *testing.T) {
	storetest.RunReleaseHook(t, func(t *testing.T, onKeyReleased func(queue string, n int)) store.Store {
		s, err := pebble.Open(context.Background(), pebble.Options{Path: t.TempDir(), OnKeyReleased: onKeyReleased})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}
