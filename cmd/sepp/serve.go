package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sepp-dev/sepp/internal/clock"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/server"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/pebble"
	"github.com/sepp-dev/sepp/internal/store/postgres"
)

// shutdownGrace is how long in-flight calls may run after SIGTERM.
const shutdownGrace = 30 * time.Second

// wallClock is the host's clock. The embedded store takes the host's clock:
// every window, lease and run-at of a node on it is judged by this. On
// PostgreSQL the server takes the database's clock instead (serverClock),
// and wallClock is only compared with it.
var wallClock = time.Now

const serveLong = `Runs the server: the API, the dashboard and /metrics on one port. Without
--config, the defaults and the SEPP_* environment variables apply (an
embedded store in ./sepp-data, 127.0.0.1:50051); docs/configuration.md has
every key. SIGTERM and SIGINT stop it gracefully; SIGHUP reloads its TLS
files.`

func runServe(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "TOML config `file` (optional: without one, defaults and SEPP_* env apply)")
	check := fs.Bool("check-config", false, "validate the configuration, print OK, and exit")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	// Beyond loopback without tokens, only with allow_unauthenticated.
	if err := cfg.CheckExposure(); err != nil {
		return err
	}
	if *check {
		if err := server.CheckWebhookSecrets(cfg); err != nil { // [[webhooks]] secrets, as serve reads them
			return err
		}
		if err := server.CheckAuthSecrets(cfg); err != nil { // [[auth.tokens]] secrets, as serve reads them
			return err
		}
		if err := server.CheckTLS(cfg); err != nil { // [server] tls_* files, as serve loads them
			return err
		}
		if err := server.CheckOutboxURLs(cfg); err != nil { // [[outboxes]] connection strings, as serve reads them
			return err
		}
		name := *configPath
		if name == "" {
			name = "(no config file: defaults)"
		}
		fmt.Fprintf(stdout, "%s: OK\n", name)
		return nil
	}
	logger, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// SIGHUP reloads the TLS certificate, key and client CA files; a
	// failed reload keeps the ones loaded before (server.ReloadTLS logs it).
	// Caught from here on, so a SIGHUP never stops the server.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	metrics := server.NewMetrics()
	// A store that can no longer make its commits durable (the embedded
	// store on a full or failing disk) stops answering; the process then
	// stops too, so a supervisor restarts it once the disk is fixed.
	storeFailed := make(chan error, 1)
	onFailed := func(err error) {
		select {
		case storeFailed <- err:
		default:
		}
	}
	// SIGTERM or SIGINT before the server listens stops it there (stoppedAtStart).
	st, engine, where, err := openStoreOrStop(ctx, cfg, metrics, onFailed)
	if err != nil {
		if ctx.Err() != nil {
			return stoppedAtStart(ctx, logger, "opening the store")
		}
		return err
	}
	defer st.Close()
	logger.Info("store opened", "backend", cfg.Storage.Backend, "engine", engine, "path", where)
	if rs, ok := store.As[store.Recoverer](st); ok {
		logRecovery(logger, rs.Recovery())
		metrics.ObserveRecovery(rs.Recovery())
	}

	now, stopClock, err := serverClock(ctx, st, logger)
	if err != nil {
		if ctx.Err() != nil {
			return stoppedAtStart(ctx, logger, "reading the database's clock")
		}
		return err
	}
	defer stopClock()
	st = wrapStoreForFaults(st) // release builds: st itself (faults.go)
	srv, err := server.New(server.Options{Config: cfg, Store: st, Logger: logger, Metrics: metrics, Now: now, Version: version})
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return stoppedAtStart(ctx, logger, "starting the server")
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("%slisten on %s: %w (set [server] listen or SEPP_LISTEN to another address)", cfg.Where("server.listen"), cfg.Server.Listen, err)
	}
	go func() { // SIGHUP: hup, above
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			if !cfg.Server.TLS() {
				logger.Info("SIGHUP: nothing to reload (no [server] tls_cert_file)")
				continue
			}
			_ = srv.ReloadTLS()
		}
	}()
	logger.Info("sepp serving", "addr", ln.Addr().String(), "tls", cfg.Server.TLS(), "backend", cfg.Storage.Backend, "data", where, "version", version)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var failed error
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	case failed = <-storeFailed:
		logger.Error("the store stopped; shutting down", "err", failed)
	}
	logger.Info("shutting down: finishing in-flight calls", "grace", shutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-errc; serr != nil {
		err = errors.Join(err, serr)
	}
	stopClock() // the server has stopped: nothing asks the time any more
	if cerr := st.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	logger.Info("stopped")
	return errors.Join(failed, err)
}

// openStoreOrStop runs openStore, which includes the store's recovery and
// migrations, and returns when it does, or with ctx's error as soon as ctx
// ends (SIGTERM or SIGINT). An open can take long (replaying a large
// write-ahead log, waiting on a disk that does not answer) and cannot be cut
// short, so it runs in a goroutine of its own, which is left to the
// process's exit: that ends it as a crash would, which the stores recover
// from.
func openStoreOrStop(ctx context.Context, cfg *config.Config, m *server.Metrics, onFailed func(error)) (store.Store, string, string, error) {
	type opened struct {
		st            store.Store
		engine, where string
		err           error
	}
	ch := make(chan opened, 1)
	go func() {
		st, engine, where, err := openStore(ctx, cfg, m, onFailed)
		ch <- opened{st, engine, where, err}
	}()
	select {
	case o := <-ch:
		return o.st, o.engine, o.where, o.err
	case <-ctx.Done():
		return nil, "", "", ctx.Err()
	}
}

// stoppedAtStart logs that a signal stopped the server while it was doing
// step, before it served anything, and returns nil: the stop asked for is
// done, so the exit status is 0, as after a shutdown.
func stoppedAtStart(ctx context.Context, logger *slog.Logger, step string) error {
	logger.Warn("stopped during start-up, before serving", "cause", context.Cause(ctx), "while", step)
	return nil
}

// openStore opens the store that cfg.Storage.Backend names. It returns the
// store, the engine's name ("pebble" or "postgres") and where its
// data is (an absolute directory, or the database URL without its password).
func openStore(ctx context.Context, cfg *config.Config, m *server.Metrics, onFailed func(error)) (store.Store, string, string, error) {
	switch cfg.Storage.Backend {
	case config.BackendEmbedded:
		abs := absPath(cfg.Storage.Path)
		st, err := pebble.Open(ctx, pebble.Options{Path: cfg.Storage.Path, OnCommit: m.ObserveCommit, OnKeyReleased: m.ObserveKeyReleased,
			OnFailed: onFailed})
		if err != nil {
			return nil, "", "", fmt.Errorf("open the embedded store in %s: %w", abs, err)
		}
		return st, "pebble", abs, nil
	case config.BackendPostgres:
		st, err := postgres.Open(ctx, postgres.Options{URL: cfg.Storage.URL, MaxConns: int32(cfg.Storage.PoolSize),
			OnCommit: m.ObserveCommit, OnKeyReleased: m.ObserveKeyReleased})
		if err != nil {
			return nil, "", "", fmt.Errorf("open the postgres store (storage.url or SEPP_STORAGE_URL): %w", err)
		}
		where := "the database at storage.url"
		if u, err := url.Parse(cfg.Storage.URL); err == nil {
			where = u.Redacted()
		}
		return st, "postgres", where, nil
	}
	return nil, "", "", fmt.Errorf("unknown storage backend %q", cfg.Storage.Backend)
}

// serverClock returns the clock the server decides by, and a function to
// call once the server has stopped. On PostgreSQL it is the database's clock
// (clock.Anchored: read at start and every 10 s, advanced by this host's
// monotonic clock in between), so that a node whose wall clock is ahead
// neither expires other nodes' dedup records early nor takes their leases;
// it logs how far this host's clock is from the database's. On the embedded
// store it is the host's clock, wallClock.
func serverClock(ctx context.Context, st store.Store, logger *slog.Logger) (now func() time.Time, stop func(), err error) {
	db, ok := store.As[store.SharedClock](st)
	if !ok {
		return wallClock, func() {}, nil
	}
	c, err := clock.NewAnchored(ctx, clock.AnchoredOptions{Source: db.DBTime, Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("read the database's clock: %w", err)
	}
	// The database's time minus the host's: Round(0) drops the monotonic
	// readings, so this compares the wall clocks.
	offset := c.Now().Round(0).Sub(wallClock().Round(0)).Round(time.Millisecond)
	u := c.Uncertainty().Round(100 * time.Microsecond)
	logger.Info("clock", "source", "database", "offset", offset, "uncertainty", u)
	if u > 10*time.Millisecond {
		logger.Warn(fmt.Sprintf("no reading of the database's clock within 10 ms came back in %v (the best was within %v): dedup windows and leases on this node may be off by that much until a better reading, taken every 250 ms meanwhile", clock.DefaultStartWait, u), "uncertainty", u)
	}
	if offset.Abs() > time.Second {
		logger.Warn(fmt.Sprintf("this node's clock is off by %v from the database's; Sepp uses the database's clock on PostgreSQL, "+
			"so dedup windows and leases are unaffected, but log timestamps are the host's", -offset), "offset", offset)
	}
	return c.Now, c.Close, nil
}

// logRecovery logs what the store replayed at Open: one INFO line, or a WARN
// line naming what was found damaged and dropped.
func logRecovery(logger *slog.Logger, r store.Recovery) {
	args := []any{"wal_files", r.WALFiles, "wal_batches", r.WALBatches, "wal_keys", r.WALKeys, "dedup_records", r.DedupRecords}
	if len(r.Damaged) == 0 {
		logger.Info("store recovered", append(args, "damaged", 0)...)
		return
	}
	logger.Warn("store recovered with damage: data was dropped", append(args, "damaged", len(r.Damaged), "what", strings.Join(r.Damaged, "; "))...)
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

const migrateLong = `Applies the store's schema migrations and exits, saying which it applied.
For PostgreSQL, run it to upgrade the schema before rolling out new nodes
(every node also applies them at start, one at a time).`

// runMigrate applies the store's schema migrations and exits: for
// PostgreSQL, to upgrade the schema before rolling out new nodes (every node
// also applies them at start, one at a time, under an advisory lock).
func runMigrate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "TOML config `file` (optional: without one, defaults and SEPP_* env apply)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	st, _, where, err := openStore(context.Background(), cfg, server.NewMetrics(), nil)
	if err != nil {
		return err
	}
	var done store.Migrations
	if m, ok := store.As[store.Migrator](st); ok {
		done = m.Migrations()
	}
	if err := st.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s store in %s: %s\n", cfg.Storage.Backend, where, migrationsDone(done))
	return nil
}

// migrationsDone says what Open did to the schema: "applied migrations
// 0001_init, 0002_release_key_on", or "schema up to date (3 migrations)".
func migrationsDone(m store.Migrations) string {
	if len(m.Applied) > 0 {
		return fmt.Sprintf("applied %s %s", plural(int64(len(m.Applied)), "migration"), strings.Join(m.Applied, ", "))
	}
	return fmt.Sprintf("schema up to date (%d %s)", m.Known, plural(int64(m.Known), "migration"))
}
