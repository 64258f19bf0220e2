package pebble

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// HolderFile is the file, next to Pebble's LOCK, in which the process that
// holds a data directory writes who it is: its PID, host, start time and
// program. A second server that finds the directory locked reads it, to say
// which process holds the directory. It is removed at Close; one left by a
// process that died is overwritten by the next Open, since the lock (held by
// the operating system, and released when its process ends) is what decides.
const HolderFile = "sepp-holder"

// holder is what HolderFile records.
type holder struct {
	pid     int
	host    string
	started time.Time
	exe     string
}

func (h holder) String() string {
	s := fmt.Sprintf("process %d", h.pid)
	if h.exe != "" {
		s += " (" + h.exe + ")"
	}
	if h.host != "" {
		s += " on host " + h.host
	}
	if !h.started.IsZero() {
		s += ", started " + h.started.UTC().Format(time.RFC3339)
	}
	return s
}

// processStart is when this process started, near enough: when this
// package was initialised.
var processStart = time.Now()

// writeHolder records this process in dir's HolderFile, replacing it
// atomically.
func writeHolder(dir string) error {
	host, _ := os.Hostname()
	exe, _ := os.Executable()
	text := fmt.Sprintf("pid=%d\nhost=%s\nstarted=%s\nexe=%s\n", os.Getpid(), host, processStart.UTC().Format(time.RFC3339Nano), exe)
	tmp := filepath.Join(dir, HolderFile+".tmp")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, HolderFile))
}

// removeHolder removes dir's HolderFile if it still names this process.
func removeHolder(dir string) error {
	h, err := readHolder(dir)
	if err != nil || h.pid != os.Getpid() {
		return nil
	}
	if err := os.Remove(filepath.Join(dir, HolderFile)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

func readHolder(dir string) (holder, error) {
	data, err := os.ReadFile(filepath.Join(dir, HolderFile))
	if err != nil {
		return holder{}, err
	}
	var h holder
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "pid":
			h.pid, _ = strconv.Atoi(v)
		case "host":
			h.host = v
		case "started":
			h.started, _ = time.Parse(time.RFC3339Nano, v)
		case "exe":
			h.exe = v
		}
	}
	if h.pid <= 0 {
		return holder{}, fmt.Errorf("%s names no process", HolderFile)
	}
	return h, nil
}

// lockedError is the error of an Open that found dir locked: it names the
// holder when HolderFile does, and says what to do.
func lockedError(dir string, err error) error {
	abs := dir
	if a, aerr := filepath.Abs(dir); aerr == nil {
		abs = a
	}
	who := "another process"
	if h, herr := readHolder(dir); herr == nil {
		who = h.String()
		if h.pid == os.Getpid() {
			who = "this process (the store is already open)"
		}
	}
	return fmt.Errorf("pebble: the data directory %s is in use by %s (%s holds its lock: %v). "+
		"Run one sepp per data directory: stop that server first, or give this one another directory ([storage] path or SEPP_STORAGE_PATH)",
		abs, who, filepath.Join(abs, "LOCK"), err)
}
