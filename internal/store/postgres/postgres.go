// Package postgres is Sepp's scale-out store: any number of `sepp serve`
// nodes share one PostgreSQL database and behave as one server. Dedup is
// exact across nodes through the primary key of sepp_dedup and
// INSERT ... ON CONFLICT; reserve takes jobs with FOR UPDATE SKIP LOCKED;
// every write is one transaction, durable when PostgreSQL commits it.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Options configure Open.
type Options struct {
	// URL is the connection string, e.g. postgres://sepp@127.0.0.1:5432/sepp.
	URL string
	// MaxConns is the size of the connection pool. Default 16.
	MaxConns int32
	// OnCommit, if set, is called after every enqueue transaction commits,
	// with the jobs it carried and its duration (the same hook as SQLite's).
	OnCommit func(ops, jobs int, d time.Duration)
	// OnKeyReleased, if set, is called, once per queue, after a transaction
	// that deleted n dedup records of queue because their jobs reached a
	// final state their release_key_on names has committed (Complete, Fail,
	// CancelJob, and the lease expiry of Reserve and Sweep); never for one
	// that failed or rolled back.
	OnKeyReleased func(queue string, n int)
}

// Store is the PostgreSQL backend. Create it with Open.
type Store struct {
	pool          *pgxpool.Pool
	onCommit      func(ops, jobs int, d time.Duration)
	onKeyReleased func(queue string, n int)
	migrations    store.Migrations // what Open applied; set before Open returns
}

var _ store.Store = (*Store)(nil)

// DefaultConnectTimeout bounds each new connection (dial, TLS, startup and
// login) when storage.url sets no connect_timeout of its own. A connection
// that takes longer fails with store.ErrUnavailable.
const DefaultConnectTimeout = 10 * time.Second

// migrationLock is the advisory lock key under which nodes apply migrations
// one at a time.
const migrationLock = 0x5e99_0001

// Open connects, applies the migrations (one node at a time, under an
// advisory lock) and returns the store.
func Open(ctx context.Context, opts Options) (*Store, error) {
	cfg, err := poolConfig(opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		// A refused, broken or timed-out connection is an outage the
		// caller (sepp serve at start, its supervisor) can wait out; a
		// refused login or an unknown database is not, and does not say to
		// retry. The cause is kept as text (%v): a connect timeout's error
		// holds context.DeadlineExceeded, which is not the caller's.
		if errors.Is(translate(ctx, err), store.ErrUnavailable) {
			return nil, fmt.Errorf("postgres: cannot reach the database at storage.url: %v; %w, retry", err, store.ErrUnavailable)
		}
		return nil, fmt.Errorf("postgres: cannot reach the database at storage.url: %w", err)
	}
	s := &Store{pool: pool, onCommit: opts.OnCommit, onKeyReleased: opts.OnKeyReleased}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, translate(ctx, err)
	}
	return s, nil
}

// poolConfig is the pool's configuration for opts.
func poolConfig(opts Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres: storage.url: %w", err)
	}
	cfg.MaxConns = 16
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	// Without a bound, a connection attempt to a server that accepts TCP
	// but never answers (a hung host, a half-open network path) waits as
	// long as the caller's context, which for sepp serve's Open ends only
	// on a signal (and pgxpool's own bound is 2 minutes). connect_timeout=0
	// in the URL means no timeout to libpq; pgx reads it as unset too, so
	// it gets the default.
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	return cfg, nil
}

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// DBTime reads the database's clock: clock_timestamp(), the time when the
// statement runs (now() would be the start of its transaction). The nodes
// that share the database take their time from it (internal/clock), so that
// no node's wall clock decides when a window or a lease ends.
func (s *Store) DBTime(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		return time.Time{}, translate(ctx, err)
	}
	return t, nil
}

// Migrations implements store.Migrator: the migrations Open applied (none
// when another node had applied them first).
func (s *Store) Migrations() store.Migrations {
	m := s.migrations
	m.Applied = append([]string(nil), m.Applied...)
	return m
}

// migrate applies the pending migrations in one transaction, under the
// advisory lock, and records them in s.migrations once it commits.
func (s *Store) migrate(ctx context.Context) error {
	var done store.Migrations
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		done = store.Migrations{}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return fmt.Errorf("postgres: migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS sepp_schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("postgres: migrations: %w", err)
		}
		known, err := storerule.Migrations(migrationFS, "migrations")
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		done.Known = len(known)
		var applied int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM sepp_schema_migrations`).Scan(&applied); err != nil {
			return err
		}
		pending, err := storerule.Pending(known, applied)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		for _, m := range pending {
			body, err := migrationFS.ReadFile("migrations/" + m.Name)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return fmt.Errorf("postgres: migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO sepp_schema_migrations (version) VALUES ($1)`, m.Version); err != nil {
				return err
			}
			done.Applied = append(done.Applied, strings.TrimSuffix(m.Name, ".sql"))
		}
		return nil
	})
	if err == nil {
		s.migrations = done
	}
	return err
}

// translate is the one place PostgreSQL errors are turned into errors a
// caller can act on. ctx is the caller's: a deadline that is not its own
// (the connect timeout's) is an outage, not the caller's deadline.
func translate(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, store.ErrClosed) ||
		(errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil) {
		return err
	}
	if errors.Is(err, puddle.ErrClosedPool) {
		return store.ErrClosed
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100":
			return fmt.Errorf("the PostgreSQL disk is full; free space and retry: %w", err)
		case pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || strings.HasPrefix(pe.Code, "08"):
			return fmt.Errorf("%w: PostgreSQL is restarting or unreachable (%s); retry: %v", store.ErrUnavailable, pe.Code, err)
		}
		return err
	}
	// Anything else from pgx without a server error code is the connection:
	// refused, reset, closed while the server restarts.
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) || isConnError(err) {
		return fmt.Errorf("%w: cannot reach PostgreSQL; retry: %v", store.ErrUnavailable, err)
	}
	return err
}

// isConnError reports errors of a connection that broke mid-call.
func isConnError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "unexpected EOF") ||
		strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe")
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }
