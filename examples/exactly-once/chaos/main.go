// Command chaos runs the exactly-once example end to end as real processes
// and checks that nothing happened twice. It starts a mail sink, `sepp serve`
// (relaying the shop database's outbox), the shop app and the worker; sends
// each order's POST /orders several times with one Idempotency-Key, some of
// them at once; meanwhile kills the app, `sepp serve` and the worker with
// SIGKILL at random moments and starts them again; then waits until
// everything settled and counts orders, outbox rows left, jobs, mails and
// ledger rows. It exits 1 unless there is exactly one order, one job, one
// mail and one ledger row per key, and no outbox row left.
//
//	bash examples/exactly-once/run.sh              # builds the binaries, then runs this
//	bash examples/exactly-once/run.sh -orders 500 -chaos 40s
//
// It needs PostgreSQL: SEPP_TEST_POSTGRES_URL (default
// postgres://root@127.0.0.1:5432/test?sslmode=disable) names a database it
// connects to, to create a database of its own for the run and drop it after.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp"
)

var (
	nOrders   = flag.Int("orders", 200, "how many orders (keys) to send")
	chaosFor  = flag.Duration("chaos", 20*time.Second, "how long processes are killed at random; orders are sent during it")
	killMin   = flag.Duration("kill-min", 500*time.Millisecond, "the shortest time a process lives before its next SIGKILL")
	killMax   = flag.Duration("kill-max", 3*time.Second, "the longest time a process lives before its next SIGKILL")
	grace     = flag.Duration("grace", 15*time.Second, "how long after the chaos every order may take to get its 201")
	settle    = flag.Duration("settle", 30*time.Second, "how long to wait, after the chaos and the last answer, for every job to finish")
	timeout   = flag.Duration("timeout", 100*time.Second, "the longest the whole run may take; past it the run fails")
	binDir    = flag.String("bin", "", "the folder holding the sepp, app, worker and mailsink binaries (default: this program's folder)")
	pgURL     = flag.String("postgres", cmp.Or(os.Getenv("SEPP_TEST_POSTGRES_URL"), "postgres://root@127.0.0.1:5432/test?sslmode=disable"), "a PostgreSQL database to connect to; the run creates and drops a database of its own")
	seed      = flag.Uint64("seed", 0, "the random seed of the kills and the orders' timing (0: from the clock)")
	slowRelay = flag.Duration("slow-relay", 20*time.Millisecond, "how long each delete from the outbox table sleeps (a trigger), so a kill of sepp serve can land between a row's enqueue and its delete; 0: none")
	lookup    = flag.Bool("mail-lookup", true, "the worker asks the mail sink whether a mail went out before it sends it; false shows the gap an effect key alone leaves")
	keep      = flag.Bool("keep", false, "keep the run's database and folder (the processes' logs, the mail file) instead of removing them")
	verbose   = flag.Bool("v", false, "print each kill as it happens")
)

func main() {
	flag.Parse()
	os.Exit(run())
}

// mailsQueue is the queue the app's outbox rows name.
const mailsQueue = "mails"

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(*seed, 0))
	bin := *binDir
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fail("find this program's folder: %v", err)
		}
		bin = filepath.Dir(exe)
	}
	dir, err := os.MkdirTemp("", "exactly-once-")
	if err != nil {
		return fail("%v", err)
	}
	fmt.Printf("exactly-once: %d orders, each POSTed 3 times at once, retried until answered, then twice more;\n", *nOrders)
	fmt.Printf("SIGKILL to the app, sepp serve and the worker at random for %v (seed %d)\n", *chaosFor, *seed)

	// The shop's database: one of our own, dropped at the end.
	dbName := fmt.Sprintf("exactly_once_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	appURL, err := createDatabase(ctx, *pgURL, dbName)
	if err != nil {
		return fail("create the shop's database: %v", err)
	}
	ok := false
	defer func() {
		if *keep || !ok {
			fmt.Printf("kept for reading: the folder %s (logs, mails.jsonl)", dir)
			if *keep {
				fmt.Printf(" and the database %s", dbName)
			}
			fmt.Println()
		} else {
			os.RemoveAll(dir)
		}
		if !*keep {
			if err := dropDatabase(*pgURL, dbName); err != nil {
				fmt.Fprintf(os.Stderr, "drop database %s: %v\n", dbName, err)
			}
		}
	}()

	// The outbox table, as `sepp outbox schema --dialect postgres | psql` makes it.
	ddl, err := exec.CommandContext(ctx, filepath.Join(bin, "sepp"), "outbox", "schema", "--dialect", "postgres").Output()
	if err != nil {
		return fail("sepp outbox schema: %v", err)
	}
	if err := execSQL(ctx, appURL, string(ddl)); err != nil {
		return fail("create the outbox table: %v", err)
	}
	if *slowRelay > 0 {
		// A slow database: the relay's delete of the rows it enqueued
		// takes this long, so a kill of sepp serve lands now and then
		// between a row's enqueue and its delete.
		if err := execSQL(ctx, appURL, fmt.Sprintf(slowDelete, slowRelay.Seconds())); err != nil {
			return fail("slow down the outbox's deletes: %v", err)
		}
	}

	ports, err := freePorts(3)
	if err != nil {
		return fail("pick free ports: %v", err)
	}
	seppAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	appAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	sinkAddr := fmt.Sprintf("127.0.0.1:%d", ports[2])
	mailFile := filepath.Join(dir, "mails.jsonl")
	config := filepath.Join(dir, "sepp.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(seppConfig, seppAddr, filepath.Join(dir, "sepp-data"), mailsQueue)), 0o644); err != nil {
		return fail("%v", err)
	}

	sink := newProc("mailsink", dir, filepath.Join(bin, "mailsink"), nil, "LISTEN="+sinkAddr, "MAIL_FILE="+mailFile)
	seppd := newProc("sepp serve", dir, filepath.Join(bin, "sepp"), []string{"serve", "--config", config}, "APP_DATABASE_URL="+appURL)
	app := newProc("app", dir, filepath.Join(bin, "app"), nil, "LISTEN="+appAddr, "DATABASE_URL="+appURL, "SEPP_ADDR=http://"+seppAddr)
	workerEnv := []string{"DATABASE_URL=" + appURL, "SEPP_ADDR=http://" + seppAddr, "MAIL_URL=http://" + sinkAddr + "/mail"}
	if !*lookup {
		workerEnv = append(workerEnv, "MAIL_LOOKUP=off")
	}
	worker := newProc("worker", dir, filepath.Join(bin, "worker"), nil, workerEnv...)
	procs := []*proc{sink, seppd, app, worker}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	watchdog := time.AfterFunc(*timeout, func() {
		fmt.Fprintf(os.Stderr, "FAIL: the run took longer than -timeout %v; the logs are in %s\n", *timeout, dir)
		for _, p := range procs {
			p.kill()
		}
		dropDatabase(*pgURL, dbName)
		os.Exit(1)
	})
	defer watchdog.Stop()
	for _, s := range []struct {
		p     *proc
		ready string
	}{{sink, "http://" + sinkAddr + "/healthz"}, {seppd, "http://" + seppAddr + "/readyz"}, {app, "http://" + appAddr + "/healthz"}, {worker, ""}} {
		if err := s.p.start(); err != nil {
			return fail("start %s: %v", s.p.name, err)
		}
		if s.ready != "" {
			if err := waitReady(ctx, s.ready, 20*time.Second); err != nil {
				return fail("%s is not ready: %v (its log: %s)", s.p.name, err, s.p.logPath)
			}
		}
	}
	fmt.Printf("started: mail sink on %s, sepp serve on %s, the app on %s, the worker\n", sinkAddr, seppAddr, appAddr)

	// The chaos: each victim lives a random while, is killed, and comes
	// back after a random pause; one that exits on its own is started again.
	start := time.Now()
	chaosEnd := start.Add(*chaosFor)
	var kills killLog
	var wg sync.WaitGroup
	superCtx, stopSupervising := context.WithCancel(ctx)
	defer stopSupervising()
	for i, p := range []*proc{app, seppd, worker} {
		r := rand.New(rand.NewPCG(*seed, uint64(i+1)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			supervise(superCtx, p, r, chaosEnd, &kills, start)
		}()
	}

	// The orders, spread over nine tenths of the chaos.
	t := newTally()
	client := &http.Client{Timeout: 5 * time.Second}
	clientsDone := make(chan struct{})
	clientDeadline := chaosEnd.Add(*grace)
	cctx, cancelClients := context.WithDeadline(ctx, clientDeadline)
	defer cancelClients()
	go func() {
		defer close(clientsDone)
		var cw sync.WaitGroup
		spread := *chaosFor * 9 / 10
		for i := range *nOrders {
			at := start.Add(spread * time.Duration(i) / time.Duration(*nOrders))
			jitter := time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
			cw.Add(1)
			go func() {
				defer cw.Done()
				if !sleepUntil(cctx, at.Add(jitter)) {
					return
				}
				order(cctx, client, "http://"+appAddr+"/orders", i, t)
			}()
		}
		cw.Wait()
	}()

	select {
	case <-clientsDone:
	case <-ctx.Done():
		return fail("interrupted")
	}
	if d := time.Until(chaosEnd); d > 0 {
		sleepUntil(ctx, chaosEnd)
	}
	stopSupervising()
	wg.Wait()
	// Everything runs again for the end.
	for _, p := range procs {
		if !p.running() {
			if err := p.start(); err != nil {
				return fail("start %s: %v", p.name, err)
			}
		}
	}
	fmt.Printf("chaos over after %.1fs: SIGKILLed %s\n", time.Since(start).Seconds(), kills.summary())
	fmt.Printf("requests: %s\n", t.summary())
	if n := t.answered(); n != *nOrders {
		return fail("only %d of %d orders got a 201 before %v", n, *nOrders, clientDeadline.Format(time.TimeOnly))
	}
	if bad := t.problems(); len(bad) > 0 {
		for _, b := range bad {
			fmt.Println("  " + b)
		}
		return fail("the clients saw answers a retry must not get")
	}

	// Settle: no outbox row left and no job waiting or running.
	sc, err := sepp.NewClient(ctx, "http://"+seppAddr, sepp.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fail("%v", err)
	}
	defer sc.Close()
	conn, err := pgx.Connect(ctx, appURL)
	if err != nil {
		return fail("connect to the shop's database: %v", err)
	}
	defer conn.Close(context.Background())
	settleStart := time.Now()
	settled := false
	for time.Since(settleStart) < *settle && ctx.Err() == nil {
		if waiting, err := pending(ctx, sc, conn); err == nil && waiting == 0 {
			settled = true
			break
		}
		sleepUntil(ctx, time.Now().Add(200*time.Millisecond))
	}
	if settled {
		fmt.Printf("settled %.1fs after the chaos: no outbox row left, no job waiting or running\n", time.Since(settleStart).Seconds())
	} else {
		fmt.Printf("NOT settled %v after the chaos; the jobs not finished:\n", *settle)
		unfinished(ctx, sc)
	}

	c, err := count(ctx, sc, conn, mailFile)
	if err != nil {
		return fail("count: %v", err)
	}
	if !settled {
		// Every goroutine's stack into their logs, for reading why.
		for _, p := range []*proc{seppd, worker} {
			p.signal(syscall.SIGQUIT)
		}
		fmt.Printf("sent SIGQUIT to sepp serve and the worker: their logs end with their goroutines' stacks\n")
	}
	// Stop the processes before reading the logs for a diagnosis.
	for _, p := range procs {
		p.stop()
	}
	fmt.Println()
	bad := c.print(*nOrders)
	fmt.Println()
	edges(t, app.logPath, seppd.logPath, worker.logPath)
	if bad {
		c.diagnose(kills.list())
		return fail("not exactly once: see above")
	}
	if !settled {
		return fail("the jobs did not finish within %v (-settle)", *settle)
	}
	fmt.Println("\nOK: one order, one job, one mail and one ledger row per key")
	ok = true
	return 0
}

// slowDelete is the trigger that makes every DELETE from sepp_outbox sleep
// (%g: the seconds).
const slowDelete = `CREATE FUNCTION slow_outbox_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep(%g);
  RETURN NULL;
END $$;
CREATE TRIGGER slow_outbox_delete AFTER DELETE ON sepp_outbox
  FOR EACH STATEMENT EXECUTE FUNCTION slow_outbox_delete();`

// seppConfig is the server's config: a short lease on the queue, so a job
// whose worker was killed comes back in 2 s, and a short backoff, so one
// that failed while the server was away does too.
const seppConfig = `[server]
listen = %q

[storage]
path = %q

[[queues]]
name = %q
lease_ms = 2000
backoff_initial_ms = 200
backoff_max_ms = 2000

[[outboxes]]
name = "shop-db"
dialect = "postgres"
url_env = "APP_DATABASE_URL"
poll_interval_ms = 500
`

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	return 1
}

// ---- the orders

// tally counts the answers the clients got, and checks that every 201 of
// a key names the same order.
type tally struct {
	mu      sync.Mutex
	answers map[string]int
	orderOf map[string]string // key -> the order its first 201 named
	bad     []string
}

func newTally() *tally {
	return &tally{answers: map[string]int{}, orderOf: map[string]string{}}
}

func (t *tally) add(kind string) {
	t.mu.Lock()
	t.answers[kind]++
	t.mu.Unlock()
}

// created records a 201 for key naming order; it says whether it is the
// key's first.
func (t *tally) created(key, order string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if first, ok := t.orderOf[key]; !ok {
		t.orderOf[key] = order
	} else if first != order {
		t.bad = append(t.bad, fmt.Sprintf("key %s: a 201 named order %s, an earlier one %s", key, order, first))
	}
}

func (t *tally) problem(s string) {
	t.mu.Lock()
	t.bad = append(t.bad, s)
	t.mu.Unlock()
}

func (t *tally) answered() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.orderOf)
}

func (t *tally) problems() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.bad)
}

var answerKinds = []string{"201 created", "201 replayed", "409 in flight", "503 unavailable", "500", "no answer"}

func (t *tally) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := 0
	var parts []string
	for _, k := range answerKinds {
		if t.answers[k] > 0 {
			total += t.answers[k]
			parts = append(parts, fmt.Sprintf("%s %d", k, t.answers[k]))
		}
	}
	for k, n := range t.answers {
		if !slices.Contains(answerKinds, k) {
			total += n
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return fmt.Sprintf("%d sent: %s", total, strings.Join(parts, ", "))
}

// order sends order i the way a client that retries does: three copies at
// once (a double click and a proxy's retry), then one at a time until one
// is answered 201, then twice more, each of which must get the same order.
func order(ctx context.Context, c *http.Client, endpoint string, i int, t *tally) {
	key := fmt.Sprintf("order-%04d", i)
	body := fmt.Sprintf(`{"email":"customer%04d@example.com","cents":%d}`, i, 1000+i)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(ctx, c, endpoint, key, body, t)
		}()
	}
	wg.Wait()
	pause := func() { sleepUntil(ctx, time.Now().Add(time.Duration(100+rand.IntN(200))*time.Millisecond)) }
	for !t.has(key) && ctx.Err() == nil {
		if !send(ctx, c, endpoint, key, body, t) {
			pause()
		}
	}
	for n := 0; n < 2 && ctx.Err() == nil; {
		if send(ctx, c, endpoint, key, body, t) {
			n++
		} else {
			pause()
		}
	}
}

func (t *tally) has(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.orderOf[key]
	return ok
}

// send POSTs the order once and says whether it was answered 201.
func send(ctx context.Context, c *http.Client, endpoint, key, body string, t *tally) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			t.add("no answer")
		}
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusCreated:
		var o struct{ Order string }
		if err := json.Unmarshal(b, &o); err != nil || o.Order == "" {
			t.problem(fmt.Sprintf("key %s: a 201 without an order: %q", key, b))
			return false
		}
		if resp.Header.Get("Idempotent-Replayed") == "true" {
			t.add("201 replayed")
		} else {
			t.add("201 created")
		}
		t.created(key, o.Order)
		return true
	case http.StatusConflict:
		t.add("409 in flight")
	case http.StatusServiceUnavailable:
		t.add("503 unavailable")
	case http.StatusInternalServerError:
		t.add("500")
	default:
		t.add(resp.Status)
		t.problem(fmt.Sprintf("key %s: %s %s", key, resp.Status, bytes.TrimSpace(b)))
	}
	return false
}

// ---- the processes

type proc struct {
	name, dir, path, logPath string
	args, env                []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func newProc(name, dir, path string, args []string, env ...string) *proc {
	return &proc{name: name, dir: dir, path: path, args: args, env: env,
		logPath: filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".log")}
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "---- %s: start\n", time.Now().Format(time.StampMilli))
	cmd := exec.Command(p.path, p.args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		fmt.Fprintf(log, "---- %s: exited: %v\n", time.Now().Format(time.StampMilli), cmd.ProcessState)
		log.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone; it returns its
// pid.
func (p *proc) kill() int {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return 0
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	return cmd.Process.Pid
}

// signal sends sig to the process and waits up to 5 s for it to exit.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
	}
}

// stop asks the process to stop (SIGTERM), and kills it after 5 s.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

func (p *proc) exitedChan() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// kill is one SIGKILL, for the diagnosis of a duplicate.
type kill struct {
	name string
	pid  int
	at   time.Time
}

type killLog struct {
	mu    sync.Mutex
	kills []kill
}

func (k *killLog) add(name string, pid int) {
	k.mu.Lock()
	k.kills = append(k.kills, kill{name, pid, time.Now()})
	k.mu.Unlock()
}

func (k *killLog) list() []kill {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.kills)
}

func (k *killLog) summary() string {
	n := map[string]int{}
	for _, x := range k.list() {
		n[x.name]++
	}
	return fmt.Sprintf("the app %d times, sepp serve %d times, the worker %d times", n["app"], n["sepp serve"], n["worker"])
}

// supervise kills p at random moments until chaosEnd and starts it again
// after a random pause; it also starts p again when it exits on its own.
func supervise(ctx context.Context, p *proc, r *rand.Rand, chaosEnd time.Time, kills *killLog, start time.Time) {
	for ctx.Err() == nil {
		live := *killMin + time.Duration(r.Int64N(int64(*killMax-*killMin)+1))
		next := time.Now().Add(live)
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-p.exitedChan():
			timer.Stop()
			fmt.Printf("  %5.1fs  %s exited on its own (its log: %s); starting it again\n", time.Since(start).Seconds(), p.name, p.logPath)
			sleepUntil(ctx, time.Now().Add(200*time.Millisecond))
		case <-timer.C:
			if time.Now().After(chaosEnd) {
				return
			}
			pid := p.kill()
			kills.add(p.name, pid)
			if *verbose {
				fmt.Printf("  %5.1fs  SIGKILL %s (pid %d)\n", time.Since(start).Seconds(), p.name, pid)
			}
			sleepUntil(ctx, time.Now().Add(time.Duration(r.Int64N(int64(500*time.Millisecond)))))
		}
		if ctx.Err() != nil {
			return
		}
		if err := p.start(); err != nil {
			fmt.Printf("start %s: %v\n", p.name, err)
			return
		}
	}
}

// ---- settling and counting

// pending is the outbox rows left and the jobs not yet finished.
func pending(ctx context.Context, sc *sepp.Client, conn *pgx.Conn) (int64, error) {
	var rows int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM sepp_outbox`).Scan(&rows); err != nil {
		return 0, err
	}
	qs, err := sc.ListQueues(ctx)
	if err != nil {
		return 0, err
	}
	for _, q := range qs {
		if q.Name == mailsQueue {
			rows += q.Scheduled + q.Available + q.Reserved
		}
	}
	return rows, nil
}

// unfinished prints the jobs not yet completed, dead or cancelled.
func unfinished(ctx context.Context, sc *sepp.Client) {
	for _, st := range []sepp.JobState{sepp.JobStateScheduled, sepp.JobStateAvailable, sepp.JobStateReserved} {
		p, err := sc.ListJobs(ctx, sepp.ListJobsRequest{Queue: mailsQueue, State: st, PageSize: 20})
		if err != nil {
			fmt.Printf("  list %s jobs: %v\n", st, err)
			continue
		}
		for _, j := range p.Jobs {
			fmt.Printf("  %s  %s  attempts %d  run at %s  payload %s\n", j.ID, j.State, j.Attempts, j.RunAt.Format("15:04:05.000"), j.Payload)
		}
	}
}

type counts struct {
	orders, outboxLeft, outboxDead int64
	jobs                           int
	jobOrders                      map[string]int // order -> jobs
	jobStates                      map[sepp.JobState]int
	mails                          []mail
	mailOrders                     map[string]int
	ledger                         int64
	ledgerOrders                   int64
}

type mail struct {
	Order      string `json:"order"`
	Receipt    string `json:"receipt"`
	ReceivedAt string `json:"received_at"`
	PID        int    `json:"pid"`
	Job        string `json:"job"`
	Attempt    int    `json:"attempt"`
}

func count(ctx context.Context, sc *sepp.Client, conn *pgx.Conn, mailFile string) (*counts, error) {
	c := &counts{jobOrders: map[string]int{}, jobStates: map[sepp.JobState]int{}, mailOrders: map[string]int{}}
	for q, dst := range map[string]*int64{
		`SELECT count(*) FROM orders`:                 &c.orders,
		`SELECT count(*) FROM sepp_outbox`:            &c.outboxLeft,
		`SELECT count(*) FROM sepp_outbox_dead`:       &c.outboxDead,
		`SELECT count(*) FROM ledger`:                 &c.ledger,
		`SELECT count(DISTINCT order_id) FROM ledger`: &c.ledgerOrders,
	} {
		if err := conn.QueryRow(ctx, q).Scan(dst); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	page := ""
	for {
		p, err := sc.ListJobs(ctx, sepp.ListJobsRequest{Queue: mailsQueue, PageSize: 1000, PageToken: page})
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range p.Jobs {
			var o struct{ Order string }
			json.Unmarshal(j.Payload, &o)
			c.jobs++
			c.jobOrders[o.Order]++
			c.jobStates[j.State]++
		}
		if page = p.NextPageToken; page == "" {
			break
		}
	}
	f, err := os.Open(mailFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc2 := bufio.NewScanner(f)
	for sc2.Scan() {
		var m mail
		if err := json.Unmarshal(sc2.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("%s: %w", mailFile, err)
		}
		c.mails = append(c.mails, m)
		c.mailOrders[m.Order]++
	}
	return c, sc2.Err()
}

// print prints the counts and says whether one is off.
func (c *counts) print(n int) (bad bool) {
	line := func(name string, got int64, want int64, note string) {
		mark := ""
		if got != want {
			mark, bad = fmt.Sprintf("   <- want %d", want), true
		}
		fmt.Printf("%-17s %5d%s%s\n", name, got, note, mark)
	}
	line("orders", c.orders, int64(n), "")
	line("outbox rows left", c.outboxLeft, 0, "")
	if c.outboxDead != 0 {
		line("outbox dead rows", c.outboxDead, 0, "")
	}
	line("jobs", int64(c.jobs), int64(n), fmt.Sprintf("   (%s)", c.states()))
	line("mails", int64(len(c.mails)), int64(n), "")
	line("ledger rows", c.ledger, int64(n), "")
	// Each count per order, too: N of each could still hide a missing
	// order beside a doubled one.
	if int64(len(c.jobOrders)) != int64(n) || int64(len(c.mailOrders)) != int64(n) || c.ledgerOrders != int64(n) {
		fmt.Printf("orders with a job %d, with a mail %d, with a ledger row %d   <- want %d each\n", len(c.jobOrders), len(c.mailOrders), c.ledgerOrders, n)
		bad = true
	}
	if c.jobStates[sepp.JobStateCompleted] != n {
		bad = true
	}
	return bad
}

func (c *counts) states() string {
	var parts []string
	for _, s := range []sepp.JobState{sepp.JobStateCompleted, sepp.JobStateScheduled, sepp.JobStateAvailable, sepp.JobStateReserved, sepp.JobStateDead, sepp.JobStateCancelled} {
		if n := c.jobStates[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	return strings.Join(parts, ", ")
}

// edges prints how often each guard answered a repeat in this run, from
// the clients' tally and the processes' logs.
func edges(t *tally, appLog, seppLog, workerLog string) {
	read := func(path string) string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
	app, seppd, worker := read(appLog), read(seppLog), read(workerLog)
	relayHits := 0
	for _, line := range strings.Split(seppd, "\n") {
		if strings.Contains(line, `msg="dedup hit"`) && strings.Contains(line, "queue="+mailsQueue+" ") {
			relayHits++
		}
	}
	t.mu.Lock()
	replayed := t.answers["201 replayed"]
	t.mu.Unlock()
	fmt.Println("what each guard caught in this run:")
	for _, e := range []struct {
		n    int
		what string
	}{
		{replayed, "retries answered with the stored response (Idempotency-Key)"},
		{strings.Count(app, "order committed by an earlier run"), "handler runs that found their key's order committed (unique key column)"},
		{relayHits, "outbox rows enqueued again, a hit on their job (row id as key)"},
		{strings.Count(worker, "booked_now=false"), "deliveries that found the ledger row booked (inbox)"},
		{strings.Count(worker, "mail_replayed=true"), "deliveries that replayed the mail's receipt (effect key)"},
		{strings.Count(worker, "mail already at the sink"), "holders that found the mail sent by a holder that died (message id)"},
	} {
		fmt.Printf("  %5d  %s\n", e.n, e.what)
	}
}

// diagnose prints, for each order mailed more than once, its mails and
// the kills between them: the worker that sent a mail, killed before it
// stored the mail's receipt (had it stored it, the next holder would have
// replayed it), and sepp serve, whose restart delays that store.
func (c *counts) diagnose(kills []kill) {
	for order, n := range c.mailOrders {
		if n < 2 {
			continue
		}
		fmt.Printf("\norder %s was mailed %d times:\n", order, n)
		var mails []mail
		for _, m := range c.mails {
			if m.Order == order {
				mails = append(mails, m)
			}
		}
		for i, m := range mails {
			at, _ := time.Parse(time.RFC3339Nano, m.ReceivedAt)
			fmt.Printf("  %s  %-6s sent by worker pid %d (job %s, attempt %d)\n", at.Format("15:04:05.000000"), m.Receipt, m.PID, m.Job, m.Attempt)
			if i == len(mails)-1 {
				break
			}
			// The kills from this mail to its sender's death (or for 2 s,
			// if its sender lived on).
			until, _ := time.Parse(time.RFC3339Nano, mails[i+1].ReceivedAt)
			if lim := at.Add(2 * time.Second); lim.Before(until) {
				until = lim
			}
			for _, k := range kills {
				if k.name == "worker" && k.pid == m.PID && k.at.After(at) {
					until = k.at
					break
				}
			}
			for _, k := range kills {
				if k.at.Before(at) || k.at.After(until) {
					continue
				}
				ms := float64(k.at.Sub(at).Microseconds()) / 1000
				switch {
				case k.name == "worker" && k.pid == m.PID:
					fmt.Printf("  %s         worker pid %d killed, %.1f ms after %s, before it stored %s's receipt\n",
						k.at.Format("15:04:05.000000"), k.pid, ms, m.Receipt, m.Receipt)
				case k.name == "sepp serve":
					fmt.Printf("  %s         sepp serve killed, %.1f ms after %s\n", k.at.Format("15:04:05.000000"), ms, m.Receipt)
				}
			}
		}
	}
	for order, n := range c.jobOrders {
		if n > 1 {
			fmt.Printf("order %s has %d jobs\n", order, n)
		}
	}
}

// ---- PostgreSQL

func createDatabase(ctx context.Context, admin, name string) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

func dropDatabase(admin, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// execSQL runs a script of statements (the simple protocol takes many).
func execSQL(ctx context.Context, dbURL, script string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, script)
	return err
}

// ---- small things

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func waitReady(ctx context.Context, u string, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return cmp.Or(last, ctx.Err())
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
