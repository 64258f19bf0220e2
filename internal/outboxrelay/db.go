package outboxrelay

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite", pure Go

	"github.com/sepp-dev/sepp/internal/outboxsql"
)

// openDB opens the app's database in dialect d.
func openDB(d outboxsql.Dialect, conn string) (*sql.DB, error) {
	var db *sql.DB
	var err error
	switch d {
	case outboxsql.Postgres:
		if !strings.HasPrefix(conn, "postgres://") && !strings.HasPrefix(conn, "postgresql://") {
			return nil, fmt.Errorf("the connection string must start with postgres:// or postgresql://")
		}
		db, err = sql.Open("pgx", conn)
		if err == nil {
			db.SetMaxOpenConns(4)
		}
	case outboxsql.MySQL:
		dsn, derr := mysqlDSN(conn)
		if derr != nil {
			return nil, derr
		}
		db, err = sql.Open("mysql", dsn)
		if err == nil {
			db.SetMaxOpenConns(4)
		}
	case outboxsql.SQLite:
		db, err = sql.Open("sqlite", sqliteDSN(conn))
		if err == nil {
			db.SetMaxOpenConns(1) // one writer: the relay's pass
		}
	default:
		return nil, fmt.Errorf("unknown dialect %v", d)
	}
	if err != nil {
		return nil, err
	}
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// mysqlDSN takes a go-sql-driver DSN ("user:pass@tcp(host:3306)/app") or a
// mysql:// URL and returns the DSN with times read as UTC time.Time values,
// as the outbox's columns hold them.
func mysqlDSN(conn string) (string, error) {
	if strings.HasPrefix(conn, "mysql://") || strings.HasPrefix(conn, "mariadb://") {
		u, err := url.Parse(conn)
		if err != nil {
			return "", fmt.Errorf("the connection string is not a URL: %w", err)
		}
		user := u.User.Username()
		if p, ok := u.User.Password(); ok {
			user += ":" + p
		}
		host := u.Host
		if u.Port() == "" {
			host += ":3306"
		}
		conn = user + "@tcp(" + host + ")" + u.Path
		if u.RawQuery != "" {
			conn += "?" + u.RawQuery
		}
	}
	cfg, err := mysql.ParseDSN(conn)
	if err != nil {
		return "", fmt.Errorf("the connection string is neither a MySQL DSN (user:pass@tcp(host:3306)/app) nor a mysql:// URL: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	return cfg.FormatDSN(), nil
}

// sqliteDSN is the path with a busy timeout (the app writes the same file)
// and transactions that take the write lock at their start.
func sqliteDSN(conn string) string {
	sep := "?"
	if strings.Contains(conn, "?") {
		sep = "&"
	}
	return conn + sep + "_pragma=busy_timeout(10000)&_txlock=immediate"
}

// listen wakes the relay on the schema trigger's NOTIFY, reconnecting
// after errors, until ctx ends; after each (re)connect it wakes the relay
// once, for what was committed while it was not listening.
func (r *Relay) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.Debug("outbox LISTEN connection lost; reconnecting", "err", err)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, r.cfg.PollInterval)
	}
}

func (r *Relay) listenOnce(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, r.cfg.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{outboxsql.Channel(r.cfg.Table)}.Sanitize()); err != nil {
		return err
	}
	r.Wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		r.Wake()
	}
}
