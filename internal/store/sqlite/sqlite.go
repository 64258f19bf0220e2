// Package sqlite is Sepp's embedded default store: one SQLite database in WAL
// mode with synchronous=FULL, so a commit is on disk before it returns.
//
// All writes go through one writer goroutine that commits the operations that
// arrived together in one transaction (group commit): N concurrent enqueues
// cost one fsync, and each caller is answered only after that fsync. Reads use
// a separate pool of connections and run in parallel with the writer.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/storerule"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// DatabaseFile is the name of the database inside Options.Path.
const DatabaseFile = store.SQLiteDatabaseFile

// Options configure Open.
type Options struct {
	// Path is the data directory; it is created if missing. Required.
	Path string
	// MaxGroupOps bounds how many operations one group commit takes.
	// Default 512.
	MaxGroupOps int
	// ReadConns is the size of the read pool. Default 4.
	ReadConns int
	// OnCommit, if set, is called by the writer after every group commit
	// with the number of operations and jobs it carried and its duration.
	OnCommit func(ops, jobs int, d time.Duration)
}

// Store is the SQLite backend. Create it with Open.
type Store struct {
	opts  Options
	write *sql.DB // exactly one connection, owned by the writer goroutine
	read  *sql.DB

	ops       chan *writeOp
	stop      chan struct{} // closed by Close: the writer drains and exits
	stopped   chan struct{} // closed by the writer when it has exited
	closeOnce sync.Once

	stmts stmtCache // writer-only
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database under opts.Path, applies
// migrations and starts the writer goroutine. Close stops it.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, errors.New("sqlite: Options.Path is required")
	}
	if opts.MaxGroupOps <= 0 {
		opts.MaxGroupOps = 512
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	// A directory the Pebble store wrote is not opened as a new, empty
	// SQLite store beside it.
	if err := store.CheckNoPebble(opts.Path); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Path, 0o755); err != nil {
		return nil, fmt.Errorf("sqlite: create data directory: %w", err)
	}
	file := filepath.Join(opts.Path, DatabaseFile)
	// synchronous=FULL: in WAL mode every commit fsyncs the WAL, which is what
	// makes an ack durable against power loss, not only against a crash.
	base := "file:" + file + "?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000&_foreign_keys=0"
	write, err := sql.Open("sqlite3", base+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", file, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	read, err := sql.Open("sqlite3", base+"&_query_only=1")
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", file, err)
	}
	read.SetMaxOpenConns(opts.ReadConns)
	read.SetMaxIdleConns(opts.ReadConns)

	s := &Store{
		opts:    opts,
		write:   write,
		read:    read,
		ops:     make(chan *writeOp, 4*opts.MaxGroupOps),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	if err := s.migrate(ctx); err != nil {
		write.Close()
		read.Close()
		return nil, err
	}
	// The writer checkpoints the WAL itself, inside the commit that crosses
	// the threshold. Measured (BenchmarkEnqueue*): a passive checkpoint on a
	// second connection every 250 ms made a one-job commit 2.5x slower (its
	// fsyncs queue behind the writer's), and a big threshold makes the
	// stalls rare: 16000 pages (62.5 MiB of WAL at 4 KiB pages) gave 18k jobs/s in 32-job
	// commits against 14k at SQLite's default of 1000. A big page cache
	// keeps the dedup index, whose keys arrive in random order, in memory.
	for _, pragma := range []string{
		"PRAGMA wal_autocheckpoint = 16000",
		"PRAGMA journal_size_limit = 134217728",
		"PRAGMA cache_size = -65536",
	} {
		if _, err := write.ExecContext(ctx, pragma); err != nil {
			write.Close()
			read.Close()
			return nil, fmt.Errorf("sqlite: %s: %w", pragma, err)
		}
	}
	s.stmts.db = write
	if err := s.stmts.prepare(ctx, hotQueries()...); err != nil {
		s.stmts.close()
		write.Close()
		read.Close()
		return nil, err
	}
	go s.writer()
	return s, nil
}

// Close stops the writer after it has finished the operations already
// submitted, then closes the database.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.stopped
		s.stmts.close()
		// Fold the WAL into the database so the next open starts clean.
		_, cerr := s.write.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
		err = errors.Join(cerr, s.write.Close(), s.read.Close())
	})
	return err
}

// migrate applies the migrations this binary carries that the database
// lacks, each in a transaction of its own, and refuses a database whose
// schema is newer than the binary (storerule.Pending).
func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.write.ExecContext(ctx,
		`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	known, err := storerule.Migrations(migrationFS, "migrations")
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	var applied int
	if err := s.write.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	pending, err := storerule.Pending(known, applied)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	for _, m := range pending {
		if err := s.applyMigration(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) applyMigration(ctx context.Context, m storerule.Migration) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
	}
	defer tx.Rollback()
	body, err := migrationFS.ReadFile("migrations/" + m.Name)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.Version, time.Now().UnixMicro()); err != nil {
		return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
	}
	return tx.Commit()
}

// stmtCache holds the writer's prepared statements by SQL text. Only the
// writer goroutine uses it, so it needs no lock.
type stmtCache struct {
	db *sql.DB
	m  map[string]*sql.Stmt
}

// prepare prepares queries on the write connection. It must run while no
// transaction holds that connection (the pool has only the one).
func (c *stmtCache) prepare(ctx context.Context, queries ...string) error {
	if c.m == nil {
		c.m = make(map[string]*sql.Stmt)
	}
	for _, q := range queries {
		if _, ok := c.m[q]; ok {
			continue
		}
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("sqlite: prepare %q: %w", q, err)
		}
		c.m[q] = st
	}
	return nil
}

// get returns query as a statement of tx. A statement prepared by prepare is
// reused as is, since tx runs on the connection it was prepared on; any other
// query is prepared inside tx.
func (c *stmtCache) get(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	if st, ok := c.m[query]; ok {
		return tx.StmtContext(ctx, st), nil
	}
	return tx.PrepareContext(ctx, query)
}

func (c *stmtCache) close() {
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// placeholders returns "(?, ?, ?), (?, ?, ?)" for rows rows of cols columns.
func placeholders(rows, cols int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
}

// chunks splits n into a few sizes from a fixed set (powers of two up to max),
// so that multi-row statements come in few shapes and stay prepared.
func chunks(n, max int) []int {
	var out []int
	for size := max; n > 0; size /= 2 {
		for n >= size {
			out = append(out, size)
			n -= size
		}
	}
	return out
}
