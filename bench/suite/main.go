// Command suite runs Sepp's side-by-side benchmark suite: Sepp on its
// embedded store (Pebble) and on PostgreSQL (a `sepp serve` built from this repository, driven through
// the Go SDK), River on PostgreSQL, Asynq on Redis (the machine's, and one it
// starts with appendfsync always) and NATS JetStream, on workloads W0–W6,
// one system after another. It writes the section between
// `<!-- suite:begin -->` and `<!-- suite:end -->` of docs/benchmarks.md and
// the chart docs/benchmarks-suite.png.
//
// Run it from the repository root (go.work makes this module visible):
//
//	go run ./bench/suite
//
// Every address is on loopback; every loop is bounded; the whole run is
// under -timeout.
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
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	seppBin     string
	tmpRoot     string
	payload     []byte
	payloadStr  string
	quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))
	scale       = 1.0
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "suite:", err)
		os.Exit(1)
	}
}

func run() error {
	timeout := flag.Duration("timeout", 90*time.Minute, "bound on the whole run")
	flag.Float64Var(&scale, "scale", 1, "multiply every workload's size (for a quick try: 0.05)")
	only := flag.String("systems", "", "comma-separated system names to run (default: all)")
	onlyW := flag.String("workloads", "", "comma-separated workloads to run: W0,W1,W2,W3,W4b100,W4b1000,W5 (W5 includes W6),W3aged,W1rule,W3conc (default: all)")
	doc := flag.String("doc", "docs/benchmarks.md", "markdown file whose suite section is rewritten (empty: print only)")
	flag.Parse()
	if _, err := os.Stat("cmd/sepp"); err != nil {
		return fmt.Errorf("run from the repository root (go run ./bench/suite): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var err error
	if tmpRoot, err = os.MkdirTemp("", "sepp-suite-"); err != nil {
		return err
	}
	defer os.RemoveAll(tmpRoot)
	seppBin = filepath.Join(tmpRoot, "sepp")
	progress("building %s", seppBin)
	if out, err := exec.Command("go", "build", "-o", seppBin, "./cmd/sepp").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/sepp: %v\n%s", err, out)
	}
	payload = make([]byte, 256)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	payloadStr = string(payload)

	pgVer := pgShow(ctx, "SHOW server_version")
	syncCommit := pgShow(ctx, "SHOW synchronous_commit")
	systems := []*system{
		{name: "Sepp Pebble", sepp: true, fsync: true, durability: "fsync per group commit", version: "sepp (this repo), Pebble v2 (the embedded default)",
			start: func(ctx context.Context, s *system) (instance, error) { return startSepp(ctx, "embedded", "") }},
		{name: "Sepp PostgreSQL", sepp: true, fsync: true, durability: "synchronous_commit " + syncCommit, version: "sepp (this repo), PostgreSQL " + pgVer,
			start: func(ctx context.Context, s *system) (instance, error) { return startSepp(ctx, "postgres", "") }},
		{name: "River", fsync: true, durability: "synchronous_commit " + syncCommit, version: "river v0.51.2 (riverpgxv5), PostgreSQL " + pgVer,
			start: startRiver},
		{name: "Asynq", durability: "Redis default", start: startAsynq("127.0.0.1:6379", false)},
		{name: "Asynq fsync", fsync: true, durability: "appendfsync always", start: startAsynq("127.0.0.1:6390", true)},
		{name: "NATS JetStream", durability: "NATS default sync (fsync on a background timer, not per write)", start: startNATS("127.0.0.1:4222")},
	}
	if *only != "" {
		want := strings.Split(*only, ",")
		systems = slices.DeleteFunc(systems, func(s *system) bool { return !slices.Contains(want, s.name) })
	}

	res := &results{rows: map[string]map[string]*cell{}}
	for _, s := range systems {
		res.rows[s.name] = map[string]*cell{}
		for _, w := range workloads {
			if *onlyW != "" && !slices.Contains(strings.Split(*onlyW, ","), w.id) {
				continue
			}
			if w.id == "W4b1000" || w.id == "W4b100" {
				if s.name == "Asynq" || s.name == "Asynq fsync" || s.name == "NATS JetStream" {
					res.rows[s.name][w.id] = &cell{text: "no batch API"}
					continue
				}
			}
			progress("%s: %s", s.name, w.title)
			c := runWorkload(ctx, s, w)
			res.rows[s.name][w.id] = c
			progress("%s: %s: %s", s.name, w.id, c.text)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	var memRows []memRow
	var sweepRows []sweepRow
	var agedRows []agedRow
	var ruleRows []ruleRow
	var concRows []concRow
	for _, s := range systems {
		if !s.sepp {
			continue
		}
		backend := "embedded"
		if strings.Contains(s.name, "PostgreSQL") {
			backend = "postgres"
		}
		// W3 on an aged queue measures the embedded store's indexes; the
		// PostgreSQL backend's reserve is another matter.
		if backend == "embedded" && (*onlyW == "" || slices.Contains(strings.Split(*onlyW, ","), "W3aged")) {
			progress("%s: W3 on a queue that processed %d jobs", s.name, n(1_000_000))
			a, err := runAged(ctx, backend)
			if err != nil {
				a.err = err.Error()
			}
			a.system = s.name
			agedRows = append(agedRows, a)
			progress("%s: W3aged: %+v", s.name, a)
		}
		if *onlyW == "" || slices.Contains(strings.Split(*onlyW, ","), "W1rule") {
			progress("%s: W1 with a uniqueness rule on the queue", s.name)
			r, err := runRuleCost(ctx, backend)
			if err != nil {
				r.err = err.Error()
			}
			r.system = s.name
			ruleRows = append(ruleRows, r)
			progress("%s: W1rule: %+v", s.name, r)
		}
		if *onlyW == "" || slices.Contains(strings.Split(*onlyW, ","), "W3conc") {
			progress("%s: W3 with per-key concurrency", s.name)
			r, err := runConcurrency(ctx, backend)
			if err != nil {
				r.err = err.Error()
			}
			r.system = s.name
			concRows = append(concRows, r)
			progress("%s: W3conc: %+v", s.name, r)
		}
		if *onlyW != "" && !slices.Contains(strings.Split(*onlyW, ","), "W5") {
			continue
		}
		progress("%s: W5 dedup memory, %d live keys", s.name, n(1_000_000))
		m, err := runW5(ctx, backend)
		if err != nil {
			m.err = err.Error()
		}
		m.system = s.name
		memRows = append(memRows, m)
		progress("%s: W5: %+v", s.name, m)
		progress("%s: W6 sweep cost", s.name)
		sw, err := runW6(ctx, backend)
		if err != nil {
			sw.err = err.Error()
		}
		sw.system = s.name
		sweepRows = append(sweepRows, sw)
		progress("%s: W6: %+v", s.name, sw)
	}
	section := report(systems, res, memRows, sweepRows, agedRows, ruleRows, concRows)
	if *doc == "" {
		fmt.Println(section)
		return nil
	}
	if err := chart(systems, res, filepath.Join(filepath.Dir(*doc), "benchmarks-suite.png")); err != nil {
		progress("chart: %v", err)
	}
	if err := writeSection(*doc, section); err != nil {
		return err
	}
	progress("wrote %s and docs/benchmarks-suite.png", *doc)
	return nil
}

var started = time.Now()

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

func n(x int) int { return max(1, int(float64(x)*scale)) }

// ---------- workloads W0–W4 ----------

type workload struct {
	id, title string
	run       func(ctx context.Context, inst instance) *cell
}

// cell is one system's result on one workload.
type cell struct {
	rate     float64 // calls/s or jobs/s (0: none)
	p50, p99 time.Duration
	stored   int
	failed   bool
	text     string
	// cpuPerCall is the server process's CPU time (user and system) over
	// the workload divided by its calls, for Sepp (0: not measured).
	cpuPerCall time.Duration
}

var workloads = []workload{
	{"W0", "W0 one producer, 2,000 keyed enqueues", func(ctx context.Context, inst instance) *cell {
		return enqueueLoad(ctx, inst, uniqueKeys(n(2000)), 1, n(2000))
	}},
	{"W1", "W1 32 producers, 100,000 unique keyed enqueues", func(ctx context.Context, inst instance) *cell {
		si, ok := inst.(*seppInstance)
		if !ok {
			return enqueueLoad(ctx, inst, uniqueKeys(n(100_000)), 32, n(100_000))
		}
		before := processCPU(si.pid)
		c := enqueueLoad(ctx, inst, uniqueKeys(n(100_000)), 32, n(100_000))
		if !c.failed {
			c.cpuPerCall = (processCPU(si.pid) - before) / time.Duration(n(100_000))
			c.text += fmt.Sprintf(", server CPU %.1f µs/call", float64(c.cpuPerCall)/float64(time.Microsecond))
		}
		return c
	}},
	{"W2", "W2 32 producers, 100,000 enqueues over 20,000 keys x5", func(ctx context.Context, inst instance) *cell {
		k := n(20_000)
		keys := make([]int, 0, 5*k)
		for range 5 {
			for i := range k {
				keys = append(keys, i)
			}
		}
		mrand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		return enqueueLoad(ctx, inst, keys, 32, k)
	}},
	{"W3", "W3 enqueue 50,000 then process with 32 workers", func(ctx context.Context, inst instance) *cell {
		return w3(ctx, inst)
	}},
	{"W4b100", "W4 batch keyed enqueue, batches of 100", func(ctx context.Context, inst instance) *cell { return batchLoad(ctx, inst, 100) }},
	{"W4b1000", "W4 batch keyed enqueue, batches of 1,000", func(ctx context.Context, inst instance) *cell { return batchLoad(ctx, inst, 1000) }},
}

// w3 enqueues 50,000 unique keyed jobs, then times their processing by 32
// workers.
func w3(ctx context.Context, inst instance) *cell {
	N := n(50_000)
	c := enqueueLoad(ctx, inst, uniqueKeys(N), 32, N)
	if c.failed {
		return c
	}
	el, err := inst.process(ctx, N, 32)
	if err != nil {
		return &cell{failed: true, text: "FAILED: " + err.Error()}
	}
	r := float64(N) / el.Seconds()
	return &cell{rate: r, text: fmt.Sprintf("%.0f jobs/s", r)}
}

func runWorkload(ctx context.Context, s *system, w workload) *cell {
	inst, err := s.start(ctx, s)
	if err != nil {
		return &cell{failed: true, text: "FAILED to start: " + err.Error()}
	}
	defer inst.close()
	return w.run(ctx, inst)
}

func uniqueKeys(n int) []int {
	k := make([]int, n)
	for i := range k {
		k[i] = i
	}
	return k
}

// enqueueLoad sends one keyed enqueue per entry of keys from c producers and
// checks that exactly want jobs were created and stored.
func enqueueLoad(ctx context.Context, inst instance, keys []int, c, want int) *cell {
	before, err := inst.stored(ctx)
	if err != nil {
		return &cell{failed: true, text: "FAILED counting: " + err.Error()}
	}
	run := randomHex(4)
	lat := make([]time.Duration, len(keys))
	var next, created, failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(keys) || ctx.Err() != nil {
					return
				}
				octx, cancel := context.WithTimeout(ctx, 60*time.Second)
				t := time.Now()
				ok, err := inst.enqueue(octx, fmt.Sprintf("k-%s-%d", run, keys[i]))
				lat[i] = time.Since(t)
				cancel()
				if err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
				} else if ok {
					created.Add(1)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if failed.Load() > 0 {
		return &cell{failed: true, text: fmt.Sprintf("FAILED: %d errors, first: %v", failed.Load(), firstErr)}
	}
	stored, err := inst.stored(ctx)
	if err != nil {
		return &cell{failed: true, text: "FAILED counting: " + err.Error()}
	}
	stored -= before
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	cl := &cell{rate: float64(len(keys)) / el.Seconds(), p50: pct(0.5), p99: pct(0.99), stored: stored}
	cl.text = fmt.Sprintf("%.0f calls/s, p50 %s, p99 %s, stored %d", cl.rate, fmtDur(cl.p50), fmtDur(cl.p99), stored)
	if stored != want || int(created.Load()) != want {
		cl.failed = true
		cl.text = fmt.Sprintf("FAILED: stored %d, created %d, want %d (%s)", stored, created.Load(), want, cl.text)
	}
	return cl
}

// batchLoad enqueues 100,000 unique keyed jobs in batches of size from 4
// producers.
func batchLoad(ctx context.Context, inst instance, size int) *cell {
	N := n(100_000)
	run := randomHex(4)
	nb := (N + size - 1) / size
	var next, created atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range 4 {
		wg.Go(func() {
			for {
				b := int(next.Add(1) - 1)
				if b >= nb || ctx.Err() != nil {
					return
				}
				keys := make([]string, 0, size)
				for i := b * size; i < min(N, (b+1)*size); i++ {
					keys = append(keys, fmt.Sprintf("k-%s-%d", run, i))
				}
				octx, cancel := context.WithTimeout(ctx, 120*time.Second)
				c, err := inst.enqueueBatch(octx, keys)
				cancel()
				created.Add(int64(c))
				if err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return &cell{failed: true, text: "FAILED: " + firstErr.Error()}
	}
	stored, err := inst.stored(ctx)
	if err != nil {
		return &cell{failed: true, text: "FAILED counting: " + err.Error()}
	}
	r := float64(N) / el.Seconds()
	cl := &cell{rate: r, stored: stored, text: fmt.Sprintf("%.0f jobs/s, stored %d", r, stored)}
	if stored != N || int(created.Load()) != N {
		cl.failed = true
		cl.text = fmt.Sprintf("FAILED: stored %d, created %d, want %d", stored, created.Load(), N)
	}
	return cl
}

// ---------- W5, W6 (Sepp only) ----------

type memRow struct {
	system              string
	keys                int
	rssBefore, rssAfter int64 // bytes
	disk                int64 // data dir, or database size
	dedupRel            int64 // pg_total_relation_size(sepp_dedup), postgres only
	err                 string
}

// loadKeys enqueues n unique keyed jobs in batches of 1,000 from 4
// producers, on queue, with body as each job's payload.
func loadKeys(ctx context.Context, inst *seppInstance, queue string, N int, body []byte) error {
	saved, savedBody := inst.queue, inst.payload
	inst.queue, inst.payload = queue, body
	defer func() { inst.queue, inst.payload = saved, savedBody }()
	run := randomHex(4)
	const size = 1000
	nb := (N + size - 1) / size
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				b := int(next.Add(1) - 1)
				if b >= nb || ctx.Err() != nil {
					return
				}
				if b%100 == 0 {
					progress("  loading keys: %d of %d", b*size, N)
				}
				keys := make([]string, 0, size)
				for i := b * size; i < min(N, (b+1)*size); i++ {
					keys = append(keys, fmt.Sprintf("m-%s-%d", run, i))
				}
				octx, cancel := context.WithTimeout(ctx, 120*time.Second)
				_, err := inst.enqueueBatch(octx, keys)
				cancel()
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

func runW5(ctx context.Context, backend string) (memRow, error) {
	m := memRow{keys: n(1_000_000)}
	inst, err := startSepp(ctx, backend, "")
	if err != nil {
		return m, err
	}
	defer inst.close()
	m.rssBefore = vmRSS(inst.pid)
	if err := loadKeys(ctx, inst, "w5", m.keys, nil); err != nil {
		return m, err
	}
	q, err := inst.queueInfo(ctx, "w5")
	if err != nil {
		return m, err
	}
	if int(q.DedupRecords) != m.keys {
		return m, fmt.Errorf("%d dedup records, want %d", q.DedupRecords, m.keys)
	}
	m.rssAfter = vmRSS(inst.pid)
	if backend != "postgres" {
		m.disk = dirSize(inst.dir)
	} else {
		m.disk, _ = pgQueryInt(ctx, inst.dbName, "SELECT pg_database_size(current_database())")
		m.dedupRel, _ = pgQueryInt(ctx, inst.dbName, "SELECT pg_total_relation_size('sepp_dedup')")
	}
	return m, nil
}

// ruleRow is W1 with JSON payloads on a queue without, and with, one
// [[queues.rules]] rule.
type ruleRow struct {
	system         string
	base, withRule float64 // W1 calls/s
	err            string
}

// ruleConfig declares the W1 queue with a rule on two payload fields that
// every job has distinct values in (so every enqueue creates a job and a
// rule record).
const ruleConfig = `
[[queues]]
name = "bench"

[[queues.rules]]
name = "same-account-same-amount"
key_fields = ["/account", "/amount"]
window_ms = 60000
`

// runRuleCost runs W1 twice on fresh servers, with the same JSON payloads
// (256 bytes, an account and an amount from the key), without and with the
// rule.
func runRuleCost(ctx context.Context, backend string) (ruleRow, error) {
	var r ruleRow
	jsonPayload := func(key string) []byte {
		b := fmt.Appendf(nil, `{"account":"acc-%s","amount":%d,"pad":"`, key, len(key))
		for len(b) < 254 {
			b = append(b, 'x')
		}
		return append(b, '"', '}')
	}
	for _, conf := range []string{"", ruleConfig} {
		inst, err := startSepp(ctx, backend, conf)
		if err != nil {
			return r, err
		}
		inst.payloadFor = jsonPayload
		c := enqueueLoad(ctx, inst, uniqueKeys(n(100_000)), 32, n(100_000))
		inst.close()
		if c.failed {
			return r, fmt.Errorf("W1 (rule %v): %s", conf != "", c.text)
		}
		if conf == "" {
			r.base = c.rate
		} else {
			r.withRule = c.rate
		}
	}
	return r, nil
}

// agedRow is W3 on a fresh queue against W3 on a queue that first
// processed aged jobs, on one server.
type agedRow struct {
	system        string
	aged          int
	fresh, after  float64 // W3 jobs/s
	agingDuration time.Duration
	err           string
}

// runAged runs W3 on a fresh server, then on a second fresh server whose
// queue first took and processed 1,000,000 jobs (loaded in batches, then
// handled by the same 32 workers), so that every index W3 reads from its
// head starts behind a million entries already taken.
func runAged(ctx context.Context, backend string) (agedRow, error) {
	a := agedRow{aged: n(1_000_000)}
	inst, err := startSepp(ctx, backend, "")
	if err != nil {
		return a, err
	}
	c := w3(ctx, inst)
	inst.close()
	if c.failed {
		return a, fmt.Errorf("W3 fresh: %s", c.text)
	}
	a.fresh = c.rate
	if inst, err = startSepp(ctx, backend, ""); err != nil {
		return a, err
	}
	defer inst.close()
	t0 := time.Now()
	for done := 0; done < a.aged; {
		step := min(a.aged-done, 100_000)
		if err := loadKeys(ctx, inst, inst.queue, step, payload); err != nil {
			return a, err
		}
		if _, err := inst.process(ctx, step, 32); err != nil {
			return a, fmt.Errorf("aging: %w", err)
		}
		done += step
		progress("  aged %d of %d", done, a.aged)
	}
	a.agingDuration = time.Since(t0)
	if c = w3(ctx, inst); c.failed {
		return a, fmt.Errorf("W3 after aging: %s", c.text)
	}
	a.after = c.rate
	return a, nil
}

type sweepRow struct {
	system            string
	expiring          int
	base, withSweep   float64 // W1 calls/s
	expiredDuringRun  int64
	windowMs, sweepMs int
	err               string
}

// runW6 measures W1 on a fresh server (base), then on a server whose default
// dedup window is short, right when the 1,000,000 keys loaded into it start
// to expire (W1's queue keeps a 24 h window).
func runW6(ctx context.Context, backend string) (sweepRow, error) {
	sw := sweepRow{expiring: n(1_000_000), windowMs: 30_000, sweepMs: 200}
	base, err := startSepp(ctx, backend, "")
	if err != nil {
		return sw, err
	}
	c := enqueueLoad(ctx, base, uniqueKeys(n(100_000)), 32, n(100_000))
	base.close()
	if c.failed {
		return sw, fmt.Errorf("W1 base: %s", c.text)
	}
	sw.base = c.rate
	conf := fmt.Sprintf("[storage]\ndedup_window_ms = %d\nsweep_interval_ms = %d\n\n[[queues]]\nname = \"bench\"\ndedup_window_ms = 86400000\n\n[[queues]]\nname = \"expiring\"\n",
		sw.windowMs, sw.sweepMs)
	inst, err := startSepp(ctx, backend, conf)
	if err != nil {
		return sw, err
	}
	defer inst.close()
	t0 := time.Now()
	if err := loadKeys(ctx, inst, "expiring", sw.expiring, payload); err != nil {
		return sw, err
	}
	progress("  loaded %d expiring keys in %v; W1 starts when the first expire", sw.expiring, time.Since(t0).Round(time.Millisecond))
	if d := time.Until(t0.Add(time.Duration(sw.windowMs) * time.Millisecond)); d > 0 {
		time.Sleep(d)
	}
	q0, err := inst.queueInfo(ctx, "expiring")
	if err != nil {
		return sw, err
	}
	c = enqueueLoad(ctx, inst, uniqueKeys(n(100_000)), 32, n(100_000))
	if c.failed {
		return sw, fmt.Errorf("W1 during expiry: %s", c.text)
	}
	q1, err := inst.queueInfo(ctx, "expiring")
	if err != nil {
		return sw, err
	}
	sw.withSweep = c.rate
	sw.expiredDuringRun = q0.DedupRecords - q1.DedupRecords
	return sw, nil
}

// processCPU is the user and system CPU time process pid has used, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from after it.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscanf(f[11], "%d", &utime)
	fmt.Sscanf(f[12], "%d", &stime)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb * 1024
		}
	}
	return 0
}

func dirSize(dir string) int64 {
	var total int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			total += fi.Size()
		}
		return nil
	})
	return total
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
