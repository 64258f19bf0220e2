package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
)

// TestRestartOnFullDisk: with the real binary on a real 8 MiB tmpfs, a
// server whose disk fills stops and exits 1 (its supervisor restarts it).
// Started again on the still-full disk, it exits 1 at once, saying the disk
// is full, how much is free and how much the store needs, in a few lines.
// Before, Pebble retried the flush of the replayed log forever inside Open:
// the server never listened, logged "background error: ... no space left on
// device" thousands of times a second and ignored SIGTERM. SIGTERM while
// start-up is blocked (a log file that never answers, as a hung disk) ends
// the process with the documented line. Once space is freed, the server
// starts and every acknowledged job is there.
func TestRestartOnFullDisk(t *testing.T) {
	skipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs, which takes root (CI runs this as root)")
	}
	bin := buildSepp(t)
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v\n%s", err, out)
	}
	t.Cleanup(func() { // before t.TempDir removes mnt
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", mnt, err, out)
		}
	})
	data := filepath.Join(mnt, "data")
	logDir := t.TempDir() // not on the tmpfs
	addr := freePort(t)
	env := append(os.Environ(), "SEPP_LISTEN="+addr, "SEPP_STORAGE_PATH="+data)
	// serve starts sepp serve on data, its output in logDir/name.log.
	serve := func(name string) (*exec.Cmd, string) {
		t.Helper()
		logPath := filepath.Join(logDir, name+".log")
		f, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		cmd := exec.Command(bin, "serve")
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kill(cmd) }) // before the unmount
		return cmd, logPath
	}

	// 1. A server fills the disk: the store stops and the server exits 1.
	first := &serverProcess{t: t, bin: bin, addr: addr, data: data}
	f, err := os.Create(filepath.Join(logDir, "1-fill.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first.log = f
	first.start()
	t.Cleanup(func() { kill(first.cmd) })
	ctx := context.Background()
	client, err := sepp.NewClient(ctx, "http://"+addr, sepp.Config{EnqueueRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	acked := map[string]string{} // job id -> key
	enqueue := func(i int) error {
		key := fmt.Sprintf("job-%d", i)
		ack, err := client.Enqueue(ctx, sepp.EnqueueRequest{Queue: "full", JobType: "t", IdempotencyKey: sepp.Key(key), Payload: []byte(key)})
		if err == nil {
			acked[ack.JobID] = key
		}
		return err
	}
	for i := range 20 {
		if err := enqueue(i); err != nil {
			t.Fatal(err)
		}
	}
	fillDisk(t, filepath.Join(mnt, "filler"))
	i := 20
	for ; i < 100_000; i++ {
		if err := enqueue(i); err != nil {
			t.Logf("enqueue %d on the full disk: %v", i, err)
			break
		}
	}
	code, exited := waitExit(first.cmd, time.Minute)
	if !exited || code != 1 {
		t.Fatalf("server whose disk filled: exited %v, status %d; want status 1\n%s", exited, code, readFile(t, f.Name()))
	}
	if log := readFile(t, f.Name()); !strings.Contains(log, `msg="the store stopped; shutting down"`) {
		t.Fatalf("server whose disk filled did not say the store stopped:\n%s", log)
	}
	t.Logf("%d jobs acknowledged, %d of them after the disk was filled", len(acked), i-20)

	// 2. Started again on the still-full disk: it exits 1 quickly, saying
	// so, in a few lines.
	cmd, logPath := serve("2-full-restart")
	start := time.Now()
	code, exited = waitExit(cmd, time.Minute)
	took := time.Since(start)
	log := readFile(t, logPath)
	lines := strings.Count(log, "\n")
	if !exited {
		t.Fatalf("restart on the full disk still ran after a minute and logged %d lines, %d of them 'background error'; the last:\n%s",
			lines, strings.Count(log, "background error"), lastLines(log, 5))
	}
	if code != 1 || lines > 3 {
		t.Fatalf("restart on the full disk: status %d after %d lines, want status 1 and at most 3 lines:\n%s", code, lines, lastLines(log, 10))
	}
	for _, want := range []string{
		"sepp: open the embedded store in " + data,
		"the disk is full (", " free)",
		"before it serves, the store writes the ", " it replayed from the write-ahead log into a table, and needs about that much free",
		"nothing was lost", "free disk space, then start sepp again", "no space left on device",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("restart on the full disk: the message lacks %q:\n%s", want, log)
		}
	}
	t.Logf("restart on the full disk exited %d after %v, %d line(s): %s", code, took.Round(time.Millisecond), lines, log)

	// 3. SIGTERM while start-up is blocked: a write-ahead log that is a
	// FIFO stands in for a disk that does not answer; the store's open
	// reads every log, and blocks on it.
	fifo := filepath.Join(data, "999999.log")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, logPath = serve("3-sigterm-at-start")
	opened := make(chan *os.File, 1)
	go func() {
		// Opening the write end returns once sepp has opened the read
		// end: it is then in the store's open, and its read waits for
		// data that never comes while this end stays open.
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
		}
		opened <- w
	}()
	t.Cleanup(func() { // an open FIFO would keep the tmpfs busy
		select {
		case w := <-opened:
			if w != nil {
				w.Close()
			}
			return
		default:
		}
		// The open above still waits for a reader (sepp never got
		// there): give it one.
		r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return
		}
		if w := <-opened; w != nil {
			w.Close()
		}
		r.Close()
	})
	exitedEarly := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exitedEarly)
	}()
	var w *os.File
	select {
	case w = <-opened:
		opened <- w // for the cleanup above to close
	case <-exitedEarly:
		t.Fatalf("server exited before it opened the blocked log:\n%s", readFile(t, logPath))
	case <-time.After(time.Minute):
		t.Fatalf("server did not open the blocked log within a minute:\n%s", readFile(t, logPath))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exitedEarly:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-exitedEarly
		t.Fatalf("server blocked in its start-up survived SIGTERM for a minute:\n%s", readFile(t, logPath))
	}
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	log = readFile(t, logPath)
	if !strings.Contains(log, `msg="stopped during start-up, before serving" cause="terminated signal received" while="opening the store"`) {
		t.Fatalf("SIGTERM during start-up: the log lacks the documented line:\n%s", log)
	}
	if s := cmd.ProcessState; s == nil || s.ExitCode() != 0 {
		t.Fatalf("SIGTERM during start-up: %v, want exit status 0", s)
	}

	// 4. With space freed, the server starts and every acknowledged job
	// is there.
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	f4, err := os.Create(filepath.Join(logDir, "4-freed.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f4.Close()
	last := &serverProcess{t: t, bin: bin, addr: addr, data: data, log: f4}
	last.start()
	t.Cleanup(func() { kill(last.cmd) })
	for id, key := range acked {
		j, err := client.GetJob(ctx, id)
		if err != nil {
			t.Fatalf("acknowledged job %s (key %s) after the restart: %v", id, key, err)
		}
		if j.IdempotencyKey != key || string(j.Payload) != key {
			t.Fatalf("acknowledged job %s: key %q, payload %q; want %q", id, j.IdempotencyKey, j.Payload, key)
		}
	}
	last.signal(syscall.SIGTERM)
	if code := last.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("server on the freed disk exited %d after SIGTERM:\n%s", code, readFile(t, f4.Name()))
	}
	// A torn last record (the failed commit's, never acknowledged) may be
	// reported; acknowledged writes lost may not.
	if log := readFile(t, f4.Name()); strings.Contains(log, "lost") {
		t.Errorf("the restart after the full disk reported lost writes:\n%s", log)
	}
}

// kill ends cmd's process if it still runs (a test that failed midway).
func kill(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil && cmd.ProcessState == nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// fillDisk writes path until the file system it is on has no room left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			buf = buf[:len(buf)/2] // the last few blocks too
		}
	}
}

// waitExit waits for cmd to exit, for at most limit (a deadline for a
// failure, not a measure); on a timeout it kills the process and exited is
// false.
func waitExit(cmd *exec.Cmd, limit time.Duration) (code int, exited bool) {
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), true
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		return -1, false
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lastLines(s string, n int) string {
	lines := bytes.Split([]byte(strings.TrimSpace(s)), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
