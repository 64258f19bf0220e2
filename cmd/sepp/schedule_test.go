package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// scheduleTestConfig is a schedule ticking every second on queue "beats".
func scheduleTestConfig(catchUp string) string {
	return fmt.Sprintf("[[schedules]]\nname = \"beat\"\ncron = \"@every 1s\"\nqueue = \"beats\"\njob_type = \"beat\"\ncatch_up = %q\n", catchUp)
}

// embeddedNode starts a `sepp serve` on the embedded store with config.
func embeddedNode(t *testing.T, config string) *serverProcess {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "sepp.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return startNode(t, buildSepp(t), t.TempDir(), []string{"--config", cfg})
}

// tickJobs connects to node and returns the tick of every job on queue
// "beats", one entry per job, in key order, after the schedule has recorded
// a tick at or after through (every node of the store is up by then, so
// the ticks up to it have fired).
func tickJobs(t *testing.T, node *serverProcess, through time.Time) []time.Time {
	t.Helper()
	ctx := context.Background()
	c, err := sepp.Connect(ctx, "http://"+node.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Waits on the schedule's own state; the deadline only turns a hang
	// into a failure.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		ss, err := c.ListSchedules(ctx)
		if err == nil && len(ss) == 1 && !ss[0].LastTick.Before(through) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the schedule did not reach %s: %+v, %v", node.addr, through, ss, err)
		}
	}
	var ticks []time.Time
	req := sepp.ListJobsRequest{Queue: "beats", PageSize: 1000}
	for {
		page, err := c.ListJobs(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			at, ok := strings.CutPrefix(j.IdempotencyKey, "schedule:beat:")
			tick, err := time.Parse(time.RFC3339, at)
			if !ok || err != nil {
				t.Fatalf("job %s has the key %q, not a tick's", j.ID, j.IdempotencyKey)
			}
			ticks = append(ticks, tick)
		}
		if page.NextPageToken == "" {
			break
		}
		req.PageToken = page.NextPageToken
	}
	slices.SortFunc(ticks, func(a, b time.Time) int { return a.Compare(b) })
	return ticks
}

// checkEveryTickOnce fails unless ticks hold one job per second, with no
// second missing, from the first to the last.
func checkEveryTickOnce(t *testing.T, store string, ticks []time.Time) {
	t.Helper()
	if len(ticks) < 2 {
		t.Fatalf("%s: %d tick jobs", store, len(ticks))
	}
	for i := 1; i < len(ticks); i++ {
		switch d := ticks[i].Sub(ticks[i-1]); {
		case d == 0:
			t.Errorf("%s: two jobs for tick %s", store, ticks[i].Format(time.RFC3339))
		case d != time.Second:
			t.Errorf("%s: no job for the ticks between %s and %s", store, ticks[i-1].Format(time.RFC3339), ticks[i].Format(time.RFC3339))
		}
	}
	t.Logf("%s: %d ticks, %s to %s, one job each", store, len(ticks), ticks[0].Format(time.RFC3339), ticks[len(ticks)-1].Format(time.RFC3339))
}

// TestScheduleUnderKills runs a schedule @every 1s with catch_up = "all" on
// three nodes sharing one PostgreSQL database and on one embedded node,
// while nodes are killed with SIGKILL and restarted at random, with a
// stretch where every PostgreSQL node is down. Each store must then hold
// exactly one job per tick, none missing from the first tick to the last.
// 60 s of wall time, about 70 s with the nodes' starts and the read back
// (measured), so it runs in the default tier; -short skips it. It asserts
// counts, never timings.
func TestScheduleUnderKills(t *testing.T) {
	skipShort(t)
	const window = 60 * time.Second
	config := scheduleTestConfig("all")
	_, pg := clusterWith(t, 3, config)
	nodes := append(slices.Clone(pg), embeddedNode(t, config))
	up := func(p *serverProcess) bool { return p.cmd.ProcessState == nil }

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	start := time.Now()
	outage := false
	for time.Since(start) < window {
		if !outage && time.Since(start) > window/3 {
			// Every PostgreSQL node down for a few ticks: the first to come
			// back must catch up on them.
			outage = true
			for _, p := range pg {
				if up(p) {
					p.signal(syscall.SIGKILL)
				}
			}
			time.Sleep(2500 * time.Millisecond)
			for _, p := range pg {
				p.start()
			}
			continue
		}
		p := nodes[rng.IntN(len(nodes))]
		if up(p) {
			p.signal(syscall.SIGKILL)
		} else {
			p.start()
		}
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
	}
	end := time.Now()
	for _, p := range nodes {
		if !up(p) {
			p.start()
		}
	}
	checkEveryTickOnce(t, "postgres", tickJobs(t, pg[0], end))
	checkEveryTickOnce(t, "embedded", tickJobs(t, nodes[3], end))
}

// TestScheduleCatchUpLastAfterRestart stops the only node for several
// ticks and starts it again: with catch_up = "last" exactly the latest
// missed tick gets a job, and none of the ticks before it.
func TestScheduleCatchUpLastAfterRestart(t *testing.T) {
	skipShort(t)
	p := embeddedNode(t, scheduleTestConfig("last"))
	before := tickJobs(t, p, time.Now().Add(time.Second))
	p.signal(syscall.SIGKILL)
	stopped := time.Now()
	time.Sleep(4 * time.Second) // several ticks pass with no node running
	started := time.Now()
	p.start()
	after := tickJobs(t, p, started)

	lastBefore := before[len(before)-1]
	var resumed []time.Time
	for _, tick := range after {
		if tick.After(lastBefore) {
			resumed = append(resumed, tick)
		}
	}
	if len(resumed) == 0 {
		t.Fatalf("no tick after %s", lastBefore)
	}
	first := resumed[0]
	// The latest tick missed is at or after started - 1 s; every tick of
	// (lastBefore, first) was missed and must have no job.
	if first.Before(started.Add(-time.Second).Truncate(time.Second)) {
		t.Errorf("after the restart the first job is tick %s, an older missed tick than the latest (node started at %s)",
			first.Format(time.RFC3339), started.Format(time.RFC3339Nano))
	}
	if missed := first.Sub(lastBefore)/time.Second - 1; missed < 2 {
		t.Errorf("only %d ticks passed between %s and %s while the node was down (stopped %s)", missed,
			lastBefore.Format(time.RFC3339), first.Format(time.RFC3339), stopped.Format(time.RFC3339Nano))
	}
	checkEveryTickOnce(t, "after the restart", resumed)
}

// TestCLISchedules: sepp schedules lists each schedule with its cron, zone,
// queue, catch_up and ticks, as a table and as the API's JSON; a server
// without schedules says so.
func TestCLISchedules(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: "[[queues]]\nname = \"beats\"\n\n" + scheduleTestConfig("all")})
	testserver.Await(t, "a tick fired", func() bool {
		out, _, err := cli(t, "schedules", "--addr", srv.URL, "--json")
		return err == nil && strings.Contains(out, `"lastTick": "20`)
	})
	out, _, err := cli(t, "schedules", "--addr", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "SCHEDULE") || !regexp.MustCompile(`^beat +@every 1s +UTC +beats +all +20\S+Z +20\S+Z +-$`).MatchString(lines[1]) {
		t.Fatalf("sepp schedules:\n%s", out)
	}
	empty := testserver.Start(t, testserver.Options{})
	if out, _, err := cli(t, "schedules", "--addr", empty.URL); err != nil || out != "no [[schedules]] in the server's config\n" {
		t.Fatalf("sepp schedules without schedules: %v %q", err, out)
	}
}
