// Package outboxrelay relays the rows of an app database's outbox table
// (package outbox writes them) into jobs: a pass claims committed rows
// (FOR UPDATE SKIP LOCKED on PostgreSQL and MySQL, so several Sepp nodes may
// relay one table), enqueues them as one batch through the server, and
// deletes them, or moves a row refused for good to the dead table, in the
// transaction that claimed them. A row is enqueued with its idempotency key,
// or its id when it has none, so a pass that dies after the enqueue and
// before its commit leaves rows whose next enqueue is a hit.
package outboxrelay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/outboxsql"
)

// Config is one outbox to relay.
type Config struct {
	Name    string
	Dialect outboxsql.Dialect
	// URL is the connection string: a postgres:// URL, a MySQL DSN or
	// mysql:// URL, or a SQLite path.
	URL          string
	Table        string
	BatchSize    int
	PollInterval time.Duration
}

// Enqueuer is the server's side: a non-atomic enqueue batch, and whether a
// queue derives keys of its own for a request without one (key_fields,
// dedup_by_content), in which case a row without a key is sent without one.
type Enqueuer interface {
	EnqueueBatch(ctx context.Context, req *seppv1.EnqueueBatchRequest) (*seppv1.EnqueueBatchResponse, error)
	DerivesKey(queue string) bool
}

// Info is what the relay last saw, for ListOutboxes.
type Info struct {
	Name, Dialect, Table string
	Lag                  time.Duration
	Relayed, Dead        int64
	CheckedAt            time.Time
	LastError            string
}

// Relay relays one outbox table. Create it with Open, run it with Run.
type Relay struct {
	cfg     Config
	db      *sql.DB
	enq     Enqueuer
	log     *slog.Logger
	metrics *Metrics
	q       queries
	wake    chan struct{}

	mu   sync.Mutex
	info Info
}

// Open opens the database of cfg (without connecting yet: a database that
// cannot be reached is the relay's to report and retry, not a reason to
// stop the server).
func Open(cfg Config, enq Enqueuer, m *Metrics, log *slog.Logger) (*Relay, error) {
	if err := outboxsql.CheckTable(cfg.Table); err != nil {
		return nil, err
	}
	db, err := openDB(cfg.Dialect, cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("outbox %q: %w", cfg.Name, err)
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 100
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	r := &Relay{cfg: cfg, db: db, enq: enq, log: log.With("outbox", cfg.Name), metrics: m,
		q: newQueries(cfg.Dialect, cfg.Table), wake: make(chan struct{}, 1)}
	r.info = Info{Name: cfg.Name, Dialect: cfg.Dialect.String(), Table: cfg.Table}
	// Every outbox's series exist from the start, at zero, so a rule on
	// their increase sees the first one.
	m.relayed.WithLabelValues(cfg.Name)
	m.errors.WithLabelValues(cfg.Name)
	m.lag.WithLabelValues(cfg.Name)
	return r, nil
}

// Info returns what the relay last saw.
func (r *Relay) Info() Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info
}

// Wake makes the relay look for rows now.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run relays until ctx ends, then closes the database.
func (r *Relay) Run(ctx context.Context) {
	defer r.db.Close()
	if r.cfg.Dialect == outboxsql.Postgres {
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.listen(lctx)
		}()
		defer func() { cancel(); <-done }() // the LISTEN connection is closed when Run returns
	}
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		n, retry, err := r.pass(ctx)
		r.record(err)
		switch {
		case err != nil || retry:
			// The database or Sepp failed, or refused rows for a while:
			// back off, up to the poll interval.
			backoff = min(max(2*backoff, 50*time.Millisecond), r.cfg.PollInterval)
			if !sleep(ctx, backoff) {
				return
			}
			continue
		case n == r.cfg.BatchSize:
			backoff = 0
			continue // more rows may wait
		}
		backoff = 0
		t := time.NewTimer(r.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// record keeps the pass's error for Info, logging when it changes.
func (r *Relay) record(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
		r.metrics.errors.WithLabelValues(r.cfg.Name).Inc()
	}
	r.mu.Lock()
	prev := r.info.LastError
	r.info.LastError = msg
	r.mu.Unlock()
	switch {
	case msg != "" && msg != prev:
		r.log.Warn("outbox relay failed; retrying", "err", msg)
	case msg == "" && prev != "":
		r.log.Info("outbox relay recovered")
	}
}

// row is one outbox row as read.
type row struct {
	id, queue, jobType string
	payload            []byte
	key, headers       sql.NullString
	priority           int32
	maxAttempts        int32
	runAt, createdAt   dbTime
}

// pass claims up to a batch of rows, enqueues them and deletes them (or
// moves them to the dead table) in one transaction. It returns how many
// rows it claimed, and retry when Sepp refused some for a while (they stay).
func (r *Relay) pass(ctx context.Context) (n int, retry bool, err error) {
	var opts *sql.TxOptions
	if r.cfg.Dialect == outboxsql.MySQL {
		// InnoDB's default, REPEATABLE READ, locks the gaps of the
		// created_at index the claim walks, and the app's inserts into
		// them then deadlock with the relay; READ COMMITTED locks only
		// the rows claimed.
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := r.db.BeginTx(ctx, opts)
	if err != nil {
		return 0, false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	rows, err := r.claim(ctx, tx)
	if err != nil {
		return 0, false, err
	}
	if len(rows) == 0 {
		return 0, false, r.measureLag(ctx, tx)
	}
	req := &seppv1.EnqueueBatchRequest{Jobs: make([]*seppv1.EnqueueRequest, 0, len(rows))}
	type dead struct{ id, reason, message string }
	var deads []dead
	sent := make([]int, 0, len(rows)) // index in rows of each job in req
	for i := range rows {
		j, reason, msg := r.job(&rows[i])
		if j == nil {
			deads = append(deads, dead{rows[i].id, reason, msg})
			continue
		}
		req.Jobs = append(req.Jobs, j)
		sent = append(sent, i)
	}
	var done []string
	if len(req.Jobs) > 0 {
		res, err := r.enq.EnqueueBatch(ctx, req)
		if err != nil {
			return len(rows), false, fmt.Errorf("enqueue: %w", err)
		}
		for k, out := range res.GetResults() {
			row := &rows[sent[k]]
			e := out.GetError()
			switch {
			case e == nil:
				done = append(done, row.id)
			case transient(e.GetCode()):
				retry = true
				r.log.Debug("outbox row refused for now; it stays", "id", row.id, "reason", e.GetReason(), "err", e.GetMessage())
			case e.GetReason() == seppv1.Reason_DUPLICATE_JOB.String() && !row.key.Valid && !r.enq.DerivesKey(row.queue):
				// Keyed by the row's own id: the job is this row's, made
				// by a pass that did not get to delete it.
				done = append(done, row.id)
			default:
				deads = append(deads, dead{row.id, e.GetReason(), e.GetMessage()})
			}
		}
	}
	for _, d := range deads {
		if _, err := tx.ExecContext(ctx, r.q.moveDead, d.reason, truncate(d.message, 2000), d.id); err != nil {
			return len(rows), false, fmt.Errorf("move row %s to %s: %w", d.id, outboxsql.DeadTable(r.cfg.Table), err)
		}
		done = append(done, d.id)
	}
	if len(done) > 0 {
		if _, err := tx.ExecContext(ctx, r.q.deleteRows(len(done)), anys(done)...); err != nil {
			return len(rows), false, fmt.Errorf("delete relayed rows: %w", err)
		}
	}
	lagErr := r.measureLag(ctx, tx)
	if err := tx.Commit(); err != nil {
		return len(rows), false, fmt.Errorf("commit: %w", err)
	}
	relayed := int64(len(done) - len(deads))
	r.metrics.relayed.WithLabelValues(r.cfg.Name).Add(float64(relayed))
	for _, d := range deads {
		r.metrics.dead.WithLabelValues(r.cfg.Name, d.reason).Inc()
		r.log.Warn("outbox row refused; moved to the dead table", "id", d.id, "table", outboxsql.DeadTable(r.cfg.Table), "reason", d.reason, "err", d.message)
	}
	r.mu.Lock()
	r.info.Relayed += relayed
	r.info.Dead += int64(len(deads))
	r.mu.Unlock()
	return len(rows), retry, lagErr
}

// claim reads and locks the oldest rows.
func (r *Relay) claim(ctx context.Context, tx *sql.Tx) ([]row, error) {
	rs, err := tx.QueryContext(ctx, r.q.claim, r.cfg.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("claim rows of %s: %w", r.cfg.Table, err)
	}
	defer rs.Close()
	var rows []row
	for rs.Next() {
		var w row
		if err := rs.Scan(&w.id, &w.queue, &w.jobType, &w.payload, &w.key, &w.headers, &w.priority, &w.maxAttempts, &w.runAt, &w.createdAt); err != nil {
			return nil, fmt.Errorf("read a row of %s: %w", r.cfg.Table, err)
		}
		rows = append(rows, w)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("claim rows of %s: %w", r.cfg.Table, err)
	}
	return rows, nil
}

// job is row's enqueue, or nil with the reason the row can never be one.
func (r *Relay) job(w *row) (*seppv1.EnqueueRequest, string, string) {
	j := &seppv1.EnqueueRequest{Queue: w.queue, JobType: w.jobType, Payload: w.payload, Priority: w.priority, MaxAttempts: w.maxAttempts}
	switch {
	case w.key.Valid:
		k := w.key.String
		j.IdempotencyKey = &k
	case !r.enq.DerivesKey(w.queue):
		k := w.id
		j.IdempotencyKey = &k
	}
	if w.headers.Valid && w.headers.String != "" && w.headers.String != "null" {
		if err := json.Unmarshal([]byte(w.headers.String), &j.Headers); err != nil {
			return nil, seppv1.Reason_INVALID_FIELD.String(), "headers: must be a JSON object of strings, like {\"trace\":\"abc\"}: " + err.Error()
		}
	}
	if w.runAt.Valid {
		j.RunAt = timestamppb.New(w.runAt.Time)
	}
	return j, "", ""
}

// measureLag sets the lag: the age of the oldest row left, by the
// database's clock.
func (r *Relay) measureLag(ctx context.Context, tx *sql.Tx) error {
	var ms sql.NullFloat64
	if err := tx.QueryRowContext(ctx, r.q.lag).Scan(&ms); err != nil {
		return fmt.Errorf("measure the lag of %s: %w", r.cfg.Table, err)
	}
	lag := time.Duration(0)
	if ms.Valid && ms.Float64 > 0 {
		lag = time.Duration(ms.Float64 * float64(time.Millisecond))
	}
	r.metrics.lag.WithLabelValues(r.cfg.Name).Set(lag.Seconds())
	r.mu.Lock()
	r.info.Lag = lag
	r.info.CheckedAt = time.Now()
	r.mu.Unlock()
	return nil
}

// transient says whether an item error's code means "not now" rather than
// "never": the row stays for a later pass.
func transient(code string) bool {
	switch code {
	case "unavailable", "resource_exhausted", "internal", "aborted", "deadline_exceeded", "unknown", "canceled":
		return true
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// dbTime scans a timestamp column of any dialect: time.Time (PostgreSQL,
// MySQL with parseTime), or text (SQLite).
type dbTime struct {
	Time  time.Time
	Valid bool
}

func (t *dbTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*t = dbTime{}
	case time.Time:
		*t = dbTime{x, true}
	case string:
		return t.parse(x)
	case []byte:
		return t.parse(string(x))
	default:
		return fmt.Errorf("a time column holds %T", v)
	}
	return nil
}

func (t *dbTime) parse(s string) error {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00"} {
		if p, err := time.Parse(layout, s); err == nil {
			*t = dbTime{p.UTC(), true}
			return nil
		}
	}
	return fmt.Errorf("a time column holds %q, not an RFC 3339 time in UTC", s)
}
