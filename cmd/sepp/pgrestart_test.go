//go:build pgrestart

// This test restarts the machine's PostgreSQL, so it cannot run beside the
// other packages' PostgreSQL tests: .ci/run runs it alone, after them, with
// `go test -tags pgrestart -run TestPostgresRestart ./cmd/sepp`.

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
)

// TestPostgresRestart: PostgreSQL is restarted while 16 producers enqueue
// through two nodes, each retrying every enqueue with its key until it is
// acknowledged. The nodes recover without a restart of their own, and every
// key has exactly one job.
func TestPostgresRestart(t *testing.T) {
	clients := cluster(t, 2)
	const producers = 16
	var (
		mu    sync.Mutex
		acked = map[string]string{}
		stop  atomic.Bool
		tries atomic.Int64
		wg    sync.WaitGroup
	)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[p%len(clients)]
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("p%d-k%d", p, i)
				for {
					tries.Add(1)
					ack, err := c.Enqueue(context.Background(), sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(key)})
					if err == nil {
						mu.Lock()
						if prev, ok := acked[key]; ok && prev != ack.JobID {
							t.Errorf("key %s acked with two ids", key)
						}
						acked[key] = ack.JobID
						mu.Unlock()
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	versions, _ := os.ReadDir("/etc/postgresql")
	if len(versions) == 0 {
		t.Fatal("no /etc/postgresql: cannot restart PostgreSQL")
	}
	out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", versions[0].Name(), "main", "restart").CombinedOutput()
	if err != nil {
		t.Fatalf("restart PostgreSQL: %v\n%s", err, out)
	}
	time.Sleep(2 * time.Second) // load continues after the restart
	stop.Store(true)
	wg.Wait()
	t.Logf("%d keys acknowledged in %d attempts across a PostgreSQL restart", len(acked), tries.Load())
	if int64(len(acked)) == tries.Load() {
		t.Log("no enqueue failed during the restart (it may have been too quick to notice)")
	}

	// Both nodes answer again, and the database holds one job per key.
	for i, c := range clients {
		if _, err := c.Enqueue(context.Background(), sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(fmt.Sprint("after-", i))}); err != nil {
			t.Fatalf("node %d after the restart: %v", i, err)
		}
	}
	qs, err := clients[0].ListQueues(context.Background())
	if err != nil || len(qs) != 1 || qs[0].Available != int64(len(acked)+2) || qs[0].DedupRecords != int64(len(acked)+2) {
		t.Fatalf("queues: %+v %v; want %d jobs and records", qs, err, len(acked)+2)
	}
	for key, id := range acked {
		l, err := clients[1].LookupIdempotencyKey(context.Background(), "q", key)
		if err != nil || l.JobID != id {
			t.Fatalf("key %s: %+v %v; want %s", key, l, err, id)
		}
	}
}
