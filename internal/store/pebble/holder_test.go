package pebble_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sepp-dev/sepp/internal/store/pebble"
)

// TestHolderFile: an open store names its process in the holder file, a
// second Open's error names it too, and Close removes the file.
func TestHolderFile(t *testing.T) {
	dir := t.TempDir()
	s, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, pebble.HolderFile))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, want := range []string{fmt.Sprintf("pid=%d\n", os.Getpid()), "host=" + host + "\n", "started=20"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("holder file %q lacks %q", data, want)
		}
	}
	_, err = pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err == nil || !strings.Contains(err.Error(), "is in use by this process") || !strings.Contains(err.Error(), "Run one sepp per data directory") {
		t.Errorf("second Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, pebble.HolderFile)); !os.IsNotExist(err) {
		t.Errorf("holder file after Close: %v", err)
	}
	// A holder file left by a process that died does not keep the next
	// server out: the lock decides.
	os.WriteFile(filepath.Join(dir, pebble.HolderFile), []byte("pid=999999\nhost=gone\n"), 0o644)
	s, err = pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		t.Fatalf("Open after a stale holder file: %v", err)
	}
	s.Close()
}
