package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/server"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

const benchEnqueueLong = `Sends -n keyed enqueues from -c concurrent producers, -dup of them repeating
an earlier key, and checks that exactly one job was created per distinct
key. Without --addr it starts a server in this process on a fresh data
directory. docs/benchmarks.md records the results.`

// runBenchEnqueue sends N keyed enqueues from C concurrent producers and
// checks that exactly one job was created per distinct key.
func runBenchEnqueue(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp bench enqueue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf benchFlags
	bf.register(fs)
	n := fs.Int("n", 100000, "enqueues to send")
	c := fs.Int("c", 32, "concurrent producers")
	dup := fs.Float64("dup", 0, "fraction of enqueues that repeat an earlier key (0..0.99)")
	payloadSize := fs.Int("payload", 256, "payload size in bytes")
	queue := fs.String("queue", "bench", "queue to enqueue to")
	noBatch := fs.Bool("no-batching", false, "send one RPC per enqueue instead of letting the client coalesce concurrent calls")
	inFlight := fs.Int("in-flight", 0, "coalesced batch RPCs the client keeps in flight (0: the client's default)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *n < 1 || *c < 1 || *dup < 0 || *dup >= 1 || *payloadSize < 0 || *inFlight < 0 {
		return usagef("want -n >= 1, -c >= 1, 0 <= -dup < 1, -payload >= 0, -in-flight >= 0")
	}

	target, stop, err := bf.start(stdout)
	if err != nil {
		return err
	}
	defer stop()
	ctx := context.Background()
	cfg := sepp.Config{DisableBatching: *noBatch, MaxInFlight: *inFlight, FailFast: true}
	if err := bf.conn.apply(&cfg, target); err != nil {
		return err
	}
	client, err := sepp.NewClient(ctx, target, cfg)
	if err != nil {
		return err
	}
	defer client.Close()

	keys := benchKeys(*n, *dup)
	distinct := *n - int(float64(*n)**dup)
	run := randomHex(6)
	payload := make([]byte, *payloadSize)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}

	type outcome struct {
		id      string
		created bool
	}
	results := make([]outcome, *n)
	lat := make([]time.Duration, *n)
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	var done atomic.Int64
	start := time.Now()
	stopProgress := liveProgress(stderr, bf.progress, func() string {
		d := done.Load()
		return fmt.Sprintf("bench enqueue: %d/%d enqueues, %.0f/s", d, *n, float64(d)/time.Since(start).Seconds())
	})
	for range *c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= *n {
					return
				}
				t := time.Now()
				ack, err := client.Enqueue(ctx, sepp.EnqueueRequest{
					Queue: *queue, JobType: "bench", Payload: payload,
					IdempotencyKey: sepp.Key(fmt.Sprintf("bench-%s-%d", run, keys[i])),
				})
				lat[i] = time.Since(t)
				done.Add(1)
				if err != nil {
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				results[i] = outcome{ack.JobID, !ack.Deduplicated}
			}
		}()
	}
	wg.Wait()
	stopProgress()
	elapsed := time.Since(start)
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d enqueues failed; first: %w", f, *n, firstErr)
	}

	// Every key must map to one job id, and exactly one enqueue per key must
	// have created it.
	idOf := make(map[int]string, distinct)
	created := 0
	for i, r := range results {
		if r.created {
			created++
		}
		if prev, ok := idOf[keys[i]]; ok && prev != r.id {
			return fmt.Errorf("DUPLICATE: key %d answered with two job ids, %s and %s", keys[i], prev, r.id)
		}
		idOf[keys[i]] = r.id
	}
	ids := map[string]bool{}
	for _, id := range idOf {
		ids[id] = true
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	fmt.Fprintf(stdout, "enqueues:  %d from %d producers, %.0f%% duplicates, %d-byte payloads, batching %v\n",
		*n, *c, *dup*100, *payloadSize, !*noBatch)
	fmt.Fprintf(stdout, "elapsed:   %v\n", elapsed.Round(time.Millisecond))
	fmt.Fprintf(stdout, "rate:      %.0f enqueues/s\n", float64(*n)/elapsed.Seconds())
	fmt.Fprintf(stdout, "latency:   p50 %v  p99 %v  max %v\n", pct(0.50).Round(time.Microsecond),
		pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	if bf.addr == "" {
		fmt.Fprintf(stdout, "store:     %v\n", &benchCommits)
	}
	fmt.Fprintf(stdout, "check:     %d distinct keys, %d jobs created, %d distinct job ids\n", distinct, created, len(ids))
	if created != distinct || len(ids) != distinct {
		return fmt.Errorf("FAILED: %d distinct keys but %d jobs created (%d distinct ids)", distinct, created, len(ids))
	}
	fmt.Fprintln(stdout, "check:     OK (one job per key)")
	return nil
}

// benchKeys returns n key numbers: each of the first n-dups numbers once,
// and dups repeats of random earlier ones, shuffled.
func benchKeys(n int, dup float64) []int {
	dups := int(float64(n) * dup)
	distinct := n - dups
	keys := make([]int, 0, n)
	for i := range distinct {
		keys = append(keys, i)
	}
	for range dups {
		keys = append(keys, mrand.IntN(distinct))
	}
	mrand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// benchFlags are the flags every bench command takes: where the server is,
// and profiling.
type benchFlags struct {
	addr, data, cpuProfile string
	conn                   connFlags
	progress               bool
}

// liveProgress prints line() on stderr once a second, when stderr is a
// terminal (or force), until the returned stop is called.
func liveProgress(stderr io.Writer, force bool, line func() string) (stop func()) {
	if !force && !isTerminal(stderr) {
		return func() {}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				fmt.Fprintln(stderr, line())
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

func (f *benchFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", os.Getenv("SEPP_ADDR"), "server to load (env SEPP_ADDR); empty: start a server in this process on a fresh data directory")
	fs.StringVar(&f.data, "data", "", "data directory of the server this command starts (default: a temporary directory, removed after)")
	fs.BoolVar(&f.progress, "progress", false, "print progress on stderr once a second even when it is not a terminal")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (client, and the server when in-process) to `file`")
	f.conn.register(fs) // --token, --ca-file, --cert-file, --key-file (clienttls.go)
}

// start starts the profile and, without -addr, an in-process server. It
// returns the address to load and a function that undoes both.
func (f *benchFlags) start(stdout io.Writer) (target string, stop func(), err error) {
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if f.cpuProfile != "" {
		stopProfile, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return "", nil, err
		}
		undo = append(undo, stopProfile)
	}
	if f.addr != "" {
		return f.addr, stop, nil
	}
	stopServer, started, dir, err := startBenchServer(f.data)
	if err != nil {
		stop()
		return "", nil, err
	}
	undo = append(undo, stopServer)
	fmt.Fprintf(stdout, "server:    in-process, embedded store in %s, listening on %s\n", dir, started)
	return started, stop, nil
}

// startBenchServer runs a real server in this process on a random loopback
// port, with logs off (one log line per dedup hit would measure the
// terminal). It returns a function that stops it.
func startBenchServer(dir string) (stop func(), addr, where string, err error) {
	cleanup := func() {}
	if dir == "" {
		dir, err = os.MkdirTemp("", "sepp-bench-")
		if err != nil {
			return nil, "", "", err
		}
		cleanup = func() { os.RemoveAll(dir) }
	}
	cfg := config.Default()
	cfg.Storage.Path = dir
	metrics := server.NewMetrics()
	onCommit := func(ops, jobs int, d time.Duration) {
		metrics.ObserveCommit(ops, jobs, d)
		benchCommits.observe(ops, jobs, d)
	}
	st, err := pebble.Open(context.Background(), pebble.Options{Path: dir, OnCommit: onCommit})
	if err != nil {
		cleanup()
		return nil, "", "", err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The embedded store takes the host's clock, as in sepp serve.
	srv, err := server.New(server.Options{Config: &cfg, Store: st, Logger: logger, Metrics: metrics, Now: wallClock})
	if err != nil {
		st.Close()
		cleanup()
		return nil, "", "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		cleanup()
		return nil, "", "", err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
		st.Close()
		cleanup()
	}
	return stop, "http://" + ln.Addr().String(), dir, nil
}

// commitStats sums the in-process server's group commits.
type commitStats struct {
	commits, ops, jobs, nanos atomic.Int64
}

var benchCommits commitStats

func (c *commitStats) observe(ops, jobs int, d time.Duration) {
	c.commits.Add(1)
	c.ops.Add(int64(ops))
	c.jobs.Add(int64(jobs))
	c.nanos.Add(int64(d))
}

func (c *commitStats) String() string {
	n := max(c.commits.Load(), 1)
	return fmt.Sprintf("%d group commits, %.1f calls and %.1f jobs each, %v per commit on average",
		c.commits.Load(), float64(c.ops.Load())/float64(n), float64(c.jobs.Load())/float64(n),
		time.Duration(c.nanos.Load()/n).Round(time.Microsecond))
}

// startCPUProfile profiles this process into file until the returned
// function is called.
func startCPUProfile(file string) (func(), error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
