package postgres_test

import (
	"testing"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storetest"
	"github.com/sepp-dev/sepp/internal/testserver"
)

func benchStore(b *testing.B) store.Store {
	b.Helper()
	s, err := openAt(b.Context(), testserver.PostgresSchema(b, "sepp_bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// The storage micro-benchmarks of package storetest, the same as Pebble's.
func BenchmarkEnqueue1(b *testing.B)      { storetest.BenchmarkEnqueue(b, benchStore(b), 1) }
func BenchmarkEnqueue32(b *testing.B)     { storetest.BenchmarkEnqueue(b, benchStore(b), 32) }
func BenchmarkEnqueueHits32(b *testing.B) { storetest.BenchmarkEnqueueHits(b, benchStore(b), 32) }
func BenchmarkEnqueueC32(b *testing.B)    { storetest.BenchmarkEnqueueConcurrent(b, benchStore(b), 32) }
