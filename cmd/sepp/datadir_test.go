package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondServerOnDataDirectory: with the real binary, a second sepp
// serve on a data directory a running server holds exits non-zero at once,
// naming the running server's PID and host and saying what to do; once the
// first stops, the directory can be served again.
func TestSecondServerOnDataDirectory(t *testing.T) {
	bin := buildSepp(t)
	data := filepath.Join(t.TempDir(), "data")
	log, err := os.Create(filepath.Join(t.TempDir(), "first.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	first := &serverProcess{t: t, bin: bin, addr: freePort(t), data: data, log: log}
	first.start()
	defer func() {
		if first.cmd.ProcessState == nil {
			first.signal(syscall.SIGKILL)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, bin, "serve")
	second.Env = append(os.Environ(), "SEPP_LISTEN="+freePort(t), "SEPP_STORAGE_PATH="+data)
	start := time.Now()
	out, err := second.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the second server kept running on a directory in use:\n%s", out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("second server: %v, want a non-zero exit\n%s", err, out)
	}
	host, _ := os.Hostname()
	abs, _ := filepath.Abs(data)
	for _, want := range []string{
		fmt.Sprintf("the data directory %s is in use by process %d", abs, first.cmd.Process.Pid),
		"on host " + host + ", started ",
		"Run one sepp per data directory: stop that server first, or give this one another directory",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("second server's message lacks %q:\n%s", want, out)
		}
	}
	t.Logf("refused after %v: %s", time.Since(start).Round(time.Millisecond), out)

	// After the first stops (and removes its holder file), the directory
	// serves again.
	first.signal(syscall.SIGTERM)
	if _, err := os.Stat(filepath.Join(data, "sepp-holder")); !os.IsNotExist(err) {
		t.Errorf("holder file after the first server stopped: %v", err)
	}
	again := &serverProcess{t: t, bin: bin, addr: freePort(t), data: data, log: log}
	again.start()
	again.signal(syscall.SIGTERM)
}
