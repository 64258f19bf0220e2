package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp"
)

// cluster starts n `sepp serve` nodes on one fresh PostgreSQL database and
// returns a client per node. Without SEPP_TEST_POSTGRES_URL the test is
// skipped; CI sets it, and there an unreachable database fails.
func cluster(t *testing.T, n int) []*sepp.Client {
	t.Helper()
	clients, _ := clusterWith(t, n, "")
	return clients
}

// clusterWith is cluster with a config file body for every node, returning
// the node processes too.
func clusterWith(t *testing.T, n int, config string) ([]*sepp.Client, []*serverProcess) {
	t.Helper()
	base := os.Getenv("SEPP_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("SEPP_TEST_POSTGRES_URL is not set (CI sets it)")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL at SEPP_TEST_POSTGRES_URL: %v", err)
	}
	db := fmt.Sprintf("sepp_cluster_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+db); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	u, _ := url.Parse(base)
	u.Path = "/" + db
	var clients []*sepp.Client
	var nodes []*serverProcess
	for i := range n {
		logf, err := os.Create(filepath.Join(t.TempDir(), fmt.Sprint("node", i, ".log")))
		if err != nil {
			t.Fatal(err)
		}
		p := &serverProcess{t: t, bin: buildSepp(t), addr: freePort(t), data: t.TempDir(), log: logf,
			env: []string{"SEPP_STORAGE_BACKEND=postgres", "SEPP_STORAGE_URL=" + u.String()}}
		if config != "" {
			cfg := filepath.Join(t.TempDir(), "sepp.toml")
			if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
			p.args = []string{"--config", cfg}
		}
		p.start()
		nodes = append(nodes, p)
		c, err := sepp.Connect(ctx, "http://"+p.addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	t.Cleanup(func() {
		for i, c := range clients {
			c.Close()
			if nodes[i].cmd.ProcessState == nil {
				nodes[i].signal(syscall.SIGTERM)
			}
			nodes[i].log.Close()
		}
		if c, err := pgx.Connect(context.Background(), base); err == nil {
			c.Exec(context.Background(), `DROP DATABASE `+db+` WITH (FORCE)`)
			c.Close(context.Background())
		}
	})
	return clients, nodes
}

// TestThreeNodesOneKeyOneJob: 64 producers spread over three nodes enqueue
// 5,000 keys four times each, interleaved: exactly 5,000 jobs, and every
// caller of a key got the same id.
func TestThreeNodesOneKeyOneJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three server processes; skipped with -short")
	}
	nodes := cluster(t, 3)
	const keys, rounds, producers = 5000, 4, 64
	var work []int
	for range rounds {
		for k := range keys {
			work = append(work, k)
		}
	}
	rand.Shuffle(len(work), func(i, j int) { work[i], work[j] = work[j], work[i] })
	var mu sync.Mutex
	ids := make(map[int][]string, keys)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := nodes[p%len(nodes)]
			for i := p; i < len(work); i += producers {
				k := work[i]
				ack, err := c.Enqueue(context.Background(), sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(fmt.Sprint("key-", k))})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				ids[k] = append(ids[k], ack.JobID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	jobs := map[string]bool{}
	for k, got := range ids {
		if len(got) != rounds || slices.ContainsFunc(got, func(id string) bool { return id != got[0] }) {
			t.Fatalf("key %d: ids %v; want one id %d times", k, got, rounds)
		}
		jobs[got[0]] = true
	}
	if len(jobs) != keys {
		t.Fatalf("%d jobs for %d keys", len(jobs), keys)
	}
	qs, err := nodes[2].ListQueues(context.Background())
	if err != nil || len(qs) != 1 || qs[0].Available != keys || qs[0].DedupRecords != keys {
		t.Fatalf("queues seen from node 3: %+v %v; want %d jobs and %d records", qs, err, keys, keys)
	}
}

// TestHandoverAcrossNodes: a worker long-polling on node B receives a job
// enqueued on node A (woken by LISTEN/NOTIFY); the handover times are
// reported, not asserted.
func TestHandoverAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs server processes; skipped with -short")
	}
	nodes := cluster(t, 2)
	ctx := context.Background()
	var lat []time.Duration
	for i := range 50 {
		got := make(chan time.Time, 1)
		ready := make(chan struct{})
		go func() {
			close(ready)
			r, err := nodes[1].Reserve(ctx, sepp.ReserveRequest{Queues: []string{"handover"}, Wait: 10 * time.Second})
			if err != nil || len(r) != 1 {
				t.Errorf("reserve on node B: %v %v", r, err)
			}
			got <- time.Now()
		}()
		<-ready
		time.Sleep(20 * time.Millisecond) // let the Reserve start waiting
		start := time.Now()
		if _, err := nodes[0].Enqueue(ctx, sepp.EnqueueRequest{Queue: "handover", JobType: "t", IdempotencyKey: sepp.Key(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, (<-got).Sub(start))
	}
	slices.Sort(lat)
	t.Logf("enqueue on node A to reserve on node B, 50 jobs: p50 %v, p99 %v, max %v", lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}

// TestEffectClaimsAcrossNodes: 32 claims of one key spread over three
// nodes give exactly one ACQUIRED.
func TestEffectClaimsAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs server processes; skipped with -short")
	}
	nodes := cluster(t, 3)
	var acquired, inProgress int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := nodes[i%3].ClaimEffect(context.Background(), sepp.ClaimEffectRequest{Scope: "mail.invoice", Key: "order-9.invoice"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch c.State {
			case sepp.EffectAcquired:
				acquired++
			case sepp.EffectInProgress:
				inProgress++
			}
		}()
	}
	wg.Wait()
	if acquired != 1 || inProgress != 31 {
		t.Fatalf("%d acquired, %d in progress; want 1 and 31", acquired, inProgress)
	}
}

// TestNodeKilledMidProcessing: a node is killed with SIGKILL while workers
// on both nodes process jobs; the jobs its worker had leased are delivered
// through the other node after the lease, nothing is lost, and every job
// ends COMPLETED.
func TestNodeKilledMidProcessing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs server processes; skipped with -short")
	}
	clients, nodes := clusterWith(t, 2, "[[queues]]\nname = \"q\"\nlease_ms = 1000\n")
	ids := enqueueN(t, clients[0], "q", 1000)
	a := startWorker(t, "http://"+nodes[0].addr, "--queues", "q", "-c", "8", "--sleep", "10ms")
	b := startWorker(t, "http://"+nodes[1].addr, "--queues", "q", "-c", "8", "--sleep", "10ms")
	eventually(t, "both workers to process jobs", 30*time.Second, func() bool {
		return len(readRecord(t, a.record)) > 50 && len(readRecord(t, b.record)) > 50
	})
	nodes[0].signal(syscall.SIGKILL)
	eventually(t, "every job completed through the surviving node", 2*time.Minute, func() bool {
		return queueInfo(t, clients[1], "q").Completed == 1000
	})
	a.stop(t, syscall.SIGKILL)
	b.stop(t, syscall.SIGTERM)
	for _, id := range ids {
		j, err := clients[1].GetJob(context.Background(), id)
		if err != nil || j.State != sepp.JobStateCompleted {
			t.Fatalf("job %s: %+v %v", id, j, err)
		}
	}
	if q := queueInfo(t, clients[1], "q"); q.Reserved != 0 || q.Available != 0 || q.Dead != 0 {
		t.Fatalf("queue after the node died: %+v", q)
	}
}
