// Command outboxlag measures the outbox relay's lag: the time from the
// commit of an app transaction that writes an outbox row to the job's
// creation in Sepp (its created_at, stamped when the relay's enqueue
// reaches the store, before that enqueue's fsync). It starts `sepp serve` on a fresh embedded store with an
// [[outboxes]] entry for each app database, commits -rows rows one
// transaction each at -rate rows a second, waits until the relay has made
// every job, and reads each job's created_at (the server's clock, the same
// host's). Beside it, in the same run and at the same rate, it measures what
// an app that enqueues directly after its commit waits: the Enqueue call.
//
//	go run ./bench/outboxlag -rows 2000 -rate 200
//
// PostgreSQL (SEPP_TEST_POSTGRES_URL, default the local test database)
// wakes the relay with NOTIFY; MySQL/MariaDB (SEPP_TEST_MYSQL_URL, with
// -dialects postgres,mysql) is polled every -poll.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/outbox"
)

func main() {
	bin := flag.String("sepp", "", "sepp binary to serve with (empty: go build ./cmd/sepp)")
	rows := flag.Int("rows", 2000, "rows per database, one transaction each")
	rate := flag.Int("rate", 200, "rows committed per second")
	dialects := flag.String("dialects", "postgres", "app databases: postgres, mysql (comma-separated)")
	poll := flag.Duration("poll", 100*time.Millisecond, "poll_interval_ms of the outboxes (PostgreSQL's NOTIFY wakes it sooner)")
	backlog := flag.Int("backlog", 0, "then a backlog: this many rows committed in transactions of 1000 as fast as they go, timed until relayed, beside as many jobs sent by EnqueueBatch in batches of 100")
	flag.Parse()
	if err := run(*bin, *rows, *rate, strings.Split(*dialects, ","), *poll, *backlog); err != nil {
		fmt.Fprintln(os.Stderr, "outboxlag:", err)
		os.Exit(1)
	}
}

type appDB struct {
	dialect outbox.Dialect
	url     string
	db      *sql.DB
	drop    func()
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// open makes a database of its own for dialect d, with the outbox schema.
func open(d outbox.Dialect, bin string) (*appDB, error) {
	name := fmt.Sprintf("sepp_outboxlag_%d", time.Now().UnixNano())
	a := &appDB{dialect: d}
	switch d {
	case outbox.Postgres:
		base := env("SEPP_TEST_POSTGRES_URL", "postgres://root@127.0.0.1:5432/test?sslmode=disable")
		admin, err := sql.Open("pgx", base)
		if err != nil {
			return nil, err
		}
		if _, err := admin.Exec("CREATE SCHEMA " + name); err != nil {
			return nil, err
		}
		a.drop = func() { admin.Exec("DROP SCHEMA " + name + " CASCADE"); admin.Close() }
		sep := "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		a.url = base + sep + "search_path=" + name
		a.db, err = sql.Open("pgx", a.url)
		if err != nil {
			return nil, err
		}
	case outbox.MySQL:
		cfg, err := mysql.ParseDSN(env("SEPP_TEST_MYSQL_URL", "root@tcp(127.0.0.1:3306)/"))
		if err != nil {
			return nil, err
		}
		admin, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return nil, err
		}
		if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
			return nil, err
		}
		a.drop = func() { admin.Exec("DROP DATABASE " + name); admin.Close() }
		cfg.DBName = name
		a.url = cfg.FormatDSN()
		if a.db, err = sql.Open("mysql", a.url); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("dialect %v: this benchmark runs postgres and mysql", d)
	}
	ddl, err := exec.Command(bin, "outbox", "schema", "--dialect", d.String()).Output()
	if err != nil {
		return nil, fmt.Errorf("sepp outbox schema: %w", err)
	}
	for _, stmt := range outbox.Statements(strings.TrimSuffix(strings.TrimSpace(string(ddl)), ";")) {
		if _, err := a.db.Exec(stmt); err != nil {
			return nil, fmt.Errorf("%v schema: %w", d, err)
		}
	}
	return a, nil
}

func run(bin string, rows, rate int, dialects []string, poll time.Duration, backlog int) error {
	dir, err := os.MkdirTemp("", "sepp-outboxlag-")
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
	var apps []*appDB
	config := "[[queues]]\nname = \"lag\"\n"
	srvEnv := os.Environ()
	for _, name := range dialects {
		d, err := outbox.ParseDialect(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		a, err := open(d, bin)
		if err != nil {
			return err
		}
		defer a.drop()
		defer a.db.Close()
		apps = append(apps, a)
		v := "APP_DB_" + strings.ToUpper(d.String())
		srvEnv = append(srvEnv, v+"="+a.url)
		config += fmt.Sprintf("\n[[outboxes]]\nname = %q\ndialect = %q\nurl_env = %q\npoll_interval_ms = %d\n", d.String(), d.String(), v, poll.Milliseconds())
	}
	cfgFile := filepath.Join(dir, "sepp.toml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o644); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, "serve", "--config", cfgFile)
	srv.Env = append(srvEnv, "SEPP_LISTEN="+addr, "SEPP_STORAGE_PATH="+filepath.Join(dir, "data"))
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
	ctx := context.Background()
	var c *sepp.Client
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err = sepp.Connect(ctx, "http://"+addr); err == nil {
			if _, err = c.ListQueues(ctx); err == nil {
				break
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sepp serve did not answer: %w", err)
		}
	}
	defer c.Close()
	fmt.Printf("sepp serve (embedded store) on %s; %d rows per database, one transaction each, %d a second\n", addr, rows, rate)

	for _, a := range apps {
		lags, err := measure(ctx, c, a, rows, rate)
		if err != nil {
			return err
		}
		how := "NOTIFY"
		if a.dialect != outbox.Postgres {
			how = fmt.Sprintf("polled every %v", poll)
		}
		fmt.Printf("outbox %-8s (%s): commit to job created: %s\n", a.dialect, how, quantiles(lags))
	}
	direct, err := measureDirect(ctx, c, rows, rate)
	if err != nil {
		return err
	}
	fmt.Printf("direct Enqueue after the commit, the call's latency:          %s\n", quantiles(direct))
	if backlog == 0 {
		return nil
	}
	for _, a := range apps {
		d, err := drain(ctx, a, backlog)
		if err != nil {
			return err
		}
		fmt.Printf("backlog %s: %d rows committed and relayed in %v: %.0f rows/s\n", a.dialect, backlog, d.Round(time.Millisecond), float64(backlog)/d.Seconds())
	}
	d, err := direct100(ctx, c, backlog)
	if err != nil {
		return err
	}
	fmt.Printf("comparison: %d keyed jobs by EnqueueBatch, 100 a call: %v: %.0f jobs/s\n", backlog, d.Round(time.Millisecond), float64(backlog)/d.Seconds())
	return nil
}

// drain commits n rows in transactions of 1000 and returns the time from
// the first commit's start until the table is empty.
func drain(ctx context.Context, a *appDB, n int) (time.Duration, error) {
	w := outbox.Writer{Dialect: a.dialect}
	start := time.Now()
	for done := 0; done < n; {
		tx, err := a.db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		for range min(1000, n-done) {
			if _, err := w.Enqueue(ctx, tx, sepp.EnqueueRequest{Queue: "lag", JobType: "bench", Payload: []byte(`{"backlog":true}`)}); err != nil {
				tx.Rollback()
				return 0, err
			}
			done++
		}
		if err := tx.Commit(); err != nil {
			return 0, err
		}
	}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		var left int
		if err := a.db.QueryRowContext(ctx, "SELECT count(*) FROM sepp_outbox").Scan(&left); err != nil {
			return 0, err
		}
		if left == 0 {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d rows of %v left after 5 minutes", left, a.dialect)
		}
	}
}

// direct100 sends n keyed jobs in EnqueueBatch calls of 100, one after the
// other, as the relay does with its default batch_size.
func direct100(ctx context.Context, c *sepp.Client, n int) (time.Duration, error) {
	start := time.Now()
	for done := 0; done < n; {
		var reqs []sepp.EnqueueRequest
		for range min(100, n-done) {
			reqs = append(reqs, sepp.EnqueueRequest{Queue: "lag", JobType: "bench", Payload: []byte(`{"backlog":true}`), IdempotencyKey: sepp.Key(fmt.Sprintf("batch-%d", done))})
			done++
		}
		res, err := c.EnqueueBatch(ctx, reqs, sepp.BatchOptions{})
		if err != nil {
			return 0, err
		}
		for _, r := range res {
			if r.Err != nil {
				return 0, r.Err
			}
		}
	}
	return time.Since(start), nil
}

// measure commits rows outbox rows to a at rate and returns each one's lag.
func measure(ctx context.Context, c *sepp.Client, a *appDB, rows, rate int) ([]time.Duration, error) {
	w := outbox.Writer{Dialect: a.dialect}
	committed := make(map[string]time.Time, rows)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := range rows {
		<-tick.C
		tx, err := a.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		id, err := w.Enqueue(ctx, tx, sepp.EnqueueRequest{Queue: "lag", JobType: "bench", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			tx.Rollback()
			return nil, err
		}
		// The lag counts from the start of the commit call: the row may be
		// relayed before the call returns.
		committed[id] = time.Now()
		if err := tx.Commit(); err != nil {
			return nil, err
		}
	}
	var lags []time.Duration
	deadline := time.Now().Add(time.Minute)
	for id, at := range committed {
		for {
			l, err := c.LookupIdempotencyKey(ctx, "lag", id)
			if err != nil {
				return nil, err
			}
			if l.Found {
				j, err := c.GetJob(ctx, l.JobID)
				if err != nil {
					return nil, err
				}
				lags = append(lags, j.CreatedAt.Sub(at))
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("row %s of %v was not relayed within a minute", id, a.dialect)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return lags, nil
}

// measureDirect is the comparison: rows Enqueue calls at rate.
func measureDirect(ctx context.Context, c *sepp.Client, rows, rate int) ([]time.Duration, error) {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var lat []time.Duration
	for i := range rows {
		<-tick.C
		t := time.Now()
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "lag", JobType: "bench", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			IdempotencyKey: sepp.Key(fmt.Sprintf("direct-%d", i))}); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, nil
}

func quantiles(d []time.Duration) string {
	slices.Sort(d)
	q := func(p float64) time.Duration {
		return d[min(len(d)-1, int(p*float64(len(d))))].Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("p50 %v  p90 %v  p99 %v  max %v  (n=%d)", q(0.5), q(0.9), q(0.99), d[len(d)-1].Round(10*time.Microsecond), len(d))
}
