// Command campaign runs a fault campaign against real Sepp nodes: client
// processes run keyed enqueues with retries, batches (atomic and not) and
// effect-guarded handlers while a nemesis kills, pauses, partitions and
// otherwise hurts the nodes and their database; producers also write outbox
// rows in transactions of an app database on the same PostgreSQL, which
// every node relays; every operation and its outcome goes to a history
// (package history), the store and the outbox table are read back once the
// run has settled, and the checker judges the whole history.
//
//	go run ./test/faults/campaign -backend embedded -duration 3m -seed 1 -out /tmp/faults
//	go run ./test/faults/campaign -backend postgres -nodes 3 -duration 30m -out /tmp/faults-pg
//
// It needs root (network namespaces, nftables, tmpfs mounts) and a
// PostgreSQL server (the app database of the outbox on both backends, and
// the store on the PostgreSQL backend, which restarts it). The nodes run a
// build of `sepp` with the test-only fault hooks (go build -tags seppfaults),
// which it builds unless -sepp names one. It exits 0 when the checker finds
// no violation, 1 when it finds any, and 2 when the campaign could not run.
// The history, the checker's report, the nemesis log and every node's log
// are in the -out directory.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx", for the outbox writer

	"github.com/sepp-dev/sepp/outbox"
	"github.com/sepp-dev/sepp/test/faults/history"
)

const (
	backendEmbedded = "embedded"
	backendPostgres = "postgres"
)

type options struct {
	backend    string
	nodes      int
	duration   time.Duration
	settle     time.Duration
	seed       uint64
	faults     []string
	faultEvery time.Duration
	clients    int
	think      time.Duration
	out        string
	sepp       string
	broken     string
	diskMB     int
	pgURL      string // the server's admin URL (loopback)
	pgHostPort string
	pgDB       string
	pgRestart  string
	outbox     bool   // write outbox rows into the app database, relayed by every node
	schedule   bool   // every node runs one schedule (schedule.go)
	appDB      string // the app database on the PostgreSQL server (dropped and created afresh)
}

// nodeDBURL is the campaign database's URL as node reaches it: through
// the forwarder on its veth's host end.
func (o *options) nodeDBURL(hostIP string) string {
	u, _ := url.Parse(o.pgURL)
	u.Host = hostIP + ":5432"
	u.Path = "/" + o.pgDB
	return u.String()
}

// appURL is the app database's URL as the campaign's producers reach it
// (the server's own address), and nodeAppURL as node reaches it: through
// the forwarder on its veth's host end, so a node cut from PostgreSQL is
// cut from the app database too.
func (o *options) appURL() string {
	u, _ := url.Parse(o.pgURL)
	u.Path = "/" + o.appDB
	return u.String()
}

func (o *options) nodeAppURL(hostIP string) string {
	u, _ := url.Parse(o.appURL())
	u.Host = hostIP + ":5432"
	q := u.Query()
	q.Set("application_name", relayAppName) // the relays' sessions, which relay-abort ends
	u.RawQuery = q.Encode()
	return u.String()
}

// relayAppName is the application_name of the relays' app-database
// sessions.
const relayAppName = "sepp-relay"

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "campaign:", err)
		return 2
	}
	// SIGINT or SIGTERM ends the campaign early, with the nodes stopped and
	// the namespaces removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := campaign(ctx, o, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "campaign:", err)
		return 2
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("campaign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	fs.StringVar(&o.backend, "backend", backendEmbedded, "the store: embedded or postgres")
	fs.IntVar(&o.nodes, "nodes", 0, "Sepp nodes (default 1 on the embedded store, 3 on postgres)")
	fs.DurationVar(&o.duration, "duration", 3*time.Minute, "how long the load and the faults run")
	fs.DurationVar(&o.settle, "settle", 90*time.Second, "after the faults, how long workers may take to run what is left")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the nemesis and the clients' choices")
	faults := fs.String("faults", "all", "comma-separated fault kinds, or all (every kind the backend has)")
	fs.DurationVar(&o.faultEvery, "fault-every", 4*time.Second, "the nemesis's pace: a fault holds and waits about this long")
	fs.IntVar(&o.clients, "clients", 12, "client processes (half producers, half workers)")
	fs.DurationVar(&o.think, "think", 10*time.Millisecond, "each producer's mean pause between operations (keeps the history to a size the checker reads quickly)")
	fs.StringVar(&o.out, "out", "", "directory for the history, the report and the logs (required)")
	fs.StringVar(&o.sepp, "sepp", "", "a sepp binary built with -tags seppfaults (default: build one into -out)")
	fs.StringVar(&o.broken, "broken", "", "run the nodes deliberately broken, to show the checker catches it: ack-before-commit")
	fs.IntVar(&o.diskMB, "disk-mb", 768, "size of the tmpfs the embedded store runs on (a 100 s run with every workload reaches about 256 MiB of data and compactions)")
	fs.StringVar(&o.pgURL, "postgres-url", envOr("SEPP_TEST_POSTGRES_URL", "postgres://root@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL to create the campaign database on")
	fs.StringVar(&o.pgDB, "postgres-db", "sepp_faults", "the campaign database (dropped and created afresh)")
	fs.StringVar(&o.pgRestart, "postgres-restart", "", "shell command that restarts PostgreSQL (default: pg_ctlcluster of the one cluster in /etc/postgresql)")
	fs.BoolVar(&o.outbox, "outbox", true, "write outbox rows in transactions of an app database on -postgres-url, relayed by every node ([[outboxes]])")
	fs.BoolVar(&o.schedule, "schedule", true, "every node runs a schedule `@every 1s` with catch_up = \"all\" ([[schedules]]); the checker wants one job per tick and none missing")
	fs.StringVar(&o.appDB, "app-db", "sepp_faults_app", "the outbox's app database (dropped and created afresh)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.out == "" {
		return nil, fmt.Errorf("-out is required: a directory for the history and the logs")
	}
	switch o.backend {
	case backendEmbedded:
		if o.nodes == 0 {
			o.nodes = 1
		}
		if o.nodes != 1 {
			return nil, fmt.Errorf("-nodes %d: the embedded store has one node", o.nodes)
		}
	case backendPostgres:
		if o.nodes == 0 {
			o.nodes = 3
		}
	default:
		return nil, fmt.Errorf("-backend %q: want embedded or postgres", o.backend)
	}
	if o.nodes < 1 || o.nodes > 50 {
		return nil, fmt.Errorf("-nodes %d: want 1 to 50", o.nodes)
	}
	if o.clients < 2 {
		return nil, fmt.Errorf("-clients %d: want at least 2 (a producer and a worker)", o.clients)
	}
	if o.faultEvery < 100*time.Millisecond {
		return nil, fmt.Errorf("-fault-every %v: want at least 100ms", o.faultEvery)
	}
	if o.broken != "" && o.broken != "ack-before-commit" {
		return nil, fmt.Errorf("-broken %q: the one deliberate bug is ack-before-commit", o.broken)
	}
	var err error
	if *faults != "none" {
		if o.faults, err = parseFaults(*faults, o.backend); err != nil {
			return nil, err
		}
	}
	if !o.outbox {
		// Without an outbox there are no relays to abort.
		kept := o.faults[:0]
		for _, f := range o.faults {
			if f != faultRelayAbort {
				kept = append(kept, f)
			} else if *faults != "all" && *faults != "" {
				return nil, fmt.Errorf("fault %q ends the outbox relays' sessions, and -outbox=false runs none", f)
			}
		}
		o.faults = kept
	}
	if o.backend == backendPostgres || o.outbox {
		u, err := url.Parse(o.pgURL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("-postgres-url %q: not a postgres:// URL", o.pgURL)
		}
		o.pgHostPort = u.Host
		if !strings.Contains(o.pgHostPort, ":") {
			o.pgHostPort += ":5432"
		}
	}
	if o.outbox && (o.appDB == "" || (o.backend == backendPostgres && o.appDB == o.pgDB)) {
		return nil, fmt.Errorf("-app-db %q: want a database of its own, not the store's", o.appDB)
	}
	if o.backend == backendPostgres {
		if o.pgRestart == "" {
			vers, _ := filepath.Glob("/etc/postgresql/*")
			if len(vers) != 1 {
				return nil, fmt.Errorf("-postgres-restart: found %d clusters in /etc/postgresql; say how to restart PostgreSQL", len(vers))
			}
			o.pgRestart = fmt.Sprintf("pg_ctlcluster --skip-systemctl-redirect %s main restart -m fast", filepath.Base(vers[0]))
		}
	}
	return o, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// campaign runs the whole campaign and returns the checker's report.
func campaign(parent context.Context, o *options, stdout io.Writer) (history.Report, error) {
	var rep history.Report
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return rep, err
	}
	unlock, err := lockMachine()
	if err != nil {
		return rep, err
	}
	defer unlock()
	logf, err := os.Create(filepath.Join(o.out, "campaign.log"))
	if err != nil {
		return rep, err
	}
	defer logf.Close()
	logw := io.MultiWriter(logf, stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(logw, "%s  %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	if o.sepp == "" {
		o.sepp = filepath.Join(o.out, "sepp")
		say("building sepp with the fault hooks (-tags seppfaults)")
		if b, err := exec.Command("go", "build", "-tags", "seppfaults", "-o", o.sepp, "github.com/sepp-dev/sepp/cmd/sepp").CombinedOutput(); err != nil {
			return rep, fmt.Errorf("go build -tags seppfaults: %w: %s", err, b)
		}
	}
	if o.sepp, err = filepath.Abs(o.sepp); err != nil {
		return rep, err
	}
	if o.backend == backendPostgres {
		if err := freshDatabase(o.pgURL, o.pgDB); err != nil {
			return rep, err
		}
	}
	var app *sql.DB
	if o.outbox {
		if app, err = freshAppDatabase(o); err != nil {
			return rep, err
		}
		defer app.Close()
	}
	cl, err := newCluster(o, logw)
	if err != nil {
		return rep, err
	}
	if o.backend == backendPostgres {
		// The schema first, from one node, so the three do not race to it.
		n := cl.nodes[0]
		if out, err := exec.Command("ip", "netns", "exec", n.ns, o.sepp, "migrate", "--config", n.cfgPath).CombinedOutput(); err != nil {
			cl.teardown()
			return rep, fmt.Errorf("sepp migrate: %w: %s", err, out)
		}
	}
	ctx, cancel := context.WithCancel(parent)
	defer func() {
		cancel()
		cl.teardown()
	}()
	clusterStart := time.Now()
	cl.start(ctx)

	hf, err := os.Create(filepath.Join(o.out, "history.jsonl"))
	if err != nil {
		return rep, err
	}
	defer hf.Close()
	hw := history.NewWriter(hf)
	ops := &atomic.Int64{}
	seen := newKeySet()
	clients := make([]*client, o.clients)
	for i := range clients {
		c := &client{id: i + 1, rng: rand.New(rand.NewPCG(o.seed, uint64(i+1))), w: hw, home: i, ops: ops, seen: seen, think: o.think,
			keys: max(500, int(o.duration.Seconds())*20), app: app}
		for _, n := range cl.nodes {
			nc, err := dial(n.addr)
			if err != nil {
				return rep, err
			}
			defer nc.conn.Close()
			c.nodes = append(c.nodes, nc)
		}
		clients[i] = c
	}
	say("%d %s node(s) starting; waiting until each serves", o.nodes, o.backend)
	if err := waitServing(ctx, clients[0], 60*time.Second); err != nil {
		return rep, fmt.Errorf("the nodes did not start (see %s/node*/sepp.log): %w", o.out, err)
	}

	evf, err := os.Create(filepath.Join(o.out, "faults.jsonl"))
	if err != nil {
		return rep, err
	}
	defer evf.Close()
	nm := &nemesis{c: cl, kinds: o.faults, every: o.faultEvery, rng: rand.New(rand.NewPCG(o.seed, 0)), log: logw,
		events: json.NewEncoder(evf), counts: map[string]int{}, errs: map[string]int{}}

	say("load and faults for %v: %d clients, faults %s every ~%v, seed %d%s", o.duration, o.clients,
		strings.Join(o.faults, ","), o.faultEvery, o.seed, brokenNote(o.broken))
	stopLoad := make(chan struct{})
	var load sync.WaitGroup
	workers := make(chan struct{})
	for i, c := range clients {
		load.Add(1)
		if i%2 == 0 {
			go func() { defer load.Done(); c.produce(stopLoad) }()
		} else {
			go func() { defer load.Done(); c.consume(workers) }()
		}
	}
	nctx, stopNemesis := context.WithCancel(ctx)
	defer stopNemesis()
	var nwg sync.WaitGroup
	if len(o.faults) > 0 {
		nwg.Add(1)
		go func() { defer nwg.Done(); nm.run(nctx) }()
	}
	progress := time.NewTicker(15 * time.Second)
	deadline := time.After(o.duration)
	started := time.Now()
wait:
	for {
		select {
		case <-progress.C:
			counts, _ := nm.summary()
			say("%v: %d operations, faults %v", time.Since(started).Round(time.Second), ops.Load(), counts)
		case <-deadline:
			break wait
		case <-ctx.Done():
			stopNemesis()
			nwg.Wait() // its fault healed or not, before the teardown
			return rep, fmt.Errorf("interrupted after %v; the history so far is in %s", time.Since(started).Round(time.Second), hf.Name())
		}
	}
	progress.Stop()
	stopNemesis()
	nwg.Wait()
	close(stopLoad) // producers end; workers go on through the settling
	cl.healAll()
	say("faults healed; waiting for every node to serve, then for the queues to drain (at most %v)", o.settle)
	if err := waitServing(ctx, clients[0], 60*time.Second); err != nil {
		return rep, fmt.Errorf("after healing, a node does not serve (see %s/node*/sepp.log): %w", o.out, err)
	}
	// Settled: the relays have drained the outbox table, and the workers
	// the queues (the relays' jobs among them).
	settleUntil := time.Now().Add(o.settle)
	for time.Now().Before(settleUntil) && ctx.Err() == nil {
		rows, err := outboxLeft(ctx, app)
		if err == nil && rows == 0 {
			left, err := unsettled(ctx, clients[0].nodes[0])
			if err == nil && left == 0 {
				break
			}
		}
		time.Sleep(time.Second)
	}
	close(workers)
	load.Wait()
	if ctx.Err() != nil {
		return rep, fmt.Errorf("interrupted while the queues drained; the history so far is in %s", hf.Name())
	}

	say("reading the store back")
	rctx, cancelRead := context.WithTimeout(ctx, 10*time.Minute)
	defer cancelRead()
	st, err := readState(rctx, clients[0].nodes[0], seen)
	if err != nil {
		return rep, fmt.Errorf("reading the final state: %w", err)
	}
	if o.schedule {
		if st.Schedule, err = readSchedule(rctx, clients[0].nodes[0], clusterStart); err != nil {
			return rep, fmt.Errorf("reading the schedule's jobs back: %w", err)
		}
	}
	if app != nil {
		if st.Outbox, err = readOutbox(rctx, app); err != nil {
			return rep, fmt.Errorf("reading the outbox table back: %w", err)
		}
	}
	if err := hw.WriteState(st); err != nil {
		return rep, err
	}
	losses, err := nm.lossesReported()
	if err != nil {
		return rep, fmt.Errorf("reading the recovery reports of the deleted logs: %w", err)
	}
	for _, l := range losses {
		if err := hw.WriteLoss(l); err != nil {
			return rep, err
		}
	}
	if err := hf.Sync(); err != nil {
		return rep, err
	}

	h, err := history.ReadFile(hf.Name())
	if err != nil {
		return rep, err
	}
	rep = history.Check(h)
	counts, errs := nm.summary()
	summary := summarize(o, rep, counts, errs, cl)
	if err := os.WriteFile(filepath.Join(o.out, "summary.txt"), []byte(summary), 0o644); err != nil {
		return rep, err
	}
	if b, err := json.MarshalIndent(rep, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(o.out, "report.json"), b, 0o644)
	}
	fmt.Fprint(logw, summary)
	return rep, nil
}

// machineLock is held by the campaign running on this machine: two would
// share network namespace names, addresses and the database.
const machineLock = "/run/sepp-faults.lock"

func lockMachine() (unlock func(), err error) {
	f, err := os.OpenFile(machineLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("the campaign's machine lock %s: %w (the campaign needs root)", machineLock, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another fault campaign runs on this machine (it holds %s): two would share network namespaces, addresses and the database; wait until it ends", machineLock)
	}
	return func() { f.Close() }, nil
}

func brokenNote(b string) string {
	if b == "" {
		return ""
	}
	return ", DELIBERATELY BROKEN: " + b
}

// waitServing waits until every node answers a call.
func waitServing(ctx context.Context, c *client, limit time.Duration) error {
	end := time.Now().Add(limit)
	for i, n := range c.nodes {
		for {
			_, err := unsettled(ctx, n)
			if err == nil {
				break
			}
			if time.Now().After(end) || ctx.Err() != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// freshDatabase drops and creates the database db on the server of
// adminURL.
func freshDatabase(adminURL, db string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", adminURL, err)
	}
	defer conn.Close(ctx)
	name := pgx.Identifier{db}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	return err
}

// freshAppDatabase drops and creates the outbox's app database, creates
// the outbox table in it with the DDL `sepp outbox schema --dialect
// postgres` prints, and opens it for the producers.
func freshAppDatabase(o *options) (*sql.DB, error) {
	if err := freshDatabase(o.pgURL, o.appDB); err != nil {
		return nil, fmt.Errorf("the outbox's app database: %w", err)
	}
	schema, err := outbox.Schema(outbox.Postgres, outbox.DefaultTable)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("pgx", o.appURL())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2 * o.clients)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, stmt := range outbox.Statements(schema) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			db.Close()
			return nil, fmt.Errorf("the outbox schema in %s: %w", o.appDB, err)
		}
	}
	return db, nil
}

// summarize is the campaign's summary: what ran, the faults by kind, what
// the nodes went through, and the checker's report.
func summarize(o *options, rep history.Report, counts, errs map[string]int, cl *cluster) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n== fault campaign: backend %s, %d node(s), %v, seed %d, %d clients%s\n", o.backend, o.nodes, o.duration, o.seed, o.clients, brokenNote(o.broken))
	kinds := make([]string, 0, len(counts))
	total := 0
	for k, v := range counts {
		kinds = append(kinds, k)
		total += v
	}
	sort.Strings(kinds)
	fmt.Fprintf(&b, "faults injected: %d, of %d kinds\n", total, len(kinds))
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %-17s %d", k, counts[k])
		if errs[k] > 0 {
			fmt.Fprintf(&b, " (%d could not be applied or healed: see faults.jsonl)", errs[k])
		}
		b.WriteString("\n")
	}
	for _, n := range cl.nodes {
		n.mu.Lock()
		starts := n.starts
		n.mu.Unlock()
		log, _ := os.ReadFile(filepath.Join(n.dir, "sepp.log"))
		fmt.Fprintf(&b, "node %d: started %d times; the store stopped itself %d times (a write it could not make durable); %d recoveries reported damage\n",
			n.i, starts, strings.Count(string(log), `"msg":"the store stopped; shutting down"`), strings.Count(string(log), `"msg":"store recovered with damage`))
	}
	fmt.Fprintf(&b, "history: %s\n", filepath.Join(o.out, "history.jsonl"))
	b.WriteString(rep.String())
	return b.String()
}
