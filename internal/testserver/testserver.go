// Package testserver starts a real Sepp server for tests: the real handlers on
// a real loopback listener, over a real store of the embedded default engine
// (Pebble) in t.TempDir(), with a clock the test controls.
package testserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sepp-dev/sepp/internal/clock"
	"github.com/sepp-dev/sepp/internal/clock/clocktest"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/server"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

// Clock is the server's settable clock: it stands still until Advance.
type Clock = clocktest.Fake

// NewClock returns a clock stopped at t.
func NewClock(t time.Time) *Clock { return clocktest.New(t) }

// Server is a running test server.
type Server struct {
	*server.Server
	// URL is the address clients connect to, "http://127.0.0.1:PORT"
	// ("https://" when the config sets tls_cert_file).
	URL string
	// Addr is the listener's host:port.
	Addr  string
	Clock *Clock
	// Logs receives the server's log output.
	Logs *SyncBuffer

	stop func() // shuts the server down and closes its store, once
}

// Stop shuts the server down and closes its store now, as the test's end
// would, so a test can start another server on the same Path (a restart).
func (s *Server) Stop() { s.stop() }

// Options tune Start. The zero value is the default configuration.
type Options struct {
	// Config is parsed as a TOML config file; empty means defaults.
	Config string
	// RealTime runs the server on the wall clock instead of Clock, for tests
	// of leases and retries as a worker sees them.
	RealTime bool
	// ClockTimers runs the server's waits on Clock too (server.Options.Local):
	// a waiting Reserve or ClaimEffect ends, and a run-at or a lease's end
	// wakes it, only when the test advances Clock, so a test of wake-ups
	// waits on events (Server.WaitingReserves, Clock.BlockUntil) and times
	// nothing. Without it the waits run on the host's clock, and a waiting
	// call on a Clock that stands still ends after its wait in real time.
	ClockTimers bool
	// Now, if set, is the server's clock in place of Clock and RealTime,
	// for tests of a clock as sepp serve builds it (the database's, on
	// PostgreSQL).
	Now func() time.Time
	// SweepBatch is the server's sweep batch size; zero: the default.
	SweepBatch int
	// WrapStore, if set, wraps the Pebble store the server uses, for tests
	// that make the store fail or stall under a running server. The
	// Pebble store itself is still the one closed at cleanup.
	WrapStore func(store.Store) store.Store
	// Path is the store's data directory; default a fresh t.TempDir(). A
	// test restarts a server by stopping it and starting another on the
	// same Path.
	Path string
	// Clock, if set, is the server's Clock in place of a new one, so a
	// restarted server goes on with the time the test moved.
	Clock *Clock
	// TracerProvider, if set, receives the server's spans
	// (server.Options.TracerProvider); the test owns it.
	TracerProvider trace.TracerProvider
}

// Start starts a server and stops it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	cfg, err := config.Parse("test.toml", []byte(opts.Config))
	if err != nil {
		t.Fatalf("testserver: config: %v", err)
	}
	// The store reports to the server's metrics as in sepp serve.
	metrics := server.NewMetrics()
	path := opts.Path
	if path == "" {
		path = t.TempDir()
	}
	st, err := pebble.Open(context.Background(), pebble.Options{Path: path,
		OnCommit: metrics.ObserveCommit, OnKeyReleased: metrics.ObserveKeyReleased})
	if err != nil {
		t.Fatalf("testserver: open store: %v", err)
	}
	fake := opts.Clock
	if fake == nil {
		fake = NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	}
	logs := &SyncBuffer{}
	now := fake.Now
	if opts.RealTime {
		now = time.Now
	}
	if opts.Now != nil {
		now = opts.Now
	}
	var local clock.Local // the default: the host's
	if opts.ClockTimers {
		if opts.RealTime || opts.Now != nil {
			t.Fatalf("testserver: ClockTimers runs the waits on Clock, which RealTime and Now replace")
		}
		local = fake
	}
	var served store.Store = st
	if opts.WrapStore != nil {
		served = opts.WrapStore(st)
	}
	srv, err := server.New(server.Options{
		Config: cfg, Store: served, Now: now, Local: local, SweepBatch: opts.SweepBatch, Metrics: metrics,
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		TracerProvider: opts.TracerProvider,
	})
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testserver: listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("testserver: shutdown: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("testserver: serve: %v", err)
			}
			if err := st.Close(); err != nil {
				t.Errorf("testserver: close store: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	scheme := "http://"
	if cfg.Server.TLS() { // tls_cert_file in Options.Config; see NewCA
		scheme = "https://"
	}
	return &Server{Server: srv, URL: scheme + ln.Addr().String(), Addr: ln.Addr().String(), Clock: fake, Logs: logs, stop: stop}
}

// Await waits until cond holds, for a state that only the server's
// goroutines change and that hands the test no event to wait on (a
// Server.WaitingReserves count). It polls: the pause between two looks only
// paces the poll, and clocktest.HangGuard only turns a hang into a failure.
func Await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(clocktest.HangGuard); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("testserver: no %s after %v", what, clocktest.HangGuard)
		}
	}
}

// SyncBuffer is an io.Writer safe for concurrent use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

var _ io.Writer = (*SyncBuffer)(nil)

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
