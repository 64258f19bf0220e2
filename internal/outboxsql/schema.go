// Package outboxsql is the one home of the outbox table: its DDL per dialect,
// its columns, its dead table and NOTIFY channel. The public package outbox
// (the writers) and internal/outboxrelay (the relay) both use it.
package outboxsql

import (
	"fmt"
	"slices"
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

// types are a dialect's column types, the default of the time columns
// (the database's clock, in UTC), and what follows a CREATE TABLE.
type types struct{ id, name, reason, bytes, json, integer, time, now, extra string }

var dialectTypes = map[Dialect]types{
	Postgres: {id: "TEXT", name: "TEXT", reason: "TEXT", bytes: "BYTEA", json: "JSONB", integer: "INTEGER",
		time: "TIMESTAMPTZ", now: "clock_timestamp()"},
	MySQL: {id: "VARCHAR(255)", name: "VARCHAR(255)", reason: "VARCHAR(64)", bytes: "LONGBLOB", json: "TEXT", integer: "INT",
		time: "DATETIME(6)", now: "(UTC_TIMESTAMP(6))", extra: " DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin"},
	SQLite: {id: "TEXT", name: "TEXT", reason: "TEXT", bytes: "BLOB", json: "TEXT", integer: "INTEGER",
		time: "TEXT", now: "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"},
}

// Schema is the DDL of table (and its dead table, and on PostgreSQL the
// trigger that wakes the relay) in dialect d. Every statement is safe to
// run again; statements are separated by ";\n\n".
func Schema(d Dialect, table string) (string, error) {
	if err := CheckTable(table); err != nil {
		return "", err
	}
	ty, ok := dialectTypes[d]
	if !ok {
		return "", fmt.Errorf("unknown dialect %v", d)
	}
	dead, name := DeadTable(table), Channel(table)
	// The row's columns, which the dead table repeats before its own.
	row := func(createdDefault string) string {
		return fmt.Sprintf(`  id              %[1]s NOT NULL PRIMARY KEY,
  queue           %[2]s NOT NULL,
  job_type        %[2]s NOT NULL,
  payload         %[3]s NOT NULL,
  idempotency_key TEXT,
  headers         %[4]s,
  priority        %[5]s NOT NULL DEFAULT 0,
  max_attempts    %[5]s NOT NULL DEFAULT 0,
  run_at          %[6]s,
  created_at      %[6]s NOT NULL%[7]s`, ty.id, ty.name, ty.bytes, ty.json, ty.integer, ty.time, createdDefault)
	}
	index := fmt.Sprintf("CREATE INDEX IF NOT EXISTS %[2]s_created_at ON %[1]s (created_at, id)", table, name)
	indexInTable := ""
	if d == MySQL { // MySQL has no CREATE INDEX IF NOT EXISTS
		index, indexInTable = "", fmt.Sprintf(",\n  KEY %s_created_at (created_at, id)", name)
	}
	stmts := []string{
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n%s%s\n)%s", table, row(" DEFAULT "+ty.now), indexInTable, ty.extra),
		index,
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n%s,\n  reason          %s NOT NULL,\n  message         TEXT NOT NULL,\n  dead_at         %s NOT NULL DEFAULT %s\n)%s",
			dead, row(""), ty.reason, ty.time, ty.now, ty.extra),
	}
	if d == Postgres {
		stmts = append(stmts, fmt.Sprintf(`CREATE OR REPLACE FUNCTION %[1]s_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('%[2]s', '');
  RETURN NULL;
END $$`, table, name), fmt.Sprintf(`CREATE OR REPLACE TRIGGER %[2]s_notify AFTER INSERT ON %[1]s
  FOR EACH STATEMENT EXECUTE FUNCTION %[1]s_notify()`, table, name))
	}
	return strings.Join(slices.DeleteFunc(stmts, func(s string) bool { return s == "" }), ";\n\n"), nil
}

// Statements splits a Schema into its statements, for drivers that run one
// statement per call.
func Statements(schema string) []string {
	return strings.Split(schema, ";\n\n")
}
