package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// workerProcess is a `sepp bench worker` child process.
type workerProcess struct {
	cmd    *exec.Cmd
	record string
	log    string // the process's stdout and stderr
}

func startWorker(t *testing.T, addr string, args ...string) *workerProcess {
	t.Helper()
	record := filepath.Join(t.TempDir(), "record")
	cmd := exec.Command(buildSepp(t), append([]string{"bench", "worker", "--addr", addr, "--record", record}, args...)...)
	logPath := filepath.Join(t.TempDir(), "worker.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProcess{cmd: cmd, record: record, log: logPath}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return w
}

// stop sends sig and returns the exit code.
func (w *workerProcess) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	err := w.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// recordLine is one handler start written by a worker process.
type recordLine struct {
	jobID   string
	attempt int
	token   string
}

func readRecord(t *testing.T, path string) []recordLine {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []recordLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue // a line cut by SIGKILL
		}
		a, _ := strconv.Atoi(fields[1])
		out = append(out, recordLine{fields[0], a, fields[2]})
	}
	return out
}

func eventually(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func queueInfo(t *testing.T, c *sepp.Client, name string) sepp.QueueInfo {
	t.Helper()
	qs, err := c.ListQueues(context.Background())
	if err != nil {
		return sepp.QueueInfo{}
	}
	for _, q := range qs {
		if q.Name == name {
			return q
		}
	}
	return sepp.QueueInfo{}
}

func enqueueN(t *testing.T, c *sepp.Client, queue string, n int) []string {
	t.Helper()
	var reqs []sepp.EnqueueRequest
	for i := range n {
		reqs = append(reqs, sepp.EnqueueRequest{Queue: queue, JobType: "t", IdempotencyKey: sepp.Key(fmt.Sprint(queue, "-", i))})
	}
	var ids []string
	for len(reqs) > 0 {
		k := min(len(reqs), 1000)
		res, err := c.EnqueueBatch(context.Background(), reqs[:k], sepp.BatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			ids = append(ids, r.Ack.JobID)
		}
		reqs = reqs[k:]
	}
	return ids
}

// TestWorkerStartedBeforeServer: a worker process started before its
// server waits for it, saying so in its log (the server starts once it has
// said so twice), and then processes its jobs, so start order does not
// matter under compose or Kubernetes.
func TestWorkerStartedBeforeServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs server and worker processes; skipped with -short")
	}
	p := &serverProcess{t: t, bin: buildSepp(t), addr: freePort(t), data: t.TempDir()}
	logf, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.log = logf
	w := startWorker(t, "http://"+p.addr, "--queues", "q", "-c", "4")
	eventually(t, "the worker waiting for the server twice", time.Minute, func() bool {
		log, _ := os.ReadFile(w.log)
		return strings.Count(string(log), "waiting for the server") >= 2
	})
	if w.cmd.ProcessState != nil {
		t.Fatalf("the worker exited before the server started: %v", w.cmd.ProcessState)
	}
	p.start()
	defer p.signal(syscall.SIGTERM)
	c, err := sepp.Connect(context.Background(), "http://"+p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 50
	ids := enqueueN(t, c, "q", n)
	eventually(t, "every job completed", time.Minute, func() bool { return queueInfo(t, c, "q").Completed == n })
	if code := w.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("worker exited %d after SIGTERM", code)
	}
	runs := map[string]int{}
	for _, l := range readRecord(t, w.record) {
		runs[l.jobID]++
	}
	for _, id := range ids {
		if runs[id] != 1 {
			t.Fatalf("job %s ran %d times", id, runs[id])
		}
	}
	log, err := os.ReadFile(w.log)
	if err != nil || !strings.Contains(string(log), "waiting for the server") || !strings.Contains(string(log), p.addr) {
		t.Fatalf("the worker's log does not show its waits: %v\n%s", err, log)
	}
}

// TestTwoWorkerProcesses: 10,000 keyed jobs, two worker processes of 16
// goroutines: every job completes, each handler runs once in this fault-free
// run, and the queue counts agree.
func TestTwoWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes; skipped with -short")
	}
	srv := testserver.Start(t, testserver.Options{RealTime: true})
	c, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 10000
	ids := enqueueN(t, c, "q", n)
	a := startWorker(t, srv.URL, "--queues", "q", "-c", "16")
	b := startWorker(t, srv.URL, "--queues", "q", "-c", "16")
	eventually(t, "every job completed", 2*time.Minute, func() bool { return queueInfo(t, c, "q").Completed == n })
	if code := a.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("worker a exited %d after SIGTERM", code)
	}
	if code := b.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("worker b exited %d after SIGTERM", code)
	}
	runs := map[string]int{}
	ra, rb := readRecord(t, a.record), readRecord(t, b.record)
	for _, l := range append(ra, rb...) {
		runs[l.jobID]++
	}
	for _, id := range ids {
		if runs[id] != 1 {
			t.Fatalf("job %s ran %d times", id, runs[id])
		}
	}
	if len(runs) != n || len(ra) == 0 || len(rb) == 0 {
		t.Fatalf("%d jobs ran (%d in a, %d in b); want %d across both", len(runs), len(ra), len(rb), n)
	}
	q := queueInfo(t, c, "q")
	if q.Completed != n || q.Available+q.Reserved+q.Scheduled+q.Dead != 0 || q.DedupRecords != n {
		t.Fatalf("queue counts: %+v", q)
	}
}

// TestKilledWorkersJobsAreRedelivered: a worker process that holds jobs is
// killed with SIGKILL; after the lease its jobs go to another worker with the
// attempt raised, and a late Complete with the old lease changes nothing.
func TestKilledWorkersJobsAreRedelivered(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes; skipped with -short")
	}
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: "[[queues]]\nname = \"q\"\nlease_ms = 1000\n"})
	c, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	enqueueN(t, c, "q", 20)
	stuck := startWorker(t, srv.URL, "--queues", "q", "-c", "5", "--sleep", "1h")
	eventually(t, "the first worker to hold 5 jobs", 30*time.Second, func() bool { return len(readRecord(t, stuck.record)) == 5 })
	stuck.stop(t, syscall.SIGKILL)
	held := readRecord(t, stuck.record)

	next := startWorker(t, srv.URL, "--queues", "q", "-c", "4")
	eventually(t, "every job completed", time.Minute, func() bool { return queueInfo(t, c, "q").Completed == 20 })
	next.stop(t, syscall.SIGTERM)
	attempts := map[string]int{}
	for _, l := range readRecord(t, next.record) {
		attempts[l.jobID] = l.attempt
	}
	for _, h := range held {
		if attempts[h.jobID] != 2 {
			t.Fatalf("job %s held by the killed worker was redelivered with attempt %d, want 2", h.jobID, attempts[h.jobID])
		}
		err := c.Complete(context.Background(), h.jobID, h.token, []byte("late"))
		if !errors.Is(err, sepp.ErrLeaseLost) {
			t.Fatalf("late Complete from the killed worker's lease: %v", err)
		}
		j, err := c.GetJob(context.Background(), h.jobID)
		if err != nil || j.State != sepp.JobStateCompleted || string(j.Result) == "late" || j.Attempts != 2 {
			t.Fatalf("job after a late Complete: %+v %v", j, err)
		}
	}
}

// TestSIGTERMLetsTheRunningJobFinish: a worker told to stop mid-job finishes
// the job and exits 0.
func TestSIGTERMLetsTheRunningJobFinish(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes; skipped with -short")
	}
	srv := testserver.Start(t, testserver.Options{RealTime: true})
	c, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids := enqueueN(t, c, "q", 1)
	w := startWorker(t, srv.URL, "--queues", "q", "-c", "1", "--sleep", "500ms")
	eventually(t, "the job to start", 30*time.Second, func() bool { return len(readRecord(t, w.record)) == 1 })
	if code := w.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("worker exited %d after SIGTERM", code)
	}
	if j, err := c.GetJob(context.Background(), ids[0]); err != nil || j.State != sepp.JobStateCompleted || j.Attempts != 1 {
		t.Fatalf("job after the worker's graceful stop: %+v %v", j, err)
	}
}

// TestServerKilledMidProcessing: the server is killed with SIGKILL while a
// worker processes jobs, and restarted: no job is lost, every job ends
// COMPLETED, none stays RESERVED.
func TestServerKilledMidProcessing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary; skipped with -short")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sepp.toml")
	os.WriteFile(cfg, []byte("[[queues]]\nname = \"q\"\nlease_ms = 1000\n"), 0o644)
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p := &serverProcess{t: t, bin: buildSepp(t), addr: freePort(t), data: filepath.Join(dir, "data"), args: []string{"--config", cfg}, log: logf}
	p.start()
	url := "http://" + p.addr
	c, err := sepp.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 2000
	ids := enqueueN(t, c, "q", n)
	w := startWorker(t, url, "--queues", "q", "-c", "8", "--sleep", "5ms")
	eventually(t, "processing to start", 30*time.Second, func() bool { return len(readRecord(t, w.record)) > 100 })
	p.signal(syscall.SIGKILL)
	p.start()
	eventually(t, "every job completed after the restart", 2*time.Minute, func() bool { return queueInfo(t, c, "q").Completed == n })
	w.stop(t, syscall.SIGTERM)
	for _, id := range ids {
		j, err := c.GetJob(context.Background(), id)
		if err != nil || j.State != sepp.JobStateCompleted {
			t.Fatalf("job %s after the crash: %+v %v", id, j, err)
		}
	}
	if q := queueInfo(t, c, "q"); q.Reserved != 0 || q.Available != 0 || q.Dead != 0 {
		t.Fatalf("queue after the crash: %+v", q)
	}
	p.signal(syscall.SIGTERM)
}
