package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A cluster is the Sepp nodes under test, each a real `sepp serve` process
// in a network namespace of its own, joined to the host by a veth pair:
//
//	host 10.231.<i>.1  <-- veth -->  10.231.<i>.2 node i (listens on :50051)
//
// The clients run in the host namespace and reach node i at
// 10.231.<i>.2:50051. PostgreSQL listens on the host's loopback only, so
// each node reaches it (the store's database on the PostgreSQL backend, the
// outbox's app database on both) through a forwarder the driver runs on
// 10.231.<i>.1:5432.
// Faults that cut or thin the network are nftables tables inside the node's
// namespace (nemesis.go); kills and pauses are signals to its process.
type cluster struct {
	opts  *options
	nodes []*node
	log   io.Writer // the driver's own log

	fwds []net.Listener
	wg   sync.WaitGroup // supervisors and forwarders
}

// node is one Sepp process and what the nemesis needs to know of it.
type node struct {
	i       int
	ns      string // network namespace
	hostIF  string // veth end in the host namespace
	hostIP  string
	nodeIP  string
	addr    string // host:port the clients dial
	dir     string // config, log, clock file; the data directory below it
	dataDir string
	cfgPath string
	clock   string // the test-only clock offset file (faults build)
	mount   string // the tmpfs the embedded store lives on ("" on PostgreSQL)

	mu       sync.Mutex
	stopped  bool // set by teardown: no more starts
	cmd      *exec.Cmd
	downTill time.Time // the supervisor waits until then before a restart
	paused   bool
	starts   int
	started  time.Time // when the running process started
	exits    []string  // how each run of the process ended
}

const nodePort = 50051

// appDBEnv is the environment variable that holds a node's URL of the
// outbox's app database (the url_env of its [[outboxes]] entry).
const appDBEnv = "SEPP_FAULTS_APP_DB"

// netPrefix names every namespace and link the driver makes, so a run can
// clear what an earlier, interrupted run left.
const netPrefix = "seppf"

func newCluster(o *options, logw io.Writer) (*cluster, error) {
	c := &cluster{opts: o, log: logw}
	clearNetwork()
	for i := 0; i < o.nodes; i++ {
		n := &node{
			i:      i,
			ns:     fmt.Sprintf("%s%d", netPrefix, i),
			hostIF: fmt.Sprintf("%sh%d", netPrefix, i),
			hostIP: fmt.Sprintf("10.231.%d.1", i+1),
			nodeIP: fmt.Sprintf("10.231.%d.2", i+1),
			dir:    filepath.Join(o.out, fmt.Sprintf("node%d", i)),
		}
		n.addr = fmt.Sprintf("%s:%d", n.nodeIP, nodePort)
		n.cfgPath = filepath.Join(n.dir, "sepp.toml")
		n.clock = filepath.Join(n.dir, "clock-offset-ms")
		n.dataDir = filepath.Join(n.dir, "data")
		c.nodes = append(c.nodes, n)
		if err := c.setupNode(n); err != nil {
			c.teardown()
			return nil, err
		}
	}
	return c, nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func runIn(ns string, args ...string) error {
	return run("ip", append([]string{"netns", "exec", ns}, args...)...)
}

// clearNetwork deletes the namespaces and links an earlier run left.
func clearNetwork() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], netPrefix) {
			_ = run("ip", "netns", "del", f[0])
		}
	}
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(links), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], netPrefix) {
			name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
			_ = run("ip", "link", "del", name)
		}
	}
}

func (c *cluster) setupNode(n *node) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	nsIF := fmt.Sprintf("%sn%d", netPrefix, n.i)
	steps := [][]string{
		{"ip", "netns", "add", n.ns},
		{"ip", "link", "add", n.hostIF, "type", "veth", "peer", "name", nsIF},
		{"ip", "link", "set", nsIF, "netns", n.ns},
		{"ip", "addr", "add", n.hostIP + "/30", "dev", n.hostIF},
		{"ip", "link", "set", n.hostIF, "up"},
		{"ip", "netns", "exec", n.ns, "ip", "addr", "add", n.nodeIP + "/30", "dev", nsIF},
		{"ip", "netns", "exec", n.ns, "ip", "link", "set", nsIF, "up"},
		{"ip", "netns", "exec", n.ns, "ip", "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return fmt.Errorf("network namespace for node %d (needs root and iproute2): %w", n.i, err)
		}
	}
	if err := os.WriteFile(n.clock, []byte("0\n"), 0o644); err != nil {
		return err
	}
	if c.opts.backend == backendEmbedded {
		// The embedded store on a small tmpfs, so the nemesis can fill it.
		n.mount = filepath.Join(n.dir, "disk")
		if err := os.MkdirAll(n.mount, 0o755); err != nil {
			return err
		}
		if err := run("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", c.opts.diskMB), "tmpfs", n.mount); err != nil {
			return fmt.Errorf("tmpfs for node %d's data: %w", n.i, err)
		}
		n.dataDir = filepath.Join(n.mount, "data")
	}
	if c.opts.backend == backendPostgres || c.opts.outbox {
		ln, err := net.Listen("tcp", net.JoinHostPort(n.hostIP, "5432"))
		if err != nil {
			return fmt.Errorf("PostgreSQL forwarder for node %d: %w", n.i, err)
		}
		c.fwds = append(c.fwds, ln)
		c.wg.Add(1)
		go func() { defer c.wg.Done(); forward(ln, c.opts.pgHostPort) }()
	}
	return os.WriteFile(n.cfgPath, []byte(c.nodeConfig(n)), 0o644)
}

// forward copies connections from ln to target until ln is closed. It
// ends each pair when either side does, as a router would not, so a
// PostgreSQL restart reaches the node as closed connections.
func forward(ln net.Listener, target string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			out, err := net.DialTimeout("tcp", target, 2*time.Second)
			if err != nil {
				in.Close()
				return
			}
			done := make(chan struct{}, 2)
			go func() { io.Copy(out, in); done <- struct{}{} }()
			go func() { io.Copy(in, out); done <- struct{}{} }()
			<-done
			in.Close()
			out.Close()
		}()
	}
}

func (c *cluster) nodeConfig(n *node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by the fault campaign for node %d\n", n.i)
	fmt.Fprintf(&b, "[server]\nlisten = %q\nallow_unauthenticated = true\nstrict = true\n\n", n.addr)
	b.WriteString("[storage]\n")
	if c.opts.backend == backendEmbedded {
		fmt.Fprintf(&b, "backend = \"embedded\"\npath = %q\n", n.dataDir)
	} else {
		fmt.Fprintf(&b, "backend = \"postgres\"\nurl = %q\npool_size = 8\n", c.opts.nodeDBURL(n.hostIP))
	}
	// Nothing is deleted by retention during a run, so the final state
	// holds every job; the sweep runs often, to release expired leases
	// and expire dedup records while faults go on.
	b.WriteString("sweep_interval_ms = 1000\ncompleted_retention_ms = 86400000\ndead_retention_ms = 86400000\n\n")
	if c.opts.outbox {
		// Every node relays the one outbox table of the app database.
		fmt.Fprintf(&b, "[[outboxes]]\nname = \"app\"\ndialect = \"postgres\"\nurl_env = %q\n\n", appDBEnv)
	}
	for _, q := range campaignQueues {
		fmt.Fprintf(&b, "[[queues]]\nname = %q\nlease_ms = %d\nmax_attempts = 50\nbackoff_initial_ms = 100\nbackoff_max_ms = 1000\n", q.Queue, leaseMS)
		if q.DedupWindowMS > 0 {
			fmt.Fprintf(&b, "dedup_window_ms = %d\n", q.DedupWindowMS)
		}
		if q.OnDuplicate != "" {
			fmt.Fprintf(&b, "on_duplicate = %q\n", q.OnDuplicate)
		}
		if q.DebounceMS > 0 {
			fmt.Fprintf(&b, "debounce_ms = %d\n", q.DebounceMS)
		}
		if q.WhenRunning != "" {
			fmt.Fprintf(&b, "when_running = %q\n", q.WhenRunning)
		}
		if q.RuleWindowMS > 0 {
			fmt.Fprintf(&b, "\n[[queues.rules]]\nname = \"per-account\"\nkey_fields = [\"/account\"]\nwindow_ms = %d\n", q.RuleWindowMS)
			if q.RuleLimit > 0 {
				fmt.Fprintf(&b, "limit = %d\n", q.RuleLimit)
			}
			if q.RuleAction != "" {
				fmt.Fprintf(&b, "action = %q\n", q.RuleAction)
			}
		}
		if q.ConcurrencyLimit > 0 {
			fmt.Fprintf(&b, "\n[queues.concurrency]\nkey_fields = [\"/account\"]\nlimit = %d\nordered = %t\n", q.ConcurrencyLimit, q.ConcurrencyOrdered)
		}
		if q.RateLimit > 0 {
			fmt.Fprintf(&b, "\n[queues.rate]\nkey_fields = [\"/account\"]\nlimit = %d\nperiod_ms = %d\n", q.RateLimit, q.RatePeriodMS)
		}
		b.WriteString("\n")
	}
	if c.opts.schedule {
		b.WriteString(scheduleConfig())
	}
	return b.String()
}

// start starts every node under its supervisor, which restarts a node
// whenever its process ends, until ctx ends.
func (c *cluster) start(ctx context.Context) {
	for _, n := range c.nodes {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.supervise(ctx, n) }()
	}
}

func (c *cluster) supervise(ctx context.Context, n *node) {
	logf, err := os.OpenFile(filepath.Join(n.dir, "sepp.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintf(c.log, "node %d: log: %v\n", n.i, err)
		return
	}
	defer logf.Close()
	for ctx.Err() == nil {
		n.mu.Lock()
		wait := time.Until(n.downTill)
		n.mu.Unlock()
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue // the nemesis may have moved downTill
		}
		cmd := exec.Command("ip", "netns", "exec", n.ns, c.opts.sepp, "serve", "--config", n.cfgPath, "--log-format", "json")
		cmd.Env = append(os.Environ(), "SEPP_FAULT_CLOCK_FILE="+n.clock)
		if c.opts.outbox {
			cmd.Env = append(cmd.Env, appDBEnv+"="+c.opts.nodeAppURL(n.hostIP))
		}
		if c.opts.broken != "" {
			cmd.Env = append(cmd.Env, "SEPP_FAULT_BROKEN="+c.opts.broken)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		// A node dies with the driver, however the driver ends (ip netns
		// exec execs sepp, which keeps the setting).
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		// Started under n.mu, after a last look at stopped: teardown, which
		// sets stopped under n.mu, then kills whatever n.cmd is.
		n.mu.Lock()
		if n.stopped || ctx.Err() != nil {
			n.mu.Unlock()
			return
		}
		fmt.Fprintf(logf, "--- campaign: start %d at %s\n", n.starts+1, time.Now().UTC().Format(time.RFC3339Nano))
		if err := cmd.Start(); err != nil {
			n.mu.Unlock()
			fmt.Fprintf(c.log, "node %d: start: %v\n", n.i, err)
			time.Sleep(time.Second)
			continue
		}
		n.cmd, n.paused = cmd, false
		n.starts++
		n.started = time.Now()
		n.mu.Unlock()
		err := cmd.Wait()
		n.mu.Lock()
		n.cmd = nil
		how := "exit 0"
		if err != nil {
			how = err.Error()
		}
		n.exits = append(n.exits, how)
		if time.Until(n.downTill) < 300*time.Millisecond {
			n.downTill = time.Now().Add(300 * time.Millisecond) // no busy loop when a start fails
		}
		n.mu.Unlock()
	}
}

// signal sends sig to n's process, if it runs.
func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return errors.New("not running")
	}
	if sig == syscall.SIGSTOP {
		n.paused = true
	}
	if sig == syscall.SIGCONT {
		n.paused = false
	}
	return n.cmd.Process.Signal(sig)
}

// kill SIGKILLs n's process and keeps it down for down.
func (n *node) kill(down time.Duration) error {
	n.mu.Lock()
	n.downTill = time.Now().Add(down)
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return errors.New("not running")
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process dies all the same; resume is harmless
	return cmd.Process.Kill()
}

// waitDown waits until n's process has exited (the supervisor's Wait
// returned), at most limit.
func (n *node) waitDown(limit time.Duration) error {
	for deadline := time.Now().Add(limit); ; {
		n.mu.Lock()
		down := n.cmd == nil
		n.mu.Unlock()
		if down {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still running %v after SIGKILL", limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the nodes for good (the supervisors end with ctx) and removes
// what the cluster made.
func (c *cluster) teardown() {
	for _, n := range c.nodes {
		n.mu.Lock()
		n.stopped = true
		n.downTill = time.Now().Add(time.Hour)
		if n.cmd != nil && n.cmd.Process != nil {
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			_ = n.cmd.Process.Kill()
		}
		n.mu.Unlock()
	}
	for _, ln := range c.fwds {
		ln.Close()
	}
	c.wg.Wait()
	for _, n := range c.nodes {
		if n.mount != "" {
			_ = run("umount", "-l", n.mount)
		}
	}
	clearNetwork()
}
