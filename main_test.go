package sepp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/server"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

// exampleServerURL is a real server the examples talk to, started by
// TestMain on a fresh data directory.
var exampleServerURL string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sepp-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		panic(err)
	}
	cfg := config.Default()
	srv, err := server.New(server.Options{Config: &cfg, Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	exampleServerURL = "http://" + ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	<-done
	st.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			return 1
		}
	}
	return code
}

// shortID names job ids in the order they are first seen, so examples can
// print stable output.
var (
	idsMu sync.Mutex
	ids   = map[string]string{}
)

func shortID(id string) string {
	idsMu.Lock()
	defer idsMu.Unlock()
	if s, ok := ids[id]; ok {
		return s
	}
	ids[id] = fmt.Sprintf("job-%d", len(ids)+1)
	return ids[id]
}
