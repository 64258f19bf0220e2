package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/worker"
)

// instance is one system, started empty for one workload.
type instance interface {
	// enqueue sends one keyed enqueue; created is false on a dedup hit.
	enqueue(ctx context.Context, key string) (created bool, err error)
	// enqueueBatch sends keys as one batch and returns how many were
	// created; errNoBatch if the system has no batch API.
	enqueueBatch(ctx context.Context, keys []string) (created int, err error)
	// stored counts the jobs (tasks, messages) the system holds.
	stored(ctx context.Context) (int, error)
	// process runs workers with a no-op handler until n jobs were handled.
	process(ctx context.Context, n, workers int) (time.Duration, error)
	close()
}

var errNoBatch = errors.New("no batch API")

// system starts instances.
type system struct {
	name       string // row label
	durability string
	fsync      bool // every acknowledged write is fsynced (the equal-durability class)
	sepp       bool
	version    string
	start      func(ctx context.Context, s *system) (instance, error)
}

// ---------- Sepp ----------

type seppInstance struct {
	client  *sepp.Client
	queue   string
	payload []byte // each enqueued job's payload
	// payloadFor, if set, makes each enqueued job's payload from its key
	// instead.
	payloadFor func(key string) []byte
	stop       func()
	pid        int
	dir        string // embedded data dir ("" on postgres)
	dbName     string // postgres database ("" on the embedded stores)
}

// startSepp starts `sepp serve` built from the repository on a fresh store.
// config is an optional TOML file body.
func startSepp(ctx context.Context, backend, config string) (*seppInstance, error) {
	dir, err := os.MkdirTemp(tmpRoot, "sepp-")
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "SEPP_LISTEN="+addr)
	inst := &seppInstance{queue: "bench", payload: payload}
	switch backend {
	case "embedded":
		inst.dir = filepath.Join(dir, "data")
		env = append(env, "SEPP_STORAGE_BACKEND=embedded", "SEPP_STORAGE_PATH="+inst.dir)
	case "postgres":
		inst.dbName, err = freshDB(ctx, "sepp")
		if err != nil {
			return nil, err
		}
		env = append(env, "SEPP_STORAGE_BACKEND=postgres", "SEPP_STORAGE_URL="+pgURL(inst.dbName))
	}
	args := []string{"serve"}
	if config != "" {
		f := filepath.Join(dir, "sepp.toml")
		if err := os.WriteFile(f, []byte(config), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--config", f)
	}
	cmd := exec.Command(seppBin, args...)
	cmd.Env = env
	stop, err := startServer(ctx, cmd, addr, dir)
	if err != nil {
		return nil, err
	}
	inst.pid = cmd.Process.Pid
	c, err := sepp.NewClient(ctx, "http://"+addr, sepp.Config{})
	if err != nil {
		stop()
		return nil, err
	}
	inst.client = c
	inst.stop = func() {
		stop()
		if inst.dbName != "" {
			dropDB(inst.dbName)
		}
	}
	return inst, nil
}

func (s *seppInstance) enqueue(ctx context.Context, key string) (bool, error) {
	p := s.payload
	if s.payloadFor != nil {
		p = s.payloadFor(key)
	}
	ack, err := s.client.Enqueue(ctx, sepp.EnqueueRequest{Queue: s.queue, JobType: "bench", Payload: p, IdempotencyKey: sepp.Key(key)})
	if err != nil {
		return false, err
	}
	return !ack.Deduplicated, nil
}

func (s *seppInstance) enqueueBatch(ctx context.Context, keys []string) (int, error) {
	reqs := make([]sepp.EnqueueRequest, len(keys))
	for i, k := range keys {
		reqs[i] = sepp.EnqueueRequest{Queue: s.queue, JobType: "bench", Payload: s.payload, IdempotencyKey: sepp.Key(k)}
	}
	res, err := s.client.EnqueueBatch(ctx, reqs, sepp.BatchOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range res {
		if r.Err != nil {
			return n, r.Err
		}
		if !r.Ack.Deduplicated {
			n++
		}
	}
	return n, nil
}

func (s *seppInstance) queueInfo(ctx context.Context, queue string) (sepp.QueueInfo, error) {
	qs, err := s.client.ListQueues(ctx)
	if err != nil {
		return sepp.QueueInfo{}, err
	}
	for _, q := range qs {
		if q.Name == queue {
			return q, nil
		}
	}
	return sepp.QueueInfo{Name: queue}, nil
}

func (s *seppInstance) stored(ctx context.Context) (int, error) {
	q, err := s.queueInfo(ctx, s.queue)
	return int(q.Scheduled + q.Available + q.Reserved + q.Completed + q.Dead + q.Cancelled), err
}

func (s *seppInstance) process(ctx context.Context, n, workers int) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Int64
	w := worker.New(s.client, worker.Config{Queues: []string{s.queue}, Concurrency: workers, Wait: time.Second, Logger: quietLogger})
	w.HandleAll(func(context.Context, *worker.Job) ([]byte, error) {
		if done.Add(1) == int64(n) {
			cancel()
		}
		return nil, nil
	})
	start := time.Now()
	err := w.Run(ctx)
	el := time.Since(start)
	if done.Load() < int64(n) {
		return el, fmt.Errorf("handled %d of %d: %v", done.Load(), n, err)
	}
	return el, nil
}

func (s *seppInstance) close() {
	s.client.Close()
	s.stop()
}

// ---------- River ----------

type riverArgs struct {
	Key     string `json:"key" river:"unique"`
	Payload string `json:"payload"`
}

func (riverArgs) Kind() string { return "bench" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	hit func()
}

func (w *riverWorker) Work(context.Context, *river.Job[riverArgs]) error { w.hit(); return nil }

type riverInstance struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	db     string
	hit    atomic.Pointer[func()]
}

var riverUnique = river.UniqueOpts{ByArgs: true, ByPeriod: 24 * time.Hour}

func startRiver(ctx context.Context, s *system) (instance, error) {
	db, err := freshDB(ctx, "river")
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(pgURL(db))
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 32
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	r := &riverInstance{pool: pool, db: db}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{hit: func() {
		if f := r.hit.Load(); f != nil {
			(*f)()
		}
	}})
	// River's default FetchCooldown (100 ms) caps a 32-worker queue at
	// about 320 jobs/s (one fetch of at most 32 jobs per cooldown); 5 ms
	// lets it fetch as fast as its workers drain.
	r.client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 32}},
		Workers:           workers,
		Logger:            quietLogger,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return r, nil
}

func (r *riverInstance) enqueue(ctx context.Context, key string) (bool, error) {
	res, err := r.client.Insert(ctx, riverArgs{Key: key, Payload: payloadStr}, &river.InsertOpts{UniqueOpts: riverUnique})
	if err != nil {
		return false, err
	}
	return !res.UniqueSkippedAsDuplicate, nil
}

func (r *riverInstance) enqueueBatch(ctx context.Context, keys []string) (int, error) {
	params := make([]river.InsertManyParams, len(keys))
	for i, k := range keys {
		params[i] = river.InsertManyParams{Args: riverArgs{Key: k, Payload: payloadStr}, InsertOpts: &river.InsertOpts{UniqueOpts: riverUnique}}
	}
	res, err := r.client.InsertMany(ctx, params)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, x := range res {
		if !x.UniqueSkippedAsDuplicate {
			n++
		}
	}
	return n, nil
}

func (r *riverInstance) stored(ctx context.Context) (int, error) {
	var n int
	err := r.pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&n)
	return n, err
}

func (r *riverInstance) process(ctx context.Context, n, workers int) (time.Duration, error) {
	var done atomic.Int64
	finished := make(chan struct{})
	f := func() {
		if done.Add(1) == int64(n) {
			close(finished)
		}
	}
	r.hit.Store(&f)
	start := time.Now()
	if err := r.client.Start(ctx); err != nil {
		return 0, err
	}
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		err = fmt.Errorf("handled %d of %d: %w", done.Load(), n, ctx.Err())
	}
	el := time.Since(start)
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.client.Stop(sctx)
	return el, err
}

func (r *riverInstance) close() {
	r.pool.Close()
	dropDB(r.db)
}

// ---------- Asynq ----------

type asynqInstance struct {
	opt       asynq.RedisClientOpt
	client    *asynq.Client
	inspector *asynq.Inspector
	queue     string
	task      *asynq.Task
	stop      func()
}

// startAsynq connects to the machine's Redis at addr, or with own set starts
// a redis-server with appendfsync always on addr.
func startAsynq(addr string, own bool) func(ctx context.Context, s *system) (instance, error) {
	return func(ctx context.Context, s *system) (instance, error) {
		var stop func()
		if own {
			host, port, _ := net.SplitHostPort(addr)
			dir, err := os.MkdirTemp(tmpRoot, "redis-")
			if err != nil {
				return nil, err
			}
			cmd := exec.Command("redis-server", "--bind", host, "--port", port,
				"--appendonly", "yes", "--appendfsync", "always", "--save", "",
				"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
			if stop, err = startServer(ctx, cmd, addr, dir); err != nil {
				return nil, err
			}
		}
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		info, err := rdb.Info(ctx, "server").Result()
		if err != nil {
			if stop != nil {
				stop()
			}
			return nil, err
		}
		s.version = "redis " + infoField(info, "redis_version") + ", asynq v0.26.0"
		d, _ := rdb.ConfigGet(ctx, "append*").Result()
		if d["appendonly"] == "yes" {
			s.durability = "appendonly yes, appendfsync " + d["appendfsync"]
		} else {
			s.durability = "Redis default: appendonly no (no fsync)"
		}
		opt := asynq.RedisClientOpt{Addr: addr, PoolSize: 32}
		q := "bench-" + randomHex(6)
		return &asynqInstance{opt: opt, client: asynq.NewClient(opt), inspector: asynq.NewInspector(opt), queue: q,
			task: asynq.NewTask("bench", payload, asynq.Queue(q)), stop: stop}, nil
	}
}

func (a *asynqInstance) enqueue(ctx context.Context, key string) (bool, error) {
	_, err := a.client.EnqueueContext(ctx, a.task, asynq.TaskID(key))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return false, nil
	}
	return err == nil, err
}

func (a *asynqInstance) enqueueBatch(context.Context, []string) (int, error) { return 0, errNoBatch }

func (a *asynqInstance) stored(context.Context) (int, error) {
	q, err := a.inspector.GetQueueInfo(a.queue)
	if err != nil && strings.Contains(err.Error(), "does not exist") {
		return 0, nil // nothing enqueued yet (the inspector's error wraps no sentinel)
	}
	if err != nil {
		return 0, err
	}
	return q.Size, nil
}

func (a *asynqInstance) process(ctx context.Context, n, workers int) (time.Duration, error) {
	var done atomic.Int64
	finished := make(chan struct{})
	srv := asynq.NewServer(a.opt, asynq.Config{Concurrency: workers, Queues: map[string]int{a.queue: 1},
		LogLevel: asynq.FatalLevel})
	start := time.Now()
	err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		if done.Add(1) == int64(n) {
			close(finished)
		}
		return nil
	}))
	if err != nil {
		return 0, err
	}
	select {
	case <-finished:
	case <-ctx.Done():
		err = fmt.Errorf("handled %d of %d: %w", done.Load(), n, ctx.Err())
	}
	el := time.Since(start)
	srv.Shutdown()
	return el, err
}

func (a *asynqInstance) close() {
	a.inspector.DeleteQueue(a.queue, true)
	a.client.Close()
	a.inspector.Close()
	if a.stop != nil {
		a.stop()
	}
}

// ---------- NATS JetStream ----------

type natsInstance struct {
	nc      *nats.Conn
	js      nats.JetStreamContext
	stream  string
	subject string
}

func startNATS(addr string) func(ctx context.Context, s *system) (instance, error) {
	return func(ctx context.Context, s *system) (instance, error) {
		nc, err := nats.Connect("nats://"+addr, nats.Timeout(5*time.Second))
		if err != nil {
			return nil, err
		}
		js, err := nc.JetStream(nats.MaxWait(30 * time.Second))
		if err != nil {
			nc.Close()
			return nil, err
		}
		s.version = "nats-server " + nc.ConnectedServerVersion() + ", nats.go v1.55.0"
		run := randomHex(6)
		t := &natsInstance{nc: nc, js: js, stream: "BENCH_" + run, subject: "bench." + run}
		if _, err := js.AddStream(&nats.StreamConfig{Name: t.stream, Subjects: []string{t.subject},
			Storage: nats.FileStorage, Retention: nats.WorkQueuePolicy, Duplicates: 24 * time.Hour}); err != nil {
			nc.Close()
			return nil, err
		}
		return t, nil
	}
}

func (t *natsInstance) enqueue(ctx context.Context, key string) (bool, error) {
	ack, err := t.js.Publish(t.subject, payload, nats.MsgId(key), nats.Context(ctx))
	if err != nil {
		return false, err
	}
	return !ack.Duplicate, nil
}

func (t *natsInstance) enqueueBatch(context.Context, []string) (int, error) { return 0, errNoBatch }

func (t *natsInstance) stored(context.Context) (int, error) {
	si, err := t.js.StreamInfo(t.stream)
	if err != nil {
		return 0, err
	}
	return int(si.State.Msgs), nil
}

// natsPullMax is how many messages each Consume keeps requested and
// buffered: the jetstream package's default, named because the consumer's
// MaxAckPending is sized from it.
const natsPullMax = jetstream.DefaultMaxMessages

func (t *natsInstance) process(ctx context.Context, n, workers int) (time.Duration, error) {
	// The jetstream package's Consume, which its docs recommend over Fetch
	// for continuous pulling: each Consume keeps pull requests in flight
	// and refills its buffer (PullMaxMessages) before it runs dry, so
	// deliveries and acks pipeline. Its handler runs on one goroutine per
	// Consume, so the 32 workers are 32 Consumes on the one durable
	// consumer (the package's js-parallel-consume example). MaxAckPending
	// covers every buffer, so the server never holds back a pull request
	// the client has room for.
	js, err := jetstream.New(t.nc)
	if err != nil {
		return 0, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, t.stream, jetstream.ConsumerConfig{Durable: "bench",
		AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: workers * natsPullMax})
	if err != nil {
		return 0, err
	}
	var done atomic.Int64
	finished := make(chan struct{})
	failed := make(chan error, 1)
	fail := func(err error) {
		select {
		case failed <- err:
		default:
		}
	}
	handler := func(m jetstream.Msg) {
		// The no-op handler, then the ack; a job counts once acked.
		if err := m.Ack(); err != nil {
			fail(fmt.Errorf("ack: %w", err))
			return
		}
		if done.Add(1) == int64(n) {
			close(finished)
		}
	}
	var lastWarn atomic.Pointer[error]
	start := time.Now()
	for range workers {
		cc, err := cons.Consume(handler, jetstream.PullMaxMessages(natsPullMax),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { lastWarn.Store(&err) }))
		if err != nil {
			return 0, err
		}
		defer cc.Stop()
		go func() {
			select {
			case <-cc.Closed():
				// Consume stopped on its own (consumer deleted, bad
				// request, connection closed).
				fail(errors.New("a Consume stopped"))
			case <-finished:
			}
		}()
	}
	select {
	case <-finished:
	case err = <-failed:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		// Ack is a fire-and-forget publish: the round trip of a flush
		// makes sure the server has received every ack before the clock
		// stops.
		err = t.nc.FlushWithContext(ctx)
	}
	el := time.Since(start)
	if err != nil {
		msg := fmt.Sprintf("handled %d of %d: %v", done.Load(), n, err)
		if w := lastWarn.Load(); w != nil {
			msg += fmt.Sprintf(" (last consume error: %v)", *w)
		}
		return el, errors.New(msg)
	}
	// Work-queue retention removes a message once its ack is applied: an
	// empty stream shows every job was acked once (a redelivery counted
	// twice would leave one behind).
	for deadline := time.Now().Add(10 * time.Second); ; {
		left, err := t.stored(ctx)
		if err != nil {
			return el, err
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return el, fmt.Errorf("acked %d of %d, but %d are still in the stream", done.Load(), n, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return el, nil
}

func (t *natsInstance) close() {
	t.js.DeleteStream(t.stream)
	t.nc.Close()
}

// ---------- servers and databases ----------

// startServer starts cmd, waits up to 20s until addr accepts connections,
// and returns a function that stops the process and removes dir.
func startServer(ctx context.Context, cmd *exec.Cmd, addr, dir string) (func(), error) {
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s is already in use", addr)
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
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
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
			return nil, fmt.Errorf("%s did not listen on %s within 20s", cmd.Path, addr)
		}
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

const pgAdminURL = "postgres://root@127.0.0.1:5432/postgres?sslmode=disable"

func pgURL(db string) string { return "postgres://root@127.0.0.1:5432/" + db + "?sslmode=disable" }

// freshDB creates an empty database named prefix_suite_<random>.
func freshDB(ctx context.Context, prefix string) (string, error) {
	name := prefix + "_suite_" + randomHex(4)
	conn, err := pgx.Connect(ctx, pgAdminURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	return name, err
}

func dropDB(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgAdminURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

func pgQueryInt(ctx context.Context, db, q string) (int64, error) {
	conn, err := pgx.Connect(ctx, pgURL(db))
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, q).Scan(&n)
	return n, err
}

func pgShow(ctx context.Context, q string) string {
	conn, err := pgx.Connect(ctx, pgAdminURL)
	if err != nil {
		return "?"
	}
	defer conn.Close(ctx)
	var s string
	if conn.QueryRow(ctx, q).Scan(&s) != nil {
		return "?"
	}
	return s
}

func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "?"
}
