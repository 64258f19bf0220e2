package storerule

import (
	"fmt"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// BenchmarkDecide decides one call of 14 keyed jobs (the size of the
// embedded store's group under `sepp bench enqueue -c 32`), every key new
// (fresh) or every key live (hits).
func BenchmarkDecide(b *testing.B) {
	now := t0.UnixMicro()
	jobs := make([]Job, 14)
	for i := range jobs {
		j, err := Prepare(&store.EnqueueJob{Queue: "bench", JobType: "t", Payload: make([]byte, 256),
			IdempotencyKey: key(fmt.Sprintf("key-%d", i)), DedupWindow: time.Hour}, now)
		if err != nil {
			b.Fatal(err)
		}
		jobs[i] = j
	}
	for _, hits := range []bool{false, true} {
		b.Run(map[bool]string{false: "fresh", true: "hits"}[hits], func(b *testing.B) {
			results := make([]store.EnqueueResult, len(jobs))
			for b.Loop() {
				g := NewGroup()
				Keys(jobs, now, map[Key]bool{}, func(k Key, _ Record) {
					if hits {
						g.Records[k] = &Entry{Record: Record{ExpiresAt: now + 1}, Stored: true}
					}
				})
				if err := g.Decide(false, now, jobs, results); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
