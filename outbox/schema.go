package outbox

import "github.com/sepp-dev/sepp/internal/outboxsql"

// Dialect is the SQL dialect of the app's database.
type Dialect = outboxsql.Dialect

// The dialects.
const (
	// Postgres: PostgreSQL (pgx, pgx's stdlib, lib/pq).
	Postgres = outboxsql.Postgres
	// MySQL: MySQL 8 and MariaDB 10.6 or later (go-sql-driver/mysql).
	MySQL = outboxsql.MySQL
	// SQLite (modernc.org/sqlite, mattn/go-sqlite3).
	SQLite = outboxsql.SQLite
)

// DefaultTable is the outbox table's name unless one is configured.
const DefaultTable = outboxsql.DefaultTable

// ParseDialect reads a dialect's config name: "postgres", "mysql" or
// "sqlite".
func ParseDialect(s string) (Dialect, error) { return outboxsql.ParseDialect(s) }

// Schema is the DDL of table (and its dead table, and on PostgreSQL the
// trigger that wakes the relay) in dialect d, as `sepp outbox schema`
// prints it. Every statement is safe to run again; Statements splits it.
func Schema(d Dialect, table string) (string, error) { return outboxsql.Schema(d, table) }

// Statements splits a Schema into its statements, for drivers that run one
// statement per call.
func Statements(schema string) []string { return outboxsql.Statements(schema) }

// CheckTable checks that table is a plain SQL identifier, optionally
// schema-qualified ("app.sepp_outbox").
func CheckTable(table string) error { return outboxsql.CheckTable(table) }
