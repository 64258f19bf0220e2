//go:build pgrestart

// This test restarts the PostgreSQL cluster that serves
// SEPP_TEST_POSTGRES_URL, so it cannot run beside the other packages'
// PostgreSQL tests: .ci/run runs it alone, after them, with
// `go test -tags pgrestart -run TestPostgresRestart ./cmd/sepp`.

package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp"
)

// TestPostgresRestart: PostgreSQL is restarted while 16 producers enqueue
// through two nodes, each retrying every enqueue with its key until it is
// acknowledged. The nodes notice the restart (enqueues fail while it lasts),
// recover without a restart of their own, and every key has exactly one
// job. A restart no enqueue noticed fails the test: it showed nothing.
func TestPostgresRestart(t *testing.T) {
	_, nodes := clusterWith(t, 2, "")
	// The producers' clients do not resend: a failed enqueue reaches the
	// producer, which counts it, and resends it itself with its key.
	var clients []*sepp.Client
	for _, n := range nodes {
		c, err := sepp.NewClient(context.Background(), "http://"+n.addr, sepp.Config{EnqueueRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	const producers = 16
	// ackedAfter is how many keys each node acknowledges after the restart
	// before the load stops: the load goes on after the restart.
	const ackedAfter = 200
	var (
		mu       sync.Mutex
		acked    = map[string]string{}
		stop     atomic.Bool
		tries    atomic.Int64
		failures atomic.Int64
		wg       sync.WaitGroup
		// ackedBy counts each node's acknowledgements, and base is its
		// count when the restart was over.
		ackedBy, base [2]atomic.Int64
		restarted     atomic.Bool
		warm, after   = make(chan struct{}), make(chan struct{})
		warmOnce      sync.Once
		afterOnce     sync.Once
	)
	for p := range producers {
		wg.Go(func() {
			node := p % len(clients)
			c := clients[node]
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
						n := len(acked)
						mu.Unlock()
						ackedBy[node].Add(1)
						if n >= 10*producers {
							warmOnce.Do(func() { close(warm) })
						}
						if restarted.Load() && ackedBy[0].Load()-base[0].Load() >= ackedAfter && ackedBy[1].Load()-base[1].Load() >= ackedAfter {
							afterOnce.Do(func() { close(after) })
						}
						break
					}
					failures.Add(1)
					time.Sleep(50 * time.Millisecond) // the producer's pause before it resends, as a client's backoff
				}
			}
		})
	}
	await(t, warm, "the producers' first acknowledgements")
	before := postmasterStart(t)
	failedBefore := failures.Load()
	restartPostgres(t)
	for i := range ackedBy {
		base[i].Store(ackedBy[i].Load())
	}
	restarted.Store(true)
	await(t, after, fmt.Sprintf("%d acknowledgements by each node after the restart", ackedAfter))
	stop.Store(true)
	wg.Wait()
	if now := postmasterStart(t); !now.After(before) {
		t.Fatalf("PostgreSQL started at %v before the restart and at %v after: it did not restart", before, now)
	}
	noticed := failures.Load() - failedBefore
	t.Logf("%d keys acknowledged in %d attempts across a PostgreSQL restart; %d enqueues failed during it", len(acked), tries.Load(), noticed)
	if noticed == 0 {
		t.Fatal("no enqueue failed while PostgreSQL restarted: the restart went unnoticed, and the test showed nothing")
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

// postmasterStart is when the PostgreSQL server at SEPP_TEST_POSTGRES_URL
// started.
func postmasterStart(t *testing.T) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, os.Getenv("SEPP_TEST_POSTGRES_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var at time.Time
	if err := c.QueryRow(ctx, `SELECT pg_postmaster_start_time()`).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// restartPostgres restarts the cluster of this machine that listens on
// SEPP_TEST_POSTGRES_URL's port (pg_lsclusters names it).
func restartPostgres(t *testing.T) {
	t.Helper()
	u, err := url.Parse(os.Getenv("SEPP_TEST_POSTGRES_URL"))
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	out, err := exec.Command("pg_lsclusters", "--no-header").Output()
	if err != nil {
		t.Fatalf("pg_lsclusters: %v: cannot find the cluster to restart", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line) // version, cluster, port, status, ...
		if len(f) < 3 || f[2] != port {
			continue
		}
		out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", f[0], f[1], "restart").CombinedOutput()
		if err != nil {
			t.Fatalf("restart PostgreSQL %s/%s: %v\n%s", f[0], f[1], err, out)
		}
		return
	}
	t.Fatalf("no PostgreSQL cluster of this machine listens on port %s (pg_lsclusters):\n%s", port, out)
}
