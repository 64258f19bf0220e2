// Command compare runs Sepp's keyed-enqueue workload against other queues, so
// that `sepp bench enqueue` has something to be compared with.
//
// It measures what `sepp bench enqueue` measures, on the same workload: N
// keyed enqueues from C concurrent producers, with a fraction D of them
// repeating an earlier key (the distinct keys once each plus D*N repeats of
// random earlier keys, shuffled), each carrying a P-byte payload. It prints
// enqueues/s, the p50 and p99 latency of one enqueue, and a dedup check: how
// many enqueues the system answered as "created" against the number of
// distinct keys, and how many messages or tasks the system holds afterwards.
//
// Systems (-system):
//
//	asynq        Asynq on the Redis at -addr (default 127.0.0.1:6379), one
//	             task per key with asynq.TaskID(key); ErrTaskIDConflict is a
//	             dedup hit. The Redis's appendonly/appendfsync settings are
//	             read and printed: they are its durability.
//	asynq-fsync  the same, on a redis-server this program starts on -addr
//	             (default 127.0.0.1:6390) with --appendonly yes --appendfsync
//	             always --save '' in a temporary directory, and stops after.
//	nats         NATS JetStream at -addr (default 127.0.0.1:4222): a file
//	             stream with a 24h duplicate window on subject bench.<run>,
//	             one js.Publish with nats.MsgId(key) per enqueue; the PubAck's
//	             Duplicate field is a dedup hit. Durability is the server's
//	             sync_interval, which a client cannot read (default: fsync on a
//	             background timer, not per write).
//	nats-own     the same, on a nats-server (-nats-server) this program starts
//	             on -addr (default 127.0.0.1:4290) with -js and a temporary
//	             store directory, at the server's default sync_interval.
//	nats-fsync   as nats-own, with `jetstream { sync_interval: always }`: an
//	             fsync per write. Needs nats-server 2.10 or later.
//
// Run it from this directory (it is in the module bench/, so its dependencies
// stay out of Sepp's go.mod):
//
//	go run . -system asynq -n 100000 -c 32 -payload 256
//	go run . -system asynq-fsync -dup 0.2
//	go run . -system nats-fsync -nats-server /path/to/nats-server
//
// Every address must be on loopback. The run is bounded: N enqueues, each
// with a timeout, and the whole run under -timeout; the servers it started
// are stopped, and what it wrote (the Asynq queue, the JetStream stream) is
// deleted unless -keep is given.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	system, addr          string
	n, c, payload         int
	dup                   float64
	timeout, opTimeout    time.Duration
	redisServer, natsBin  string
	keep                  bool
	distinct              int
	run                   string
	keys                  []int
	payloadBytes          []byte
	durability, serverVer string
}

// outcome is one enqueue's answer: created (not a dedup hit), and the id the
// system gave it, where it gives one (Asynq: the task id; NATS: the stream
// sequence).
type outcome struct {
	created bool
	id      string
}

// target is a system under test.
type target interface {
	enqueue(ctx context.Context, key string) (outcome, error)
	// stored counts what the system holds after the run (tasks, messages).
	stored(ctx context.Context) (int, error)
	close()
}

var defaultAddr = map[string]string{
	"asynq":       "127.0.0.1:6379",
	"asynq-fsync": "127.0.0.1:6390",
	"nats":        "127.0.0.1:4222",
	"nats-own":    "127.0.0.1:4290",
	"nats-fsync":  "127.0.0.1:4290",
}

func run() error {
	var cfg config
	flag.StringVar(&cfg.system, "system", "", "system to load: asynq | asynq-fsync | nats | nats-own | nats-fsync")
	flag.StringVar(&cfg.addr, "addr", "", "server address, loopback only (default: per system, see the package comment)")
	flag.IntVar(&cfg.n, "n", 100000, "enqueues to send")
	flag.IntVar(&cfg.c, "c", 32, "concurrent producers")
	flag.Float64Var(&cfg.dup, "dup", 0, "fraction of enqueues that repeat an earlier key (0..0.99)")
	flag.IntVar(&cfg.payload, "payload", 256, "payload size in bytes")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "bound on the whole run")
	flag.DurationVar(&cfg.opTimeout, "op-timeout", 30*time.Second, "bound on one enqueue")
	flag.StringVar(&cfg.redisServer, "redis-server", "redis-server", "redis-server binary (asynq-fsync)")
	flag.StringVar(&cfg.natsBin, "nats-server", "nats-server", "nats-server binary (nats-own, nats-fsync)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the Asynq queue or JetStream stream after the run")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if _, ok := defaultAddr[cfg.system]; !ok {
		return fmt.Errorf("-system %q: want asynq, asynq-fsync, nats, nats-own or nats-fsync", cfg.system)
	}
	if cfg.n < 1 || cfg.c < 1 || cfg.dup < 0 || cfg.dup >= 1 || cfg.payload < 0 {
		return errors.New("want -n >= 1, -c >= 1, 0 <= -dup < 1, -payload >= 0")
	}
	if cfg.addr == "" {
		cfg.addr = defaultAddr[cfg.system]
	}
	if err := checkLoopback(cfg.addr); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()

	cfg.keys = benchKeys(cfg.n, cfg.dup)
	cfg.distinct = cfg.n - int(float64(cfg.n)*cfg.dup)
	cfg.run = randomHex(6)
	cfg.payloadBytes = make([]byte, cfg.payload)
	for i := range cfg.payloadBytes {
		cfg.payloadBytes[i] = 'a' + byte(i%26)
	}

	var t target
	var stop func()
	var err error
	switch cfg.system {
	case "asynq":
		t, err = newAsynq(ctx, &cfg)
	case "asynq-fsync":
		stop, err = startRedis(ctx, &cfg)
		if err == nil {
			t, err = newAsynq(ctx, &cfg)
		}
	case "nats":
		t, err = newNATS(&cfg)
	case "nats-own", "nats-fsync":
		stop, err = startNATS(ctx, &cfg, cfg.system == "nats-fsync")
		if err == nil {
			t, err = newNATS(&cfg)
		}
	}
	if stop != nil {
		defer stop()
	}
	if err != nil {
		return err
	}
	defer t.close()
	return measure(ctx, &cfg, t)
}

// measure runs the workload against t and prints the result.
func measure(ctx context.Context, cfg *config, t target) error {
	fmt.Printf("system:    %s at %s (%s)\n", cfg.system, cfg.addr, cfg.serverVer)
	fmt.Printf("durability: %s\n", cfg.durability)
	fmt.Printf("load:      %s before the run (/proc/loadavg)\n", loadavg())

	results := make([]outcome, cfg.n)
	lat := make([]time.Duration, cfg.n)
	var next, failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.n || ctx.Err() != nil {
					return
				}
				opCtx, cancel := context.WithTimeout(ctx, cfg.opTimeout)
				s := time.Now()
				out, err := t.enqueue(opCtx, fmt.Sprintf("bench-%s-%d", cfg.run, cfg.keys[i]))
				lat[i] = time.Since(s)
				cancel()
				if err != nil {
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				results[i] = out
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("run stopped after %v: %w", elapsed.Round(time.Millisecond), err)
	}
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d enqueues failed; first: %w", f, cfg.n, firstErr)
	}

	// Exactly one enqueue per key must have created something, and the
	// system must hold one task or message per key.
	created := 0
	createdPerKey := map[int]int{}
	ids := map[string]bool{}
	for i, r := range results {
		if r.created {
			created++
			createdPerKey[cfg.keys[i]]++
			ids[r.id] = true
		}
	}
	keysCreatedTwice := 0
	for _, c := range createdPerKey {
		if c > 1 {
			keysCreatedTwice++
		}
	}
	stored, err := t.stored(ctx)
	if err != nil {
		return fmt.Errorf("counting what the system holds: %w", err)
	}

	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	fmt.Printf("enqueues:  %d from %d producers, %.0f%% duplicates, %d-byte payloads\n",
		cfg.n, cfg.c, cfg.dup*100, cfg.payload)
	fmt.Printf("elapsed:   %v\n", elapsed.Round(time.Millisecond))
	fmt.Printf("rate:      %.0f enqueues/s\n", float64(cfg.n)/elapsed.Seconds())
	fmt.Printf("latency:   p50 %v  p99 %v  max %v\n", pct(0.50).Round(time.Microsecond),
		pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	fmt.Printf("check:     %d distinct keys, %d answered created (%d distinct ids), %d dedup hits, %d keys created twice, %d held by the system\n",
		cfg.distinct, created, len(ids), cfg.n-created, keysCreatedTwice, stored)
	if created != cfg.distinct || len(ids) != cfg.distinct || keysCreatedTwice > 0 || stored != cfg.distinct {
		return fmt.Errorf("FAILED: %d distinct keys, but %d created answers, %d distinct ids, %d held", cfg.distinct, created, len(ids), stored)
	}
	fmt.Println("check:     OK (one created answer and one stored task/message per key)")
	return nil
}

// --- Asynq ---

type asynqTarget struct {
	client    *asynq.Client
	inspector *asynq.Inspector
	queue     string
	task      *asynq.Task
	keep      bool
}

func newAsynq(ctx context.Context, cfg *config) (*asynqTarget, error) {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.addr})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("redis at %s: %w", cfg.addr, err)
	}
	cfg.serverVer = "redis " + infoField(info, "redis_version")
	d, err := rdb.ConfigGet(ctx, "append*").Result()
	if err != nil {
		return nil, fmt.Errorf("redis CONFIG GET: %w", err)
	}
	if d["appendonly"] == "yes" {
		cfg.durability = "appendonly yes, appendfsync " + d["appendfsync"]
		if d["appendfsync"] == "always" {
			cfg.durability += " (fsync every write)"
		}
	} else {
		cfg.durability = "appendonly no (no fsync at all)"
	}
	// One pooled Redis connection per producer, so that producers never wait
	// for a connection (go-redis's default pool is 10 per CPU).
	opt := asynq.RedisClientOpt{Addr: cfg.addr, PoolSize: cfg.c}
	queue := "bench-" + cfg.run
	return &asynqTarget{
		client:    asynq.NewClient(opt),
		inspector: asynq.NewInspector(opt),
		queue:     queue,
		task:      asynq.NewTask("bench", cfg.payloadBytes, asynq.Queue(queue)),
		keep:      cfg.keep,
	}, nil
}

func (a *asynqTarget) enqueue(ctx context.Context, key string) (outcome, error) {
	info, err := a.client.EnqueueContext(ctx, a.task, asynq.TaskID(key))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return outcome{created: false}, nil
	}
	if err != nil {
		return outcome{}, err
	}
	return outcome{created: true, id: info.ID}, nil
}

func (a *asynqTarget) stored(context.Context) (int, error) {
	q, err := a.inspector.GetQueueInfo(a.queue)
	if err != nil {
		return 0, err
	}
	return q.Size, nil
}

func (a *asynqTarget) close() {
	if !a.keep {
		if err := a.inspector.DeleteQueue(a.queue, true); err != nil {
			fmt.Fprintln(os.Stderr, "compare: deleting queue:", err)
		}
	}
	a.client.Close()
	a.inspector.Close()
}

// startRedis starts a redis-server on cfg.addr that fsyncs its append-only
// file on every write, in a temporary directory; the returned function stops
// it and removes the directory.
func startRedis(ctx context.Context, cfg *config) (func(), error) {
	host, port, _ := net.SplitHostPort(cfg.addr)
	dir, err := os.MkdirTemp("", "compare-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.redisServer, "--bind", host, "--port", port,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	return startServer(ctx, cmd, cfg.addr, dir)
}

// --- NATS JetStream ---

type natsTarget struct {
	nc      *nats.Conn
	js      nats.JetStreamContext
	stream  string
	subject string
	payload []byte
	keep    bool
}

func newNATS(cfg *config) (*natsTarget, error) {
	nc, err := nats.Connect("nats://"+cfg.addr, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("nats at %s: %w", cfg.addr, err)
	}
	js, err := nc.JetStream(nats.MaxWait(cfg.opTimeout))
	if err != nil {
		nc.Close()
		return nil, err
	}
	cfg.serverVer = "nats-server " + nc.ConnectedServerVersion()
	switch cfg.system {
	case "nats-fsync":
		cfg.durability = "file storage, sync_interval: always (fsync every write)"
	default:
		cfg.durability = "file storage, server's sync_interval (default: fsync on a background timer, not per write)"
	}
	t := &natsTarget{nc: nc, js: js, stream: "BENCH_" + cfg.run, subject: "bench." + cfg.run,
		payload: cfg.payloadBytes, keep: cfg.keep}
	_, err = js.AddStream(&nats.StreamConfig{
		Name:       t.stream,
		Subjects:   []string{t.subject},
		Storage:    nats.FileStorage,
		Duplicates: 24 * time.Hour,
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("creating stream: %w", err)
	}
	return t, nil
}

func (t *natsTarget) enqueue(ctx context.Context, key string) (outcome, error) {
	ack, err := t.js.Publish(t.subject, t.payload, nats.MsgId(key), nats.Context(ctx))
	if err != nil {
		return outcome{}, err
	}
	return outcome{created: !ack.Duplicate, id: fmt.Sprint(ack.Sequence)}, nil
}

func (t *natsTarget) stored(context.Context) (int, error) {
	si, err := t.js.StreamInfo(t.stream)
	if err != nil {
		return 0, err
	}
	return int(si.State.Msgs), nil
}

func (t *natsTarget) close() {
	if !t.keep {
		if err := t.js.DeleteStream(t.stream); err != nil {
			fmt.Fprintln(os.Stderr, "compare: deleting stream:", err)
		}
	}
	t.nc.Close()
}

// startNATS starts a nats-server with JetStream on cfg.addr and a temporary
// store directory, with sync_interval: always if fsync is set; the returned
// function stops it and removes the directory.
func startNATS(ctx context.Context, cfg *config, fsync bool) (func(), error) {
	host, port, _ := net.SplitHostPort(cfg.addr)
	dir, err := os.MkdirTemp("", "compare-nats-")
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("listen: %q\njetstream {\n  store_dir: %q\n", net.JoinHostPort(host, port), filepath.Join(dir, "js"))
	if fsync {
		conf += "  sync_interval: always\n"
	}
	conf += "}\n"
	confFile := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(cfg.natsBin, "-c", confFile, "-l", filepath.Join(dir, "nats.log"))
	return startServer(ctx, cmd, cfg.addr, dir)
}

// startServer starts cmd, waits up to 10s until addr accepts connections,
// and returns a function that stops the process and removes dir.
func startServer(ctx context.Context, cmd *exec.Cmd, addr, dir string) (func(), error) {
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s is already in use: stop what listens there or pick another -addr", addr)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			fmt.Printf("started:   %q (pid %d)\n", cmd.Args, cmd.Process.Pid)
			return stop, nil
		}
		select {
		case <-exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%s exited at start: %s", cmd.Path, strings.TrimSpace(out.String()))
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("%s did not listen on %s within 10s", cmd.Path, addr)
		}
	}
}

// --- helpers ---

// benchKeys returns n key numbers: each of the first n-dups numbers once,
// and dups repeats of random earlier ones, shuffled. It is the key sequence
// of `sepp bench enqueue`.
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

// checkLoopback refuses any address that is not on loopback.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-addr %q: only loopback addresses are allowed", addr)
	}
	return nil
}

func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "?"
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
