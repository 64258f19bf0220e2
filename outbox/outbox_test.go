package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	_ "modernc.org/sqlite"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
	"github.com/sepp-dev/sepp/outbox"
)

// appDB is an app's database with the outbox schema, and the connection
// string the relay gets.
type appDB struct {
	dialect outbox.Dialect
	db      *sql.DB
	url     string
}

// openApp makes a database of dialect d of the test's own, with the schema
// `sepp outbox schema` prints.
func openApp(t *testing.T, d outbox.Dialect) *appDB {
	t.Helper()
	a := &appDB{dialect: d}
	var err error
	switch d {
	case outbox.Postgres:
		a.url = testserver.PostgresSchema(t, "outbox")
		a.db, err = sql.Open("pgx", a.url)
	case outbox.MySQL:
		a.url = testserver.MySQLDatabase(t, "outbox")
		a.db, err = sql.Open("mysql", a.url)
	case outbox.SQLite:
		a.url = filepath.Join(t.TempDir(), "app.db")
		a.db, err = sql.Open("sqlite", a.url+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.db.Close() })
	ddl, err := outbox.Schema(d, outbox.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range outbox.Statements(ddl) {
		if _, err := a.db.Exec(stmt); err != nil {
			t.Fatalf("%v: %v\n%s", d, err, stmt)
		}
	}
	return a
}

func (a *appDB) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := a.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// serve starts a real server relaying a's outbox.
func serve(t *testing.T, a *appDB, extra string) (*testserver.Server, *sepp.Client) {
	t.Helper()
	env := "SEPP_TEST_APP_DB_" + strings.ToUpper(a.dialect.String())
	t.Setenv(env, a.url)
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: fmt.Sprintf(`
[server]
strict = true
max_payload_bytes = 1024

[[queues]]
name = "mail"
job_types = ["receipt", "welcome"]

[[queues]]
name = "events"
key_fields = ["/event"]

%s

[[outboxes]]
name = "app"
dialect = %q
url_env = %q
poll_interval_ms = 20
`, extra, a.dialect, env)})
	c, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

func dialects(t *testing.T, f func(t *testing.T, d outbox.Dialect)) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		t.Run(d.String(), func(t *testing.T) { f(t, d) })
	}
}

// TestRelay: rows of committed transactions become one job each, with
// their fields; rows of rolled-back ones none; a row the server refuses
// for good (an unknown queue, a payload over max_payload_bytes) goes to the
// dead table with its reason and the rows after it are relayed; a row with its own key that was used before is a hit.
func TestRelay(t *testing.T) {
	dialects(t, func(t *testing.T, d outbox.Dialect) {
		ctx := context.Background()
		a := openApp(t, d)
		_, c := serve(t, a, "")
		w := outbox.Writer{Dialect: d}
		runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)

		tx, err := a.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := w.Enqueue(ctx, tx, sepp.EnqueueRequest{Queue: "mail", JobType: "receipt", Payload: []byte(`{"order":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Enqueue(ctx, tx, sepp.EnqueueRequest{Queue: "mail", JobType: "welcome", Payload: []byte(`{"user":7}`),
			IdempotencyKey: sepp.Key("welcome-7"), Priority: 5, MaxAttempts: 3, Headers: map[string]string{"trace": "t-1"}, RunAt: runAt}); err != nil {
			t.Fatal(err)
		}
		derived, err := w.Enqueue(ctx, tx, sepp.EnqueueRequest{Queue: "events", JobType: "e", Payload: []byte(`{"event":"ev-1"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}

		tx, err = a.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var rolledBack []string
		for i := range 2 {
			id, err := w.Enqueue(ctx, tx, sepp.EnqueueRequest{Queue: "mail", JobType: "receipt", Payload: []byte(fmt.Sprintf(`{"order":%d}`, 100+i))})
			if err != nil {
				t.Fatal(err)
			}
			rolledBack = append(rolledBack, id)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}

		// A row for a queue the strict server does not know, written by
		// hand (the writer cannot know the server's queues), then rows
		// behind it.
		if _, err := a.db.Exec(fmt.Sprintf("INSERT INTO sepp_outbox (id, queue, job_type, payload) VALUES (%s, %s, %s, %s)",
			ph(d, 1), ph(d, 2), ph(d, 3), ph(d, 4)), "bad-row", "nope", "receipt", []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.db.Exec(fmt.Sprintf("INSERT INTO sepp_outbox (id, queue, job_type, payload) VALUES (%s, %s, %s, %s)",
			ph(d, 1), ph(d, 2), ph(d, 3), ph(d, 4)), "big-row", "mail", "receipt", []byte(strings.Repeat("x", 2048))); err != nil {
			t.Fatal(err)
		}
		var later []string
		for i := range 3 {
			id, err := w.Enqueue(ctx, a.db, sepp.EnqueueRequest{Queue: "mail", JobType: "receipt", Payload: []byte(fmt.Sprintf(`{"order":%d}`, 10+i))})
			if err != nil {
				t.Fatal(err)
			}
			later = append(later, id)
		}
		testserver.Await(t, "the outbox emptied", func() bool { return a.count(t, "sepp_outbox") == 0 })

		// One job per committed row, with its fields.
		job := func(queue, key string) *sepp.Job {
			t.Helper()
			l, err := c.LookupIdempotencyKey(ctx, queue, key)
			if err != nil || !l.Found {
				t.Fatalf("key %s on %s: %+v, %v", key, queue, l, err)
			}
			j, err := c.GetJob(ctx, l.JobID)
			if err != nil {
				t.Fatal(err)
			}
			return j
		}
		if j := job("mail", plain); string(j.Payload) != `{"order":1}` || j.JobType != "receipt" {
			t.Errorf("the plain row's job: %+v", j)
		}
		j := job("mail", "welcome-7")
		if j.Priority != 5 || j.MaxAttempts != 3 || j.Headers["trace"] != "t-1" || !j.RunAt.Equal(runAt) {
			t.Errorf("the keyed row's job: priority %d, max attempts %d, headers %v, run at %v (want %v)", j.Priority, j.MaxAttempts, j.Headers, j.RunAt, runAt)
		}
		// A queue with key_fields derives the key; the row's id is not it.
		if l, err := c.LookupIdempotencyKeyByPayload(ctx, "events", []byte(`{"event":"ev-1"}`)); err != nil || !l.Found {
			t.Errorf("the derived-key row: %+v, %v", l, err)
		}
		if l, err := c.LookupIdempotencyKey(ctx, "events", derived); err != nil || l.Found {
			t.Errorf("the derived-key row was also keyed by its id: %+v, %v", l, err)
		}
		for _, id := range later {
			job("mail", id)
		}
		for _, id := range rolledBack {
			if l, err := c.LookupIdempotencyKey(ctx, "mail", id); err != nil || l.Found {
				t.Errorf("a rolled-back row became a job: %+v, %v", l, err)
			}
		}
		if n := countJobs(t, c, "mail"); n != 5 {
			t.Errorf("queue mail has %d jobs, want 5", n)
		}

		// The refused row, with its reason.
		var reason, msg string
		if err := a.db.QueryRow("SELECT reason, message FROM sepp_outbox_dead WHERE id = 'bad-row'").Scan(&reason, &msg); err != nil {
			t.Fatalf("dead row: %v", err)
		}
		if reason != "UNKNOWN_QUEUE" || !strings.Contains(msg, `"nope"`) {
			t.Errorf("dead row: %s %q", reason, msg)
		}
		if err := a.db.QueryRow("SELECT reason FROM sepp_outbox_dead WHERE id = 'big-row'").Scan(&reason); err != nil || reason != "PAYLOAD_TOO_LARGE" {
			t.Errorf("the row over max_payload_bytes: %q, %v", reason, err)
		}

		// The same key again: a hit on the job there is.
		if _, err := w.Enqueue(ctx, a.db, sepp.EnqueueRequest{Queue: "mail", JobType: "welcome", Payload: []byte(`{"user":7}`), IdempotencyKey: sepp.Key("welcome-7")}); err != nil {
			t.Fatal(err)
		}
		testserver.Await(t, "the outbox emptied", func() bool { return a.count(t, "sepp_outbox") == 0 })
		if n := countJobs(t, c, "mail"); n != 5 {
			t.Errorf("after a row with a used key, queue mail has %d jobs, want 5", n)
		}

		// The counts are updated after the commit that emptied the table.
		var infos []sepp.OutboxInfo
		testserver.Await(t, "the relay's counts", func() bool {
			infos, err = c.ListOutboxes(ctx)
			if err != nil || len(infos) != 1 {
				t.Fatalf("ListOutboxes: %+v, %v", infos, err)
			}
			return infos[0].Relayed+infos[0].Dead >= 9
		})
		if in := infos[0]; in.Name != "app" || in.Dialect != d.String() || in.Table != "sepp_outbox" || in.Relayed != 7 || in.Dead != 2 || in.LastError != "" || in.CheckedAt.IsZero() {
			t.Errorf("ListOutboxes: %+v", in)
		}
	})
}

// ph is the n-th placeholder in d.
func ph(d outbox.Dialect, n int) string {
	if d == outbox.Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

func countJobs(t *testing.T, c *sepp.Client, queue string) int {
	t.Helper()
	n, token := 0, ""
	for {
		page, err := c.ListJobs(context.Background(), sepp.ListJobsRequest{Queue: queue, PageSize: 500, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Jobs)
		if token = page.NextPageToken; token == "" {
			return n
		}
	}
}

// TestWriterChecks: the writer refuses what the server would, with the
// server's reasons, and writes nothing.
func TestWriterChecks(t *testing.T) {
	a := openApp(t, outbox.SQLite)
	w := outbox.Writer{Dialect: outbox.SQLite, MaxPayloadBytes: 10}
	for _, c := range []struct {
		name string
		req  sepp.EnqueueRequest
		want error
	}{
		{"no queue", sepp.EnqueueRequest{JobType: "t"}, sepp.ErrInvalidField},
		{"queue with spaces", sepp.EnqueueRequest{Queue: " q", JobType: "t"}, sepp.ErrInvalidField},
		{"no job type", sepp.EnqueueRequest{Queue: "q"}, sepp.ErrInvalidField},
		{"long job type", sepp.EnqueueRequest{Queue: "q", JobType: strings.Repeat("t", 256)}, sepp.ErrInvalidField},
		{"empty key", sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("")}, sepp.ErrIdempotencyKeyEmpty},
		{"long key", sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(strings.Repeat("k", 257))}, sepp.ErrIdempotencyKeyTooLong},
		{"large payload", sepp.EnqueueRequest{Queue: "q", JobType: "t", Payload: []byte("01234567890")}, sepp.ErrPayloadTooLarge},
		{"negative attempts", sepp.EnqueueRequest{Queue: "q", JobType: "t", MaxAttempts: -1}, sepp.ErrInvalidField},
		{"large headers", sepp.EnqueueRequest{Queue: "q", JobType: "t", Headers: map[string]string{"h": strings.Repeat("v", 64<<10)}}, sepp.ErrInvalidField},
	} {
		if _, err := w.Enqueue(context.Background(), a.db, c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if n := a.count(t, "sepp_outbox"); n != 0 {
		t.Errorf("refused requests wrote %d rows", n)
	}
	if _, err := (outbox.Writer{Dialect: outbox.SQLite, Table: "x; DROP TABLE y"}).Enqueue(context.Background(), a.db, sepp.EnqueueRequest{Queue: "q", JobType: "t"}); err == nil {
		t.Error("a table name that is not an identifier was accepted")
	}
}

// TestEnqueuePgx: a row written through a pgx transaction is relayed like
// one written through database/sql, headers and run-at included.
func TestEnqueuePgx(t *testing.T) {
	ctx := context.Background()
	a := openApp(t, outbox.Postgres)
	_, c := serve(t, a, "")
	conn, err := pgx.Connect(ctx, a.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	id, err := outbox.EnqueuePgx(ctx, tx, sepp.EnqueueRequest{Queue: "mail", JobType: "receipt", Payload: []byte(`{"order":2}`),
		Headers: map[string]string{"trace": "t-2"}, RunAt: runAt})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var l *sepp.KeyLookup
	testserver.Await(t, "the row's job", func() bool {
		l, err = c.LookupIdempotencyKey(ctx, "mail", id)
		return err == nil && l.Found
	})
	j, err := c.GetJob(ctx, l.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if string(j.Payload) != `{"order":2}` || j.Headers["trace"] != "t-2" || !j.RunAt.Equal(runAt) {
		t.Errorf("job: payload %s, headers %v, run at %v (want %v)", j.Payload, j.Headers, j.RunAt, runAt)
	}
	if _, err := (outbox.Writer{Dialect: outbox.MySQL}).EnqueuePgx(ctx, tx, sepp.EnqueueRequest{Queue: "mail", JobType: "receipt"}); err == nil {
		t.Error("EnqueuePgx with a MySQL writer was accepted")
	}
}

// TestRelayWhileWriting: writers commit rows while the relay claims and
// deletes them; no writer's transaction fails for the relay's locks (on
// MySQL a claim under REPEATABLE READ locked the index gaps the writers
// insert into, and the writers deadlocked), and every row is one job.
func TestRelayWhileWriting(t *testing.T) {
	dialects(t, func(t *testing.T, d outbox.Dialect) {
		ctx := context.Background()
		a := openApp(t, d)
		_, c := serve(t, a, "")
		w := outbox.Writer{Dialect: d}
		const writers, perWriter = 4, 250
		var mu sync.Mutex
		var ids []string
		var g errgroup
		for i := range writers {
			g.Go(func() error {
				for n := 0; n < perWriter; {
					tx, err := a.db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					var mine []string
					for range min(1+(n%8), perWriter-n) {
						id, err := w.Enqueue(ctx, tx, sepp.EnqueueRequest{Queue: "mail", JobType: "receipt", Payload: []byte(fmt.Sprintf(`{"w":%d,"n":%d}`, i, n+len(mine)))})
						if err != nil {
							tx.Rollback()
							return err
						}
						mine = append(mine, id)
					}
					if err := tx.Commit(); err != nil {
						return err
					}
					n += len(mine)
					mu.Lock()
					ids = append(ids, mine...)
					mu.Unlock()
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("a writer failed beside the relay: %v", err)
		}
		testserver.Await(t, "the outbox emptied", func() bool { return a.count(t, "sepp_outbox") == 0 })
		if n := countJobs(t, c, "mail"); n != len(ids) {
			t.Errorf("%d rows, %d jobs", len(ids), n)
		}
	})
}

// errgroup runs functions and keeps the first error.
type errgroup struct {
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

func (g *errgroup) Go(f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil {
			g.once.Do(func() { g.err = err })
		}
	}()
}

func (g *errgroup) Wait() error { g.wg.Wait(); return g.err }

// TestWriterTraceContext: a row written in a traced request carries the
// request's trace context in its headers, beside the app's own; a row
// written outside any span carries none.
func TestWriterTraceContext(t *testing.T) {
	a := openApp(t, outbox.SQLite)
	w := outbox.Writer{Dialect: outbox.SQLite}
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("app").Start(context.Background(), "signup")
	defer span.End()
	headersOf := func(id string) map[string]string {
		t.Helper()
		var raw sql.NullString
		if err := a.db.QueryRow("SELECT headers FROM sepp_outbox WHERE id = ?", id).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		h := map[string]string{}
		if raw.Valid {
			if err := json.Unmarshal([]byte(raw.String), &h); err != nil {
				t.Fatal(err)
			}
		}
		return h
	}
	own := map[string]string{"X-Source": "signup"}
	traced, err := w.Enqueue(ctx, a.db, sepp.EnqueueRequest{Queue: "mail", JobType: "welcome", Headers: own})
	if err != nil {
		t.Fatal(err)
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if h := headersOf(traced); h["traceparent"] != want || h["X-Source"] != "signup" {
		t.Errorf("traced row: headers %v, want traceparent %s beside the app's", h, want)
	}
	if len(own) != 1 {
		t.Errorf("the app's headers map was written to: %v", own)
	}
	plain, err := w.Enqueue(context.Background(), a.db, sepp.EnqueueRequest{Queue: "mail", JobType: "welcome"})
	if err != nil {
		t.Fatal(err)
	}
	if h := headersOf(plain); len(h) != 0 {
		t.Errorf("untraced row: headers %v, want none", h)
	}
}
