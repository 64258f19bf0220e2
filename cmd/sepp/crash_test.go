package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// buildSepp builds the real binary once per test run; TestMain removes it.
// With SEPP_BIN set it uses that binary instead, so that CI builds it once
// for every package and job that runs it.
func buildSepp(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("SEPP_BIN"); p != "" {
			binPath, binErr = filepath.Abs(p)
			if binErr == nil {
				_, binErr = os.Stat(binPath)
			}
			if binErr != nil {
				binErr = fmt.Errorf("SEPP_BIN: %w", binErr)
			}
			return
		}
		binDir, binErr = os.MkdirTemp("", "sepp-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "sepp")
		var out []byte
		out, binErr = exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if binErr != nil {
			binErr = fmt.Errorf("go build: %v\n%s", binErr, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serverProcess is a `sepp serve` child process.
type serverProcess struct {
	t    *testing.T
	bin  string
	addr string
	data string
	args []string // extra arguments to serve
	env  []string // extra environment
	log  *os.File
	cmd  *exec.Cmd
}

func (p *serverProcess) start() {
	p.t.Helper()
	cmd := exec.Command(p.bin, append([]string{"serve", "--log-level", "warn"}, p.args...)...)
	cmd.Env = append(append(os.Environ(), "SEPP_LISTEN="+p.addr, "SEPP_STORAGE_PATH="+p.data), p.env...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("server did not start: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startNode starts a `sepp serve` of bin on the data directory data, with
// args and env besides, logging to a file of its own, and stops it with
// SIGTERM when the test ends, if it still runs then.
func startNode(t *testing.T, bin, data string, args []string, env ...string) *serverProcess {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	p := &serverProcess{t: t, bin: bin, addr: freePort(t), data: data, log: logf, args: args, env: env}
	p.start()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.signal(syscall.SIGTERM)
		}
		logf.Close()
	})
	return p
}

func (p *serverProcess) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	p.cmd.Wait()
}

// progress counts acknowledgements and says when a number more have come.
type progress struct {
	mu      sync.Mutex
	n       int
	target  int
	reached chan struct{} // nil while nothing waits
}

func (p *progress) add() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.reached != nil && p.n >= p.target {
		close(p.reached)
		p.reached = nil
	}
}

// after returns a channel closed once k more have come (one waiter at a
// time).
func (p *progress) after(k int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target, p.reached = p.n+k, make(chan struct{})
	return p.reached
}

// await waits until ch is closed, failing the test after two minutes: the
// events it waits for take seconds, and a load that stopped for good would
// otherwise hang the run.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no %s after 2 minutes", what)
	}
}

// TestCrashSafety kills the real server with SIGKILL while 32 producers
// enqueue, each retrying every enqueue until it is acknowledged. Afterwards
// every acknowledged job must exist, every key must have exactly one job, and
// every job must belong to a key.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary; skipped with -short")
	}
	const producers, kills = 32, 5
	p := &serverProcess{t: t, bin: buildSepp(t), addr: freePort(t), data: t.TempDir()}
	logf, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.log = logf
	p.start()

	ctx := context.Background()
	client, err := sepp.NewClient(ctx, "http://"+p.addr, sepp.Config{EnqueueRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	var (
		mu    sync.Mutex
		acked = map[string]string{} // key -> job id from its ack
		stop  atomic.Bool
		wg    sync.WaitGroup
		tries atomic.Int64
		acks  progress
	)
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("producer-%d-job-%d", g, i)
				for {
					tries.Add(1)
					ack, err := client.Enqueue(ctx, sepp.EnqueueRequest{Queue: "crash", JobType: "t", IdempotencyKey: sepp.Key(key), Payload: []byte(key)})
					if err == nil {
						mu.Lock()
						acked[key] = ack.JobID
						mu.Unlock()
						acks.add()
						break
					}
					time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond) // the producer's backoff before it resends
				}
			}
		}()
	}
	// Each kill comes after a random number of acknowledgements since the
	// server started: the load is under way, whatever the machine's speed.
	for range kills {
		await(t, acks.after(50+rand.IntN(200)), "acknowledgements before a kill")
		p.signal(syscall.SIGKILL)
		p.start()
	}
	await(t, acks.after(100), "acknowledgements after the last restart")
	stop.Store(true)
	wg.Wait()
	t.Logf("%d keys acknowledged in %d attempts across %d SIGKILLs", len(acked), tries.Load(), kills)
	if len(acked) < 100 {
		t.Fatalf("only %d keys acknowledged: the load did not run", len(acked))
	}

	// Every acked job exists, and its key answers with that job.
	keys := make(chan string)
	failures := make(chan string, 1)
	fail := func(msg string) {
		select {
		case failures <- msg:
		default: // one failure is enough to report
		}
	}
	var check sync.WaitGroup
	for range 16 {
		check.Add(1)
		go func() {
			defer check.Done()
			for key := range keys {
				id := acked[key]
				if _, err := client.GetJob(ctx, id); err != nil {
					fail(fmt.Sprintf("acked job %s (key %s) lost: %v", id, key, err))
					return
				}
				ack, err := client.Enqueue(ctx, sepp.EnqueueRequest{Queue: "crash", JobType: "t", IdempotencyKey: sepp.Key(key), Payload: []byte(key)})
				if err != nil || !ack.Deduplicated || ack.JobID != id {
					fail(fmt.Sprintf("key %s: re-enqueue gave %+v %v; want a hit on %s", key, ack, err, id))
					return
				}
			}
		}()
	}
feed:
	for key := range acked {
		select {
		case keys <- key:
		case msg := <-failures:
			t.Error(msg)
			break feed
		}
	}
	close(keys)
	check.Wait()
	close(failures)
	for msg := range failures {
		t.Error(msg)
	}
	if t.Failed() {
		return
	}

	// Stop the server and read its store directly: one job per key, no job
	// without a key.
	p.signal(syscall.SIGTERM)
	st, err := pebble.Open(ctx, pebble.Options{Path: p.data})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// What the restarts found: a SIGKILL during a write can leave a torn
	// record, which the server reports with a WARN line; the checks above
	// and below hold either way.
	if b, err := os.ReadFile(logf.Name()); err == nil {
		t.Logf("restarts that reported damage: %d; last recovery: %+v", strings.Count(string(b), "store recovered with damage"), st.Recovery())
	}
	perKey := map[string]int{}
	jobs := 0
	for after := (store.JobID{}); ; {
		page, err := st.ListJobs(ctx, &store.ListJobsParams{After: after, Limit: 1000, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, j := range page {
			if j.IdempotencyKey == nil {
				t.Fatalf("job %x has no key", j.ID)
			}
			key := *j.IdempotencyKey
			if perKey[key]++; perKey[key] > 1 {
				t.Fatalf("key %s has %d jobs", key, perKey[key])
			}
			if _, ok := acked[key]; !ok {
				t.Fatalf("job with key %s was never acknowledged to any producer", key)
			}
			jobs++
		}
		after = page[len(page)-1].ID
	}
	if jobs != len(acked) {
		t.Fatalf("%d jobs stored for %d acknowledged keys", jobs, len(acked))
	}
}
