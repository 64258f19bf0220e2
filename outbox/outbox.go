// Package outbox writes jobs into a table of the app's own database, inside
// the app's own transaction, for Sepp to relay: the job exists if and only
// if the transaction commits.
//
//	tx, err := db.BeginTx(ctx, nil)
//	// ... INSERT INTO orders ...
//	id, err := outbox.Enqueue(ctx, tx, sepp.EnqueueRequest{
//		Queue: "emails", JobType: "order_confirmation", Payload: body,
//	})
//	err = tx.Commit()
//
// `sepp outbox schema --dialect postgres|mysql|sqlite` prints the table's
// DDL (Schema here); `sepp serve` relays the rows of each database named in
// the config's [[outboxes]] into jobs, exactly once per row, and deletes them.
// A row without an idempotency key is enqueued with its id as the key (unless
// the queue derives keys from the payload), so a relay that crashes between
// the enqueue and the delete sends a hit, never a second job.
//
// The writer checks a row as the server checks an enqueue (queue and job
// type names, key, payload and header sizes), so a mistake fails the
// caller's transaction instead of reaching the dead table later.
package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/config"
)

// Writer inserts outbox rows. The zero Writer writes to PostgreSQL's
// "sepp_outbox" with the server's default limits.
type Writer struct {
	Dialect Dialect
	// Table is the outbox table. Default "sepp_outbox".
	Table string
	// MaxPayloadBytes and MaxIdempotencyKeyBytes are the server's
	// max_payload_bytes and max_idempotency_key_bytes, when changed from
	// their defaults (1 MiB and 256 bytes).
	MaxPayloadBytes        int64
	MaxIdempotencyKeyBytes int
}

// Execer is what Writer.Enqueue writes through: *sql.Tx (and *sql.DB,
// *sql.Conn, though a row written outside the transaction that makes its
// reason true is not what an outbox is for).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Enqueue writes req as a row of PostgreSQL's "sepp_outbox"
// through tx and returns the row's id. Use a Writer for MySQL, another
// table or other limits.
func Enqueue(ctx context.Context, tx *sql.Tx, req sepp.EnqueueRequest) (string, error) {
	return Writer{}.Enqueue(ctx, tx, req)
}

// EnqueuePgx is Enqueue for a pgx transaction.
func EnqueuePgx(ctx context.Context, tx pgx.Tx, req sepp.EnqueueRequest) (string, error) {
	return Writer{}.EnqueuePgx(ctx, tx, req)
}

// Enqueue writes req as a row through tx and returns the row's id, a
// UUIDv7. It returns a *sepp.Error with the server's reason (errors.Is
// sepp.ErrInvalidField, sepp.ErrPayloadTooLarge, ...) for a request the
// server would refuse, and the driver's error when the insert fails.
func (w Writer) Enqueue(ctx context.Context, tx Execer, req sepp.EnqueueRequest) (string, error) {
	// A row written in a traced request carries its trace context to the
	// job, as an Enqueue would (docs/observability.md).
	req.Headers = sepp.TraceHeaders(ctx, req.Headers)
	query, args, id, err := w.row(req)
	if err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		return "", fmt.Errorf("outbox: insert into %s: %w", w.table(), err)
	}
	return id, nil
}

// EnqueuePgx is Enqueue for a pgx transaction (PostgreSQL only).
func (w Writer) EnqueuePgx(ctx context.Context, tx interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, req sepp.EnqueueRequest) (string, error) {
	if w.Dialect != Postgres {
		return "", fmt.Errorf("outbox: EnqueuePgx writes to PostgreSQL, but the Writer's dialect is %v", w.Dialect)
	}
	req.Headers = sepp.TraceHeaders(ctx, req.Headers)
	query, args, id, err := w.row(req)
	if err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, query, args...); err != nil {
		return "", fmt.Errorf("outbox: insert into %s: %w", w.table(), err)
	}
	return id, nil
}

func (w Writer) table() string {
	if w.Table == "" {
		return DefaultTable
	}
	return w.Table
}

// row checks req and builds the INSERT of its row.
func (w Writer) row(req sepp.EnqueueRequest) (query string, args []any, id string, err error) {
	table := w.table()
	if err := CheckTable(table); err != nil {
		return "", nil, "", fmt.Errorf("outbox: %w", err)
	}
	if err := w.check(&req); err != nil {
		return "", nil, "", err
	}
	u, err := uuid.NewV7()
	if err != nil {
		return "", nil, "", fmt.Errorf("outbox: make a row id: %w", err)
	}
	id = u.String()
	var key, headers, runAt any
	if req.IdempotencyKey != nil {
		key = *req.IdempotencyKey
	}
	if len(req.Headers) > 0 {
		b, _ := json.Marshal(req.Headers) // a map[string]string always marshals
		headers = string(b)
	}
	payload := req.Payload
	if payload == nil {
		payload = []byte{}
	}
	ph := "$1, $2, $3, $4, $5, ($6::text)::jsonb, $7, $8, $9"
	switch w.Dialect {
	case MySQL:
		ph = "?, ?, ?, ?, ?, ?, ?, ?, ?"
		if !req.RunAt.IsZero() {
			runAt = req.RunAt.UTC().Format("2006-01-02 15:04:05.999999")
		}
	case SQLite:
		ph = "?, ?, ?, ?, ?, ?, ?, ?, ?"
		if !req.RunAt.IsZero() {
			runAt = FormatSQLiteTime(req.RunAt)
		}
	case Postgres:
		if !req.RunAt.IsZero() {
			runAt = req.RunAt
		}
	default:
		return "", nil, "", fmt.Errorf("outbox: unknown dialect %v", w.Dialect)
	}
	query = "INSERT INTO " + table + " (id, queue, job_type, payload, idempotency_key, headers, priority, max_attempts, run_at) VALUES (" + ph + ")"
	return query, []any{id, req.Queue, req.JobType, payload, key, headers, req.Priority, req.MaxAttempts, runAt}, id, nil
}

// FormatSQLiteTime is how times are stored in SQLite outbox tables: UTC,
// milliseconds, as the schema's default for created_at writes them.
func FormatSQLiteTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// check applies the server's enqueue rules that do not depend on its
// config beyond the two limits a Writer carries.
func (w Writer) check(req *sepp.EnqueueRequest) error {
	if err := config.CheckQueueName(req.Queue); err != nil {
		return invalid("queue: %v", err)
	}
	switch jt := req.JobType; {
	case jt == "":
		return invalid("job_type: is required")
	case len(jt) > config.MaxJobTypeBytes:
		return invalid("job_type: is %d bytes; the limit is %d", len(jt), config.MaxJobTypeBytes)
	case !utf8.ValidString(jt):
		return invalid("job_type: is not valid UTF-8")
	}
	if req.IdempotencyKey != nil {
		max := w.MaxIdempotencyKeyBytes
		if max == 0 {
			max = config.DefaultMaxIdempotencyKeyBytes
		}
		switch k := *req.IdempotencyKey; {
		case k == "":
			return &sepp.Error{Code: "invalid_argument", Reason: sepp.ErrIdempotencyKeyEmpty.Error(), Index: -1,
				Message: "idempotency key is empty (often an unset variable): pass a key derived from what the job is about, or leave IdempotencyKey nil and the row's id becomes the key"}
		case !utf8.ValidString(k):
			return invalid("idempotency_key: is not valid UTF-8; keys are UTF-8 strings")
		case len(k) > max:
			return &sepp.Error{Code: "invalid_argument", Reason: sepp.ErrIdempotencyKeyTooLong.Error(), Index: -1,
				Message: fmt.Sprintf("idempotency key is %d bytes; the limit is %d (max_idempotency_key_bytes): use a shorter, stable id such as the entity or event id", len(k), max)}
		}
	}
	maxPayload := w.MaxPayloadBytes
	if maxPayload == 0 {
		maxPayload = config.DefaultMaxPayloadBytes
	}
	if n := int64(len(req.Payload)); n > maxPayload {
		return &sepp.Error{Code: "invalid_argument", Reason: sepp.ErrPayloadTooLarge.Error(), Index: -1,
			Message: fmt.Sprintf("payload is %d bytes; the limit is %d (max_payload_bytes): store large data elsewhere and enqueue a reference", n, maxPayload)}
	}
	if req.MaxAttempts < 0 {
		return invalid("max_attempts: must be >= 0 (0 means the queue's max_attempts), got %d", req.MaxAttempts)
	}
	if len(req.Headers) > config.MaxHeaderEntries {
		return invalid("headers: has %d entries; the limit is %d", len(req.Headers), config.MaxHeaderEntries)
	}
	size := 0
	for k, v := range req.Headers {
		size += len(k) + len(v)
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalid("headers: %q is not valid UTF-8", k)
		}
	}
	if size > config.MaxHeaderBytes {
		return invalid("headers: are %d bytes in all; the limit is %d: put large data in the payload", size, config.MaxHeaderBytes)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return &sepp.Error{Code: "invalid_argument", Reason: sepp.ErrInvalidField.Error(), Index: -1, Message: fmt.Sprintf(format, args...)}
}
