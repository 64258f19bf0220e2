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

	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/server"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

// Clock is a settable clock. The zero value is not usable; use NewClock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock stopped at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

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
}

// Options tune Start. The zero value is the default configuration.
type Options struct {
	// Config is parsed as a TOML config file; empty means defaults.
	Config string
	// RealTime runs the server on the wall clock instead of Clock, for tests
	// of leases and retries as a worker sees them.
	RealTime bool
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
	st, err := pebble.Open(context.Background(), pebble.Options{Path: t.TempDir(),
		OnCommit: metrics.ObserveCommit, OnKeyReleased: metrics.ObserveKeyReleased})
	if err != nil {
		t.Fatalf("testserver: open store: %v", err)
	}
	clock := NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	logs := &SyncBuffer{}
	now := clock.Now
	if opts.RealTime {
		now = time.Now
	}
	if opts.Now != nil {
		now = opts.Now
	}
	var served store.Store = st
	if opts.WrapStore != nil {
		served = opts.WrapStore(st)
	}
	srv, err := server.New(server.Options{
		Config: cfg, Store: served, Now: now, SweepBatch: opts.SweepBatch, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
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
	t.Cleanup(func() {
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
	scheme := "http://"
	if cfg.Server.TLS() { // tls_cert_file in Options.Config; see NewCA
		scheme = "https://"
	}
	return &Server{Server: srv, URL: scheme + ln.Addr().String(), Addr: ln.Addr().String(), Clock: clock, Logs: logs}
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
