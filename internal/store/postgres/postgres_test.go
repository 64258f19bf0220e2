package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/postgres"
	"github.com/sepp-dev/sepp/internal/store/storetest"
)

var schemas atomic.Int64

// place creates a schema of its own in the database at
// SEPP_TEST_POSTGRES_URL, dropped when the test ends, and returns the URL
// that opens it. Without the variable the test is skipped; CI sets it, and
// there an unreachable database fails.
func place(t *testing.T) string {
	t.Helper()
	base := os.Getenv("SEPP_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("SEPP_TEST_POSTGRES_URL is not set (CI sets it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := fmt.Sprintf("sepp_test_%d_%d", time.Now().UnixNano(), schemas.Add(1))
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL at SEPP_TEST_POSTGRES_URL: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			c.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	// The schema names the store's connections too, so a test can find
	// them in pg_stat_activity and end them (see terminate).
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// withParam returns url with the query parameter name set to value.
func withParam(t *testing.T, rawURL, name, value string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// appName is the application_name of the connections opened with url.
func appName(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	name := u.Query().Get("application_name")
	if name == "" {
		t.Fatalf("%s names no application_name", rawURL)
	}
	return name
}

// terminate ends, with pg_terminate_backend, the connections named
// application (and, when listening is set, only those whose last statement
// was a LISTEN), waits until they are gone, and returns how many it ended.
func terminate(t *testing.T, application string, listening bool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, os.Getenv("SEPP_TEST_POSTGRES_URL"))
	if err != nil {
		t.Fatalf("PostgreSQL at SEPP_TEST_POSTGRES_URL: %v", err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, `SELECT pid FROM pg_stat_activity
 WHERE application_name = $1 AND pid <> pg_backend_pid() AND (NOT $2 OR query LIKE 'LISTEN%')`, application, listening)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if _, err := c.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
	}
	for {
		var left int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&left); err != nil {
			t.Fatalf("waiting for the ended connections to go: %v", err)
		}
		if left == 0 {
			return len(pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func openAt(ctx context.Context, url string) (store.Store, error) {
	return postgres.Open(ctx, postgres.Options{URL: url, MaxConns: 8})
}

// open returns a store on a fresh schema (see place).
func open(t *testing.T) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := openAt(ctx, place(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, open)
}

func TestDurable(t *testing.T) {
	storetest.RunDurable(t, storetest.Durable{
		Place: place,
		Open:  openAt,
		SetSchemaVersion: func(t *testing.T, url string, version int) {
			c, err := pgx.Connect(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			if _, err := c.Exec(context.Background(), `INSERT INTO sepp_schema_migrations (version) VALUES ($1)`, version); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestNotifier runs two stores on one schema, as two nodes on one
// database: what one writes reaches the other's LISTEN.
func TestNotifier(t *testing.T) {
	storetest.RunNotifier(t, storetest.Notify{
		Open: func(t *testing.T) storetest.Nodes {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			at := place(t)
			a, err := openAt(ctx, at)
			if err != nil {
				t.Fatal(err)
			}
			// B's connections get a name of their own, so that cutting
			// B's listener cuts no other test's.
			bURL := withParam(t, at, "application_name", appName(t, at)+"_b")
			b, err := openAt(ctx, bURL)
			if err != nil {
				a.Close()
				t.Fatal(err)
			}
			return storetest.Nodes{A: a, B: b, CutListener: func(t *testing.T) {
				t.Helper()
				// Listen connects in the background: look until it has.
				deadline := time.Now().Add(30 * time.Second)
				for terminate(t, appName(t, bURL), true) == 0 {
					if time.Now().After(deadline) {
						t.Fatal("no connection of B has run LISTEN")
					}
					time.Sleep(50 * time.Millisecond)
				}
			}}
		},
		FailRetryUnannounced: "postgres.Store.Fail reschedules without pg_notify (worker.go), so another node hears a retry due now only at its safety re-check",
	})
}

// TestUnavailable reaches PostgreSQL through a TCP proxy in the test, so
// that the database can be cut off and brought back while the store is
// open, and opens a store at a loopback port where nothing listens.
func TestUnavailable(t *testing.T) {
	storetest.RunUnavailable(t, storetest.Outage{
		Open: func(t *testing.T) (store.Store, storetest.Database) {
			t.Helper()
			at := place(t)
			u, err := url.Parse(at)
			if err != nil {
				t.Fatal(err)
			}
			p := startProxy(t, u.Host)
			u.Host = p.addr
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := openAt(ctx, u.String())
			if err != nil {
				t.Fatal(err)
			}
			return s, storetest.Database{
				Down: func(t *testing.T) { p.down(t) },
				Up:   func(t *testing.T) { p.up(t) },
				Kill: func(t *testing.T) {
					t.Helper()
					if terminate(t, appName(t, at), false) == 0 {
						t.Fatal("the store had no connection to end")
					}
				},
			}
		},
		OpenUnreachable: func(ctx context.Context) (store.Store, error) {
			return openAt(ctx, "postgres://root@"+freeAddr(t)+"/test?sslmode=disable")
		},
	})
}

// freeAddr returns a loopback address where nothing listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// proxy forwards TCP connections from a loopback port to PostgreSQL; down
// closes the port and every forwarded connection, up opens the port again.
type proxy struct {
	target, addr string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.down(t) })
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *proxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // down while dialling
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	go pipe(s, c)
	go pipe(c, s)
}

func (p *proxy) down(t *testing.T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy: listen again at %s: %v", p.addr, err)
	}
	p.serve(ln)
}
