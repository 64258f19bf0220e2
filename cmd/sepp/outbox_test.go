package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
	"github.com/sepp-dev/sepp/outbox"
)

// appOutbox is an app database on PostgreSQL, in a schema of the test's
// own, with the outbox table `sepp outbox schema` prints.
func appOutbox(t *testing.T) (*sql.DB, string) {
	t.Helper()
	url := testserver.PostgresSchema(t, "outbox_app")
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ddl, _, err := cli(t, "outbox", "schema", "--dialect", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ddl); err != nil {
		t.Fatalf("the printed schema: %v", err)
	}
	return db, url
}

// writeRows writes n outbox rows from writers goroutines, in transactions
// of 1 to 8 rows, and returns their ids. tick is called after each commit.
func writeRows(t *testing.T, db *sql.DB, n, writers int, tick func()) []string {
	t.Helper()
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	per := n / writers
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < per; {
				tx, err := db.Begin()
				if err != nil {
					errs <- err
					return
				}
				var mine []string
				for range min(1+rand.IntN(8), per-done) {
					id, err := outbox.Enqueue(context.Background(), tx, sepp.EnqueueRequest{Queue: "mail", JobType: "receipt",
						Payload: []byte(fmt.Sprintf(`{"writer":%d,"n":%d}`, w, done+len(mine)))})
					if err != nil {
						errs <- err
						return
					}
					mine = append(mine, id)
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
				done += len(mine)
				mu.Lock()
				ids = append(ids, mine...)
				mu.Unlock()
				tick()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

func outboxRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sepp_outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkOneJobPerRow: the queue holds exactly one job per row id, keyed by
// it.
func checkOneJobPerRow(t *testing.T, c *sepp.Client, ids []string) {
	t.Helper()
	ctx := context.Background()
	jobs, token := 0, ""
	for {
		page, err := c.ListJobs(ctx, sepp.ListJobsRequest{Queue: "mail", PageSize: 1000, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		jobs += len(page.Jobs)
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if jobs != len(ids) {
		t.Errorf("%d rows committed, %d jobs", len(ids), jobs)
	}
	missing := 0
	for _, id := range ids {
		l, err := c.LookupIdempotencyKey(ctx, "mail", id)
		if err != nil {
			t.Fatal(err)
		}
		if !l.Found {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d rows have no job", missing, len(ids))
	}
}

// TestOutboxRelayKilled: 5,000 rows written while the relaying sepp serve
// is killed with SIGKILL three times, each kill after a random number of
// commits, and restarted: 5,000 jobs, one per row.
func TestOutboxRelayKilled(t *testing.T) {
	skipShort(t)
	db, url := appOutbox(t)
	cfg := filepath.Join(t.TempDir(), "sepp.toml")
	os.WriteFile(cfg, []byte(`
[[queues]]
name = "mail"

[[outboxes]]
name = "app"
dialect = "postgres"
url_env = "APP_DATABASE_URL"
batch_size = 50
`), 0o644)
	logf, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p := &serverProcess{t: t, bin: buildSepp(t), addr: freePort(t), data: t.TempDir(), log: logf,
		args: []string{"--config", cfg}, env: []string{"APP_DATABASE_URL=" + url}}
	p.start()

	var commits progress
	kills := make(chan struct{})
	go func() {
		defer close(kills)
		for range 3 {
			<-commits.after(100 + rand.IntN(200))
			p.signal(syscall.SIGKILL)
			p.start()
		}
	}()
	ids := writeRows(t, db, 5000, 4, commits.add)
	await(t, kills, "three kills")
	testserver.Await(t, "the outbox emptied", func() bool { return outboxRows(t, db) == 0 })

	c, err := sepp.Connect(context.Background(), "http://"+p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkOneJobPerRow(t, c, ids)
	p.signal(syscall.SIGTERM)
}

// TestOutboxTwoNodes: two nodes on one PostgreSQL store relay one outbox
// table side by side while 8 writers fill it: one job per row.
func TestOutboxTwoNodes(t *testing.T) {
	skipShort(t)
	db, url := appOutbox(t)
	t.Setenv("APP_DATABASE_URL", url)
	clients, _ := clusterWith(t, 2, `
[[queues]]
name = "mail"

[[outboxes]]
name = "app"
dialect = "postgres"
url_env = "APP_DATABASE_URL"
batch_size = 20
`)
	ids := writeRows(t, db, 3000, 8, func() {})
	testserver.Await(t, "the outbox emptied", func() bool { return outboxRows(t, db) == 0 })
	checkOneJobPerRow(t, clients[0], ids)
	// The counts are updated after the commits that emptied the table.
	var relayed []int64
	testserver.Await(t, "the nodes' counts", func() bool {
		relayed = relayed[:0]
		for _, c := range clients {
			infos, err := c.ListOutboxes(context.Background())
			if err != nil || len(infos) != 1 {
				t.Fatalf("ListOutboxes: %v %v", infos, err)
			}
			relayed = append(relayed, infos[0].Relayed)
		}
		return relayed[0]+relayed[1] >= int64(len(ids))
	})
	t.Logf("rows relayed by each node: %v", relayed)
}

// TestCLIOutboxList: sepp outbox list shows the relay of a SQLite outbox
// after it relayed a row, in a table and in --json.
func TestCLIOutboxList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ddl, _, err := cli(t, "outbox", "schema", "--dialect", "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ddl); err != nil {
		t.Fatal(err)
	}
	t.Setenv("APP_SQLITE", path)
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: `
[[outboxes]]
name = "app"
dialect = "sqlite"
url_env = "APP_SQLITE"
poll_interval_ms = 20
`})
	if out, _, err := cli(t, "outbox", "list", "--addr", srv.URL); err != nil || !strings.Contains(out, "OUTBOX") || !strings.Contains(out, "app     sqlite   sepp_outbox") {
		t.Fatalf("outbox list before a row: %v\n%s", err, out)
	}
	if _, err := (outbox.Writer{Dialect: outbox.SQLite}).Enqueue(context.Background(), db, sepp.EnqueueRequest{Queue: "mail", JobType: "receipt"}); err != nil {
		t.Fatal(err)
	}
	testserver.Await(t, "the row relayed", func() bool {
		out, _, err := cli(t, "outbox", "list", "--addr", srv.URL, "--json")
		return err == nil && strings.Contains(out, `"relayed": "1"`)
	})
	if _, _, err := cli(t, "outbox", "schema", "--dialect", "oracle"); err == nil {
		t.Error("outbox schema --dialect oracle was accepted")
	}
}
