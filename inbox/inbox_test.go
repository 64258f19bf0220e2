package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // pure Go: the inbox tests need no cgo

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/effect"
	"github.com/sepp-dev/sepp/inbox"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// databases opens the databases the inbox is tested on: SQLite always, and
// PostgreSQL when SEPP_TEST_POSTGRES_URL is set (CI sets it, and there a
// database that cannot be reached fails the test).
func databases(t *testing.T) map[string]struct {
	db      *sql.DB
	dialect inbox.Dialect
	ph      func(n int) string
} {
	t.Helper()
	out := map[string]struct {
		db      *sql.DB
		dialect inbox.Dialect
		ph      func(n int) string
	}{}
	lite, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	out["sqlite"] = struct {
		db      *sql.DB
		dialect inbox.Dialect
		ph      func(n int) string
	}{lite, inbox.SQLite, func(int) string { return "?" }}

	url := os.Getenv("SEPP_TEST_POSTGRES_URL")
	if url == "" {
		t.Log("SEPP_TEST_POSTGRES_URL is not set: PostgreSQL not tested here (CI sets it)")
		return out
	}
	pg, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatalf("PostgreSQL at SEPP_TEST_POSTGRES_URL: %v", err)
	}
	t.Cleanup(func() { pg.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pg.PingContext(ctx); err != nil {
		t.Fatalf("PostgreSQL at SEPP_TEST_POSTGRES_URL does not answer: %v", err)
	}
	out["postgres"] = struct {
		db      *sql.DB
		dialect inbox.Dialect
		ph      func(n int) string
	}{pg, inbox.Postgres, func(n int) string { return fmt.Sprint("$", n) }}
	return out
}

// TestMessageDeliveredThreeTimes: a handler writes a ledger row through the
// inbox and sends a mail through an effect key. The message is delivered
// three times; the first delivery crashes after the mail, before its
// commit. One row, one mail.
func TestMessageDeliveredThreeTimes(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{RealTime: true})
	client, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	run := fmt.Sprint(time.Now().UnixNano())

	for name, d := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			table := "sepp_inbox_" + run
			ledger := "ledger_" + run
			ib := inbox.New(d.db, d.dialect, inbox.Options{Table: table})
			if err := ib.CreateTable(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := d.db.ExecContext(ctx, `CREATE TABLE `+ledger+` (order_id TEXT NOT NULL, cents INTEGER NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				d.db.Exec(`DROP TABLE ` + ledger)
				d.db.Exec(`DROP TABLE ` + table)
			})
			var mails atomic.Int32
			crash := errors.New("worker died after the mail, before the commit")
			handle := func(delivery int) (bool, error) {
				return ib.Process(ctx, "orders", "msg-order-9", func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, `INSERT INTO `+ledger+` (order_id, cents) VALUES (`+d.ph(1)+`, `+d.ph(2)+`)`, "order-9", 1999); err != nil {
						return err
					}
					_, err := effect.Do(ctx, client, "mail.invoice."+name+run, "order-9.invoice", effect.Options{},
						func(ctx context.Context) ([]byte, error) { mails.Add(1); return []byte("em_1"), nil })
					if err != nil {
						return err
					}
					if delivery == 1 {
						return crash
					}
					return nil
				})
			}
			if done, err := handle(1); done || !errors.Is(err, crash) {
				t.Fatalf("delivery 1: %v %v", done, err)
			}
			if done, err := handle(2); !done || err != nil {
				t.Fatalf("delivery 2: %v %v", done, err)
			}
			if done, err := handle(3); done || err != nil {
				t.Fatalf("delivery 3 must find the message processed: %v %v", done, err)
			}
			var rows int
			if err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM `+ledger).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != 1 || mails.Load() != 1 {
				t.Fatalf("rows=%d mails=%d, want 1 and 1", rows, mails.Load())
			}
		})
	}
}

func TestEmptyIDs(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ib := inbox.New(db, inbox.SQLite)
	ran := false
	if _, err := ib.Process(context.Background(), "c", "", func(context.Context, *sql.Tx) error { ran = true; return nil }); !errors.Is(err, inbox.ErrEmptyID) || ran {
		t.Fatalf("empty message id: %v (ran %v)", err, ran)
	}
}
