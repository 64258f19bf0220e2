// Package outboxsql is the one home of the outbox table: its DDL per dialect,
// its columns, its dead table and NOTIFY channel. The public package outbox
// (the writers) and internal/outboxrelay (the relay) both use it.
package outboxsql

import (
	"fmt"
	"strings"

	"github.com/sepp-dev/sepp/internal/config"
)

// Dialect is the SQL dialect of the app's database.
type Dialect int

const (
	// Postgres: PostgreSQL (pgx, pgx's stdlib, lib/pq).
	Postgres Dialect = iota
	// MySQL: MySQL 8 and MariaDB 10.6 or later (go-sql-driver/mysql).
	MySQL
	// SQLite (modernc.org/sqlite, mattn/go-sqlite3).
	SQLite
)

// String is the dialect's config name: "postgres", "mysql" or "sqlite".
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// ParseDialect reads a dialect's config name.
func ParseDialect(s string) (Dialect, error) {
	switch s {
	case "postgres", "postgresql":
		return Postgres, nil
	case "mysql", "mariadb":
		return MySQL, nil
	case "sqlite":
		return SQLite, nil
	}
	return 0, fmt.Errorf(`dialect must be "postgres", "mysql" or "sqlite", got %q`, s)
}

// DefaultTable is the outbox table's name unless one is configured.
const DefaultTable = "sepp_outbox"

// CheckTable checks that table is a plain SQL identifier, optionally
// schema-qualified ("app.sepp_outbox"): it is spliced into statements.
func CheckTable(table string) error {
	if err := config.CheckOutboxTable(table); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	return nil
}

// DeadTable is the table that takes the rows of table that Sepp refused for
// good: table + "_dead".
func DeadTable(table string) string { return table + "_dead" }

// Channel is the PostgreSQL NOTIFY channel the schema's trigger signals on
// an insert into table: the table's name without its schema.
func Channel(table string) string {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		return table[i+1:]
	}
	return table
}

// Columns are the outbox row's columns, in the order the writers insert and
// the relay reads them.
const Columns = "id, queue, job_type, payload, idempotency_key, headers, priority, max_attempts, run_at, created_at"

// Schema is the DDL of table (and its dead table, and on PostgreSQL the
// trigger that wakes the relay) in dialect d. Every statement is safe to
// run again; statements are separated by ";\n\n".
func Schema(d Dialect, table string) (string, error) {
	if err := CheckTable(table); err != nil {
		return "", err
	}
	dead, name := DeadTable(table), Channel(table)
	var s string
	switch d {
	case Postgres:
		s = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s (
  id              TEXT PRIMARY KEY,
  queue           TEXT NOT NULL,
  job_type        TEXT NOT NULL,
  payload         BYTEA NOT NULL,
  idempotency_key TEXT,
  headers         JSONB,
  priority        INTEGER NOT NULL DEFAULT 0,
  max_attempts    INTEGER NOT NULL DEFAULT 0,
  run_at          TIMESTAMPTZ,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX IF NOT EXISTS %[3]s_created_at ON %[1]s (created_at, id);

CREATE TABLE IF NOT EXISTS %[2]s (
  id              TEXT PRIMARY KEY,
  queue           TEXT NOT NULL,
  job_type        TEXT NOT NULL,
  payload         BYTEA NOT NULL,
  idempotency_key TEXT,
  headers         JSONB,
  priority        INTEGER NOT NULL DEFAULT 0,
  max_attempts    INTEGER NOT NULL DEFAULT 0,
  run_at          TIMESTAMPTZ,
  created_at      TIMESTAMPTZ NOT NULL,
  reason          TEXT NOT NULL,
  message         TEXT NOT NULL,
  dead_at         TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);

CREATE OR REPLACE FUNCTION %[1]s_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('%[3]s', '');
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER %[3]s_notify AFTER INSERT ON %[1]s
  FOR EACH STATEMENT EXECUTE FUNCTION %[1]s_notify()`, table, dead, name)
	case MySQL:
		s = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s (
  id              VARCHAR(255) NOT NULL PRIMARY KEY,
  queue           VARCHAR(255) NOT NULL,
  job_type        VARCHAR(255) NOT NULL,
  payload         LONGBLOB NOT NULL,
  idempotency_key TEXT NULL,
  headers         TEXT NULL,
  priority        INT NOT NULL DEFAULT 0,
  max_attempts    INT NOT NULL DEFAULT 0,
  run_at          DATETIME(6) NULL,
  created_at      DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  KEY %[3]s_created_at (created_at, id)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS %[2]s (
  id              VARCHAR(255) NOT NULL PRIMARY KEY,
  queue           VARCHAR(255) NOT NULL,
  job_type        VARCHAR(255) NOT NULL,
  payload         LONGBLOB NOT NULL,
  idempotency_key TEXT NULL,
  headers         TEXT NULL,
  priority        INT NOT NULL DEFAULT 0,
  max_attempts    INT NOT NULL DEFAULT 0,
  run_at          DATETIME(6) NULL,
  created_at      DATETIME(6) NOT NULL,
  reason          VARCHAR(64) NOT NULL,
  message         TEXT NOT NULL,
  dead_at         DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`, table, dead, name)
	case SQLite:
		s = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s (
  id              TEXT NOT NULL PRIMARY KEY,
  queue           TEXT NOT NULL,
  job_type        TEXT NOT NULL,
  payload         BLOB NOT NULL,
  idempotency_key TEXT,
  headers         TEXT,
  priority        INTEGER NOT NULL DEFAULT 0,
  max_attempts    INTEGER NOT NULL DEFAULT 0,
  run_at          TEXT,
  created_at      TEXT NOT NULL DEFAULT (strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now'))
);

CREATE INDEX IF NOT EXISTS %[3]s_created_at ON %[1]s (created_at, id);

CREATE TABLE IF NOT EXISTS %[2]s (
  id              TEXT NOT NULL PRIMARY KEY,
  queue           TEXT NOT NULL,
  job_type        TEXT NOT NULL,
  payload         BLOB NOT NULL,
  idempotency_key TEXT,
  headers         TEXT,
  priority        INTEGER NOT NULL DEFAULT 0,
  max_attempts    INTEGER NOT NULL DEFAULT 0,
  run_at          TEXT,
  created_at      TEXT NOT NULL,
  reason          TEXT NOT NULL,
  message         TEXT NOT NULL,
  dead_at         TEXT NOT NULL DEFAULT (strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now'))
)`, table, dead, name)
	default:
		return "", fmt.Errorf("unknown dialect %v", d)
	}
	return s, nil
}

// Statements splits a Schema into its statements, for drivers that run one
// statement per call.
func Statements(schema string) []string {
	return strings.Split(schema, ";\n\n")
}
