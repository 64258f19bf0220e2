// Package inbox makes a handler's database writes happen once per message:
// it records (consumer, message id) in the same transaction as the writes, so
// a redelivered message finds its row and commits nothing new.
//
//	ib := inbox.New(db, inbox.Postgres)
//	err := ib.CreateTable(ctx) // once, at start
//	done, err := ib.Process(ctx, "ledger", job.ID, func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, `INSERT INTO ledger (order_id, cents) VALUES ($1, $2)`, order, cents)
//		return err
//	})
//
// The inbox covers what is written through tx, nothing else: a mail or a
// charge is outside the transaction and needs an effect key (package
// effect). Works with any database/sql driver for SQLite or PostgreSQL.
package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Dialect is the SQL dialect of the database.
type Dialect int

const (
	// SQLite (mattn/go-sqlite3, modernc.org/sqlite, ...).
	SQLite Dialect = iota
	// Postgres (pgx's stdlib, lib/pq, ...).
	Postgres
)

// DefaultTable is the inbox table's name unless Options.Table says otherwise.
const DefaultTable = "sepp_inbox"

// Options tune New.
type Options struct {
	// Table is the inbox table. Default "sepp_inbox".
	Table string
}

// Inbox records processed messages in a table of db.
type Inbox struct {
	db     *sql.DB
	table  string
	insert string
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// New returns an inbox over db. It panics on a table name that is not a
// plain SQL identifier (a programming error).
func New(db *sql.DB, d Dialect, opts ...Options) *Inbox {
	table := DefaultTable
	if len(opts) > 0 && opts[0].Table != "" {
		table = opts[0].Table
	}
	if !tableName.MatchString(table) {
		panic(fmt.Sprintf("inbox: table %q is not a plain SQL identifier", table))
	}
	ph := "?, ?, ?"
	if d == Postgres {
		ph = "$1, $2, $3"
	}
	return &Inbox{db: db, table: table,
		insert: `INSERT INTO ` + table + ` (consumer, message_id, processed_at) VALUES (` + ph + `) ON CONFLICT DO NOTHING`}
}

// CreateTable creates the inbox table if it does not exist.
func (ib *Inbox) CreateTable(ctx context.Context) error {
	_, err := ib.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+ib.table+` (
  consumer     TEXT NOT NULL,
  message_id   TEXT NOT NULL,
  processed_at TEXT NOT NULL,
  PRIMARY KEY (consumer, message_id))`)
	return err
}

// ErrEmptyID: a consumer or message id is empty; nothing ran.
var ErrEmptyID = errors.New("inbox: consumer and message id must not be empty")

// Process runs fn in a transaction that also records (consumer,
// messageID), and commits both together. If the message was already
// processed it runs nothing and returns false. An error from fn rolls back
// fn's writes and the record, so a redelivery runs fn again.
func (ib *Inbox) Process(ctx context.Context, consumer, messageID string, fn func(ctx context.Context, tx *sql.Tx) error) (processed bool, err error) {
	if consumer == "" || messageID == "" {
		return false, ErrEmptyID
	}
	tx, err := ib.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	r, err := tx.ExecContext(ctx, ib.insert, consumer, messageID, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return false, fmt.Errorf("inbox: record %s/%s: %w", consumer, messageID, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return false, err
	} else if n == 0 {
		return false, nil // already processed: a redelivery
	}
	if err := fn(ctx, tx); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}
