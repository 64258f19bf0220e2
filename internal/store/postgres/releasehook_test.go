package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/postgres"
	"github.com/sepp-dev/sepp/internal/store/storetest"
)

func TestReleaseHook(t *testing.T) {
	storetest.RunReleaseHook(t, func(t *testing.T, onKeyReleased func(queue string, n int)) store.Store {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := postgres.Open(ctx, postgres.Options{URL: place(t), MaxConns: 8, OnKeyReleased: onKeyReleased})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
