// Command idle measures what idle long-polling workers cost a Sepp server:
// it starts a `sepp serve` process on a fresh data directory, measures the
// enqueue latency with no waiter, opens -waiters concurrent Reserve long
// polls (wait_ms -wait) on queues that stay empty, reads the server's CPU
// time from /proc/PID/stat over -window, and measures the enqueue latency
// again while they wait.
//
//	go build -o /tmp/sepp ./cmd/sepp
//	go run ./bench/idle -sepp /tmp/sepp -waiters 2000
//
// Without -sepp it builds ./cmd/sepp itself (run it from the repository
// root). Linux only (/proc).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sepp-dev/sepp"
)

func main() {
	bin := flag.String("sepp", "", "sepp binary to serve with (empty: go build ./cmd/sepp)")
	waiters := flag.Int("waiters", 2000, "concurrent Reserve long polls")
	queues := flag.Int("queues", 16, "empty queues the waiters spread over")
	conns := flag.Int("conns", 8, "client connections the waiters share")
	wait := flag.Duration("wait", 30*time.Second, "wait of each Reserve (wait_ms)")
	window := flag.Duration("window", 10*time.Second, "how long the server's CPU is measured")
	enqueues := flag.Int("enqueues", 1000, "sequential enqueues per latency measurement")
	flag.Parse()
	if err := run(*bin, *waiters, *queues, *conns, *wait, *window, *enqueues); err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		os.Exit(1)
	}
}

func run(bin string, waiters, queues, conns int, wait, window time.Duration, enqueues int) error {
	dir, err := os.MkdirTemp("", "sepp-idle-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "sepp")
		build := exec.Command("go", "build", "-o", bin, "./cmd/sepp")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/sepp: %w", err)
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	srv := exec.Command(bin, "serve")
	srv.Dir = dir
	srv.Env = append(os.Environ(), "SEPP_LISTEN="+addr, "SEPP_STORAGE_PATH="+filepath.Join(dir, "data"))
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
	}()
	pid := srv.Process.Pid
	ctx := context.Background()
	url := "http://" + addr

	prod, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer prod.Close()
	fmt.Printf("server pid %d on %s; %d waiters on %d queues over %d connections, wait %v\n",
		pid, addr, waiters, queues, conns, wait)

	enqueue(ctx, prod, "warmup", 200)
	idleCPU, err := cpuOver(pid, window)
	if err != nil {
		return err
	}
	base := enqueue(ctx, prod, "bench", enqueues)
	fmt.Printf("no waiters:   server CPU %5.1f%% of a core over %v; enqueue p50 %v p90 %v p99 %v\n",
		idleCPU, window, base[0], base[1], base[2])

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var reserves, failures atomic.Int64
	clients := make([]*sepp.Client, conns)
	for i := range clients {
		if clients[i], err = connect(ctx, url); err != nil {
			return err
		}
		defer clients[i].Close()
	}
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := fmt.Sprintf("idle-%d", i%queues)
			for wctx.Err() == nil {
				_, err := clients[i%conns].Reserve(wctx, sepp.ReserveRequest{Queues: []string{q}, Wait: wait})
				reserves.Add(1)
				if err != nil && wctx.Err() == nil {
					failures.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(3 * time.Second) // every waiter is in its long poll
	before := reserves.Load()
	busyCPU, err := cpuOver(pid, window)
	if err != nil {
		return err
	}
	during := reserves.Load() - before
	loaded := enqueue(ctx, prod, "bench2", enqueues)
	fmt.Printf("%d waiters: server CPU %5.1f%% of a core over %v (%d Reserve calls answered in it); enqueue p50 %v p90 %v p99 %v\n",
		waiters, busyCPU, window, during, loaded[0], loaded[1], loaded[2])
	fmt.Printf("enqueue p50 with waiters / without: %.2fx\n", float64(loaded[0])/float64(base[0]))
	stop()
	wg.Wait()
	if n := failures.Load(); n > 0 {
		fmt.Printf("note: %d Reserve calls failed\n", n)
	}
	return nil
}

func connect(ctx context.Context, url string) (*sepp.Client, error) {
	var last error
	for range 100 { // the server may still be starting
		c, err := sepp.Connect(ctx, url)
		if err == nil {
			if _, err = c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "ping", JobType: "t", IdempotencyKey: sepp.Key("ping")}); err == nil {
				return c, nil
			}
			c.Close()
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("server did not answer: %w", last)
}

// enqueue runs n sequential enqueues with new keys and returns the p50, p90
// and p99 latencies.
func enqueue(ctx context.Context, c *sepp.Client, queue string, n int) [3]time.Duration {
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t := time.Now()
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: queue, JobType: "t",
			IdempotencyKey: sepp.Key(fmt.Sprintf("%s-%d-%d", queue, time.Now().UnixNano(), i)), Payload: []byte(`{}`)}); err != nil {
			fmt.Fprintln(os.Stderr, "enqueue:", err)
			continue
		}
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		return [3]time.Duration{}
	}
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Microsecond) }
	return [3]time.Duration{q(0.5), q(0.9), q(0.99)}
}

// cpuOver returns the process's CPU time over d as a percentage of one core.
func cpuOver(pid int, d time.Duration) (float64, error) {
	a, err := cpuTicks(pid)
	if err != nil {
		return 0, err
	}
	t := time.Now()
	time.Sleep(d)
	b, err := cpuTicks(pid)
	if err != nil {
		return 0, err
	}
	const hz = 100 // USER_HZ: clock ticks per second on Linux
	return float64(b-a) / hz / time.Since(t).Seconds() * 100, nil
}

// cpuTicks reads utime + stime from /proc/PID/stat.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after its ')' are fixed.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return u + s, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
