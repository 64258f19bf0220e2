package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp/test/faults/history"
)

// The kinds of fault the nemesis injects.
const (
	faultKill        = "kill"         // SIGKILL a node; its supervisor starts it again after a while
	faultPause       = "pause"        // SIGSTOP a node past its leases, then SIGCONT
	faultPartitionDB = "partition-db" // cut one node from PostgreSQL (both directions)
	faultPartitionCl = "partition-client"
	faultLoss        = "loss"       // drop 30 % of one node's packets, both directions
	faultPGRestart   = "pg-restart" // restart PostgreSQL itself
	faultClockSkew   = "clock-skew" // step one node's wall clock by seconds
	faultDiskFull    = "disk-full"  // fill the embedded store's file system
	faultLogDelete   = "log-delete" // SIGKILL a node and delete an older write-ahead log while it is down
	// End the outbox relays' app-database sessions in mid-pass, between
	// their claim and their commit (with the outbox only).
	faultRelayAbort = "relay-abort"
)

// faultKinds lists every kind, and which backends it applies to.
var faultKinds = []struct {
	name     string
	backends []string
}{
	{faultKill, []string{backendEmbedded, backendPostgres}},
	{faultPause, []string{backendEmbedded, backendPostgres}},
	{faultPartitionCl, []string{backendEmbedded, backendPostgres}},
	{faultLoss, []string{backendEmbedded, backendPostgres}},
	{faultDiskFull, []string{backendEmbedded}},
	{faultLogDelete, []string{backendEmbedded}},
	{faultPartitionDB, []string{backendPostgres}},
	{faultPGRestart, []string{backendPostgres}},
	{faultClockSkew, []string{backendPostgres}},
	{faultRelayAbort, []string{backendEmbedded, backendPostgres}},
}

// defaultFaults is every kind that applies to backend.
func defaultFaults(backend string) []string {
	var out []string
	for _, k := range faultKinds {
		for _, b := range k.backends {
			if b == backend {
				out = append(out, k.name)
			}
		}
	}
	return out
}

func parseFaults(s, backend string) ([]string, error) {
	if s == "" || s == "all" {
		return defaultFaults(backend), nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		known := false
		for _, k := range faultKinds {
			if k.name == f {
				known = true
				if !contains(k.backends, backend) {
					return nil, fmt.Errorf("fault %q does not apply to the %s backend (it applies to %s)", f, backend, strings.Join(k.backends, ", "))
				}
			}
		}
		if !known {
			return nil, fmt.Errorf("unknown fault %q; the kinds are %s", f, strings.Join(defaultFaults(backendEmbedded), ", ")+", "+strings.Join([]string{faultPartitionDB, faultPGRestart, faultClockSkew}, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// faultEvent is one fault in the nemesis log (faults.jsonl).
type faultEvent struct {
	Kind   string    `json:"kind"`
	Node   int       `json:"node"` // -1: not one node's (PostgreSQL)
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Detail string    `json:"detail,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// nemesis injects one fault at a time, every kind in turn in a shuffled
// order, on a node chosen at random: it applies it, holds it, heals it, waits, and
// starts over until ctx ends.
type nemesis struct {
	c      *cluster
	kinds  []string
	deck   []string // the kinds still to deal this round (next)
	every  time.Duration
	rng    *rand.Rand
	log    io.Writer
	events *json.Encoder

	mu      sync.Mutex
	counts  map[string]int
	errs    map[string]int
	aborted int           // relay sessions relay-abort ended in its last hold
	losses  []pendingLoss // the logs log-delete deleted, for the history (losses)
}

// pendingLoss is a log the nemesis deleted: the history's Loss without
// what the node's recovery said, which is read from its log after the run,
// from offset (the log's size when the node was down).
type pendingLoss struct {
	loss    history.Loss
	nodeLog string
	offset  int64
}

func (nm *nemesis) run(ctx context.Context) {
	for {
		gap := nm.every/4 + time.Duration(nm.rng.Int64N(int64(nm.every/2)+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		kind := nm.next()
		n := nm.c.nodes[nm.rng.IntN(len(nm.c.nodes))]
		hold := nm.every/4 + time.Duration(nm.rng.Int64N(int64(nm.every)+1))
		if kind == faultDiskFull {
			hold *= 3 // the store writes into space it holds already; it takes a while to need more
		}
		ev := faultEvent{Kind: kind, Node: n.i, Start: time.Now()}
		heal, detail, err := nm.apply(kind, n, hold)
		ev.Detail = detail
		if err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(hold):
			}
			if heal != nil {
				err = heal()
			}
		}
		ev.End = time.Now()
		if kind == faultPGRestart || kind == faultRelayAbort {
			ev.Node = -1
		}
		if kind == faultRelayAbort {
			nm.mu.Lock()
			ev.Detail = fmt.Sprintf("ended %d relay sessions in mid-pass", nm.aborted)
			nm.mu.Unlock()
		}
		if err != nil {
			ev.Error = err.Error()
		}
		nm.mu.Lock()
		nm.counts[kind]++
		if err != nil {
			nm.errs[kind]++
		}
		_ = nm.events.Encode(ev)
		nm.mu.Unlock()
		if err != nil {
			fmt.Fprintf(nm.log, "nemesis: %s on node %d: %v\n", kind, n.i, err)
		}
	}
}

// next deals the next kind from a shuffled deck of every kind, dealt anew
// when it runs out, so a short run has every kind (a run of n faults has
// each kind at least n/len(kinds) rounded down times).
func (nm *nemesis) next() string {
	if len(nm.deck) == 0 {
		nm.deck = append(nm.deck, nm.kinds...)
		nm.rng.Shuffle(len(nm.deck), func(i, j int) { nm.deck[i], nm.deck[j] = nm.deck[j], nm.deck[i] })
	}
	k := nm.deck[0]
	nm.deck = nm.deck[1:]
	return k
}

// apply injects one fault and returns how to heal it.
func (nm *nemesis) apply(kind string, n *node, hold time.Duration) (heal func() error, detail string, err error) {
	switch kind {
	case faultKill:
		return nil, fmt.Sprintf("down %v", hold.Round(time.Millisecond)), n.kill(hold)
	case faultPause:
		if err := n.signal(syscall.SIGSTOP); err != nil {
			return nil, "", err
		}
		return func() error { return n.signal(syscall.SIGCONT) }, "", nil
	case faultPartitionCl:
		return nm.nft(n, "sepp_clients", fmt.Sprintf("tcp dport %d drop", nodePort), fmt.Sprintf("tcp sport %d drop", nodePort))
	case faultPartitionDB:
		return nm.nft(n, "sepp_db", "tcp sport 5432 drop", "tcp dport 5432 drop")
	case faultLoss:
		return nm.nft(n, "sepp_loss", "numgen random mod 100 < 30 drop", "numgen random mod 100 < 30 drop")
	case faultPGRestart:
		// In a process group of its own, so a Ctrl-C meant for the
		// campaign does not stop PostgreSQL half restarted.
		cmd := exec.Command("sh", "-c", nm.c.opts.pgRestart)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w: %s", nm.c.opts.pgRestart, err, strings.TrimSpace(string(out)))
		}
		return nil, "", nil
	case faultRelayAbort:
		return nm.abortRelays()
	case faultClockSkew:
		ms := (2000 + nm.rng.Int64N(18000)) * int64(1-2*nm.rng.IntN(2))
		if err := writeClock(n, ms); err != nil {
			return nil, "", err
		}
		return func() error { return writeClock(n, 0) }, fmt.Sprintf("offset %+d ms", ms), nil
	case faultLogDelete:
		// A store has a log older than the newest only once its first
		// memtable filled since it started (a few seconds of load): wait
		// for that, a while, so that the fault has something to delete.
		for deadline := time.Now().Add(3 * nm.every); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if logs, _ := n.logsWritten(); len(logs) >= 2 {
				break
			}
		}
		if err := n.kill(hold); err != nil {
			return nil, "", err
		}
		if err := n.waitDown(10 * time.Second); err != nil {
			return nil, "", err
		}
		detail, err := nm.deleteOlderLog(n)
		return nil, detail, err
	case faultDiskFull:
		path := filepath.Join(n.mount, "filler")
		size, err := fill(path)
		if err != nil {
			return nil, "", err
		}
		return func() error { return os.Remove(path) }, fmt.Sprintf("filled with %d MiB", size>>20), nil
	}
	return nil, "", fmt.Errorf("unknown fault %q", kind)
}

// deleteOlderLog deletes one of the write-ahead logs of n's store, which
// is down, other than the newest, as a disk or an operator might, and
// records the loss: at its next start the store finds the hole, sets aside
// the logs after it and serves every write up to it, so what the node wrote
// from the newest write of the log before (or from its start) until it was
// killed may be gone. With a single log there is nothing older to delete,
// and the fault is a kill.
func (nm *nemesis) deleteOlderLog(n *node) (string, error) {
	logs, err := n.logsWritten()
	if err != nil {
		return "", err
	}
	if len(logs) < 2 {
		return fmt.Sprintf("%d log written since the start: nothing older to delete", len(logs)), nil
	}
	i := nm.rng.IntN(len(logs) - 1)
	n.mu.Lock()
	from := n.started
	n.mu.Unlock()
	if i > 0 {
		fi, err := os.Stat(logs[i-1])
		if err != nil {
			return "", err
		}
		from = fi.ModTime()
	}
	fi, err := os.Stat(logs[i])
	if err != nil {
		return "", err
	}
	killed := time.Now() // the node is down: it wrote nothing after this
	nodeLog := filepath.Join(n.dir, "sepp.log")
	li, err := os.Stat(nodeLog)
	if err != nil {
		return "", err
	}
	if err := os.Remove(logs[i]); err != nil {
		return "", err
	}
	nm.mu.Lock()
	nm.losses = append(nm.losses, pendingLoss{
		loss:    history.Loss{Node: n.i, File: filepath.Base(logs[i]), From: history.At(from), To: history.At(killed)},
		nodeLog: nodeLog, offset: li.Size(),
	})
	nm.mu.Unlock()
	return fmt.Sprintf("deleted %s (%d KiB) of %d logs", filepath.Base(logs[i]), fi.Size()>>10, len(logs)), nil
}

// logsWritten lists the write-ahead logs of n's store written since the
// node last started, oldest first: not the old log files Pebble keeps to
// reuse, which hold only what its tables hold already.
func (n *node) logsWritten() ([]string, error) {
	all, err := filepath.Glob(filepath.Join(n.dataDir, "*.log"))
	if err != nil {
		return nil, err
	}
	sort.Strings(all)
	n.mu.Lock()
	started := n.started
	n.mu.Unlock()
	var logs []string
	for _, f := range all {
		if fi, err := os.Stat(f); err == nil && !fi.ModTime().Before(started) {
			logs = append(logs, f)
		}
	}
	return logs, nil
}

// lossesReported completes each deleted log's loss with what the node's
// next recovery report said: the first "store recovered" line after the
// deletion. "lost N acknowledged commits, which created M jobs" may appear
// more than once (a hole, and writes missing after the last log); each
// counts.
func (nm *nemesis) lossesReported() ([]history.Loss, error) {
	nm.mu.Lock()
	pending := append([]pendingLoss(nil), nm.losses...)
	nm.mu.Unlock()
	var out []history.Loss
	for _, p := range pending {
		b, err := os.ReadFile(p.nodeLog)
		if err != nil {
			return nil, err
		}
		l := p.loss
		if p.offset <= int64(len(b)) {
			for _, line := range strings.Split(string(b[p.offset:]), "\n") {
				var rec struct {
					Msg  string `json:"msg"`
					What string `json:"what"`
				}
				if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Msg, "store recovered") {
					continue
				}
				l.Report = rec.What
				for _, m := range lostCounts.FindAllStringSubmatch(rec.What, -1) {
					commits, _ := strconv.ParseInt(m[1], 10, 64)
					jobs, _ := strconv.ParseInt(m[2], 10, 64)
					l.Commits += commits
					l.Jobs += jobs
					l.Reported = true
				}
				break
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// lostCounts reads the counts of the recovery report's "lost" sentence.
var lostCounts = regexp.MustCompile(`lost (\d+) acknowledged commits?, which created (\d+) jobs?`)

// abortRelays, until healed, ends every session of the outbox relays
// (application_name sepp-relay, see nodeAppURL) that is inside a
// transaction of the app database: a relay pass between its claim and its
// commit, perhaps after its enqueue, as an operator's pg_terminate_backend,
// an idle_in_transaction_session_timeout or a connection pooler's restart
// would end it. The rows it claimed stay, and the next pass enqueues them
// again, which must be a hit on the jobs already made. It looks every 10 ms,
// as a pass lasts a few.
func (nm *nemesis) abortRelays() (func() error, string, error) {
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, nm.c.opts.appURL())
	if err != nil {
		cancel()
		return nil, "", fmt.Errorf("connect to the app database: %w", err)
	}
	done := make(chan int)
	go func() {
		ended := 0
		for ctx.Err() == nil {
			var n int
			if conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name = $1 AND xact_start IS NOT NULL AND pid <> pg_backend_pid()`,
				relayAppName).Scan(&n) == nil {
				ended += n
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
		done <- ended
	}()
	return func() error {
		cancel()
		n := <-done
		conn.Close(context.Background())
		nm.mu.Lock()
		nm.aborted = n
		nm.mu.Unlock()
		return nil
	}, "", nil
}

// nft adds a table to n's namespace that drops what the input and output
// rules match; healing deletes the table.
func (nm *nemesis) nft(n *node, table, in, out string) (func() error, string, error) {
	rules := fmt.Sprintf(`table inet %[1]s {
  chain in { type filter hook input priority 0; policy accept; %[2]s; }
  chain out { type filter hook output priority 0; policy accept; %[3]s; }
}
`, table, in, out)
	cmd := exec.Command("ip", "netns", "exec", n.ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("nft: %w: %s", err, strings.TrimSpace(string(b)))
	}
	return func() error { return runIn(n.ns, "nft", "delete", "table", "inet", table) }, in + " / " + out, nil
}

func writeClock(n *node, ms int64) error {
	tmp := n.clock + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(ms, 10)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, n.clock)
}

// fill writes path until its file system is full and returns its size.
func fill(path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	var size int64
	for {
		n, err := f.Write(buf)
		size += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return size, nil
		}
		if err != nil {
			return size, err
		}
	}
}

// healAll ends every fault the nemesis may have left (it stops between
// faults, but a kill's node may still be down).
func (c *cluster) healAll() {
	for _, n := range c.nodes {
		_ = n.signal(syscall.SIGCONT)
		n.mu.Lock()
		n.downTill = time.Time{}
		n.mu.Unlock()
		for _, t := range []string{"sepp_clients", "sepp_db", "sepp_loss"} {
			_ = runIn(n.ns, "nft", "delete", "table", "inet", t)
		}
		_ = writeClock(n, 0)
		if n.mount != "" {
			_ = os.Remove(filepath.Join(n.mount, "filler"))
		}
	}
}

func (nm *nemesis) summary() (counts, errs map[string]int) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	counts, errs = map[string]int{}, map[string]int{}
	for k, v := range nm.counts {
		counts[k] = v
	}
	for k, v := range nm.errs {
		errs[k] = v
	}
	return counts, errs
}
