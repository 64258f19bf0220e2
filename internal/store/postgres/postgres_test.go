package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/postgres"
	"github.com/sepp-dev/sepp/internal/store/storetest"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// place creates a schema of its own for the test (testserver.PostgresSchema):
// its name is also the connections' application_name, so a test can find
// them in pg_stat_activity and end them (see terminate).
func place(t *testing.T) string {
	t.Helper()
	return testserver.PostgresSchema(t, "sepp_test")
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
	})
}

// heard records the queues a store's Listen announced.
type heard struct {
	mu     sync.Mutex
	queues []string
	seq    int
}

// listenTo runs s's Listen until the test ends.
func listenTo(t *testing.T, s store.Store) *heard {
	t.Helper()
	h := &heard{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.(store.Notifier).Listen(ctx, func(q string) {
			h.mu.Lock()
			h.queues = append(h.queues, q)
			h.mu.Unlock()
		}, func() {})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return h
}

// await waits up to within for queue to be announced at or after since
// and returns the position after it, or -1.
func (h *heard) await(since int, queue string, within time.Duration) int {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		for i := since; i < len(h.queues); i++ {
			if h.queues[i] == queue {
				h.mu.Unlock()
				return i + 1
			}
		}
		h.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	return -1
}

// barrier enqueues through a into a queue of its own, waits until it is
// heard and returns the position after it. Notifications arrive in commit
// order: whatever a committed before has been heard by then.
func (h *heard) barrier(t *testing.T, a store.Store, now time.Time) int {
	t.Helper()
	h.seq++
	queue := fmt.Sprintf("barrier-%d", h.seq)
	h.mu.Lock()
	since := len(h.queues)
	h.mu.Unlock()
	// Listen connects in the background: until it listens, enqueue again.
	for range 30 {
		enqueueJob(t, a, queue, 25, now)
		if at := h.await(since, queue, time.Second); at >= 0 {
			return at
		}
	}
	t.Fatalf("%s was never heard", queue)
	return 0
}

// between reports whether queue was announced in [from, to).
func (h *heard) between(from, to int, queue string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, q := range h.queues[from:to] {
		if q == queue {
			return true
		}
	}
	return false
}

func enqueueJob(t *testing.T, s store.Store, queue string, maxAttempts int32, now time.Time) {
	t.Helper()
	res, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{
		Jobs: []store.EnqueueJob{{Queue: queue, JobType: "t", Payload: []byte("{}"), MaxAttempts: maxAttempts}}, Now: now})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("EnqueueBatch into %s: %v, %+v", queue, err, res)
	}
}

func reserveOne(t *testing.T, s store.Store, queue string, lease time.Duration, now time.Time) {
	t.Helper()
	r, err := s.Reserve(context.Background(), &store.ReserveParams{Queues: []string{queue}, WorkerID: "w", Max: 1, Lease: lease, Now: now})
	if err != nil || len(r) != 1 {
		t.Fatalf("Reserve from %s: %d jobs, %v; want 1", queue, len(r), err)
	}
}

// TestLeaseReleaseNotifies: a lease that ended makes its job deliverable
// again when a transaction releases it, the sweep or any node's Reserve
// of any queue; that transaction announces the job's queue to the other
// nodes, except when the release dead-letters the job.
func TestLeaseReleaseNotifies(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at := place(t)
	a, err := openAt(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := openAt(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	h := listenTo(t, b)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	h.barrier(t, a, t0)

	enqueueJob(t, a, "swept-q", 25, t0)
	enqueueJob(t, a, "dead-q", 1, t0)
	enqueueJob(t, a, "reserve-q", 25, t0)
	reserveOne(t, a, "swept-q", 30*time.Second, t0)
	reserveOne(t, a, "dead-q", 30*time.Second, t0)
	reserveOne(t, a, "reserve-q", 2*time.Minute, t0)

	since := h.barrier(t, a, t0)
	sw, err := a.Sweep(ctx, &store.SweepParams{Now: t0.Add(time.Minute), Limit: 100, CompletedRetention: time.Hour, DeadRetention: time.Hour})
	if err != nil || sw.LeasesExpired != 2 {
		t.Fatalf("Sweep: %+v, %v; want 2 leases expired", sw, err)
	}
	upTo := h.barrier(t, a, t0)
	if !h.between(since, upTo, "swept-q") {
		t.Error("the sweep released a lease and did not announce the job's queue")
	}
	if h.between(since, upTo, "dead-q") {
		t.Error("the sweep announced a queue whose job it dead-lettered")
	}

	since = upTo
	if r, err := a.Reserve(ctx, &store.ReserveParams{Queues: []string{"other-q"}, WorkerID: "w", Max: 1, Lease: time.Minute, Now: t0.Add(3 * time.Minute)}); err != nil || len(r) != 0 {
		t.Fatalf("Reserve from other-q: %d jobs, %v; want none", len(r), err)
	}
	if h.await(since, "reserve-q", 15*time.Second) < 0 {
		t.Error("a Reserve released a lease of another queue and did not announce it")
	}
	// The released job is deliverable, through the other node too.
	reserveOne(t, b, "reserve-q", time.Minute, t0.Add(3*time.Minute))
	reserveOne(t, b, "swept-q", time.Minute, t0.Add(3*time.Minute))
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
			p := testserver.StartProxy(t, u.Host)
			u.Host = p.Addr
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := openAt(ctx, u.String())
			if err != nil {
				t.Fatal(err)
			}
			return s, storetest.Database{
				Down: func(t *testing.T) { p.Down() },
				Up:   func(t *testing.T) { p.Up(t) },
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

// silentAddr returns a loopback address that accepts TCP connections and
// never answers on them, as a hung database host does; it is closed when
// the test ends.
func silentAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silentAt(t, ln)
	return ln.Addr().String()
}

// silentAt accepts on ln and holds what it accepts unanswered until stop
// (or the end of the test) closes ln and those connections.
func silentAt(t *testing.T, ln net.Listener) (stop func()) {
	t.Helper()
	var mu sync.Mutex
	var conns []net.Conn
	closed := false
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				c.Close()
			} else {
				conns = append(conns, c)
			}
			mu.Unlock()
		}
	}()
	stop = func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	t.Cleanup(stop)
	return stop
}

// checkTimedOutUnavailable fails t unless err, returned while ctx was live,
// is ErrUnavailable saying to retry and is not the context's deadline.
func checkTimedOutUnavailable(t *testing.T, ctx context.Context, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s: nil error against a server that never answers", what)
	case ctx.Err() != nil:
		t.Fatalf("%s blocked until its context ended: %v", what, err)
	case !errors.Is(err, store.ErrUnavailable):
		t.Fatalf("%s: %v, want ErrUnavailable", what, err)
	case errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("%s: %v is the context's deadline; the caller's context did not end", what, err)
	case !strings.Contains(strings.ToLower(err.Error()), "retry"):
		t.Fatalf("%s: %q does not say to retry", what, err)
	}
}

// TestOpenSilentServer opens a store at an address that accepts TCP and
// never answers: Open gives up after the connect timeout, of the URL or
// the default one, with ErrUnavailable, long before its context ends.
func TestOpenSilentServer(t *testing.T) {
	for _, c := range []struct{ name, param string }{
		{"ConnectTimeoutInURL", "&connect_timeout=1"},
		{"DefaultConnectTimeout", ""}, // postgres.DefaultConnectTimeout, 10 s
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*postgres.DefaultConnectTimeout)
			defer cancel()
			s, err := openAt(ctx, "postgres://root@"+silentAddr(t)+"/test?sslmode=disable"+c.param)
			if err == nil {
				s.Close()
			}
			checkTimedOutUnavailable(t, ctx, "Open", err)
		})
	}
}

// TestCallsAgainstSilentServer: the database, reached through a proxy,
// turns into an address that accepts TCP and never answers while the
// store is open. Calls, which then need new connections, fail with
// ErrUnavailable after the connect timeout instead of hanging for as long
// as their context, and the store works again once the database is back.
func TestCallsAgainstSilentServer(t *testing.T) {
	t.Parallel()
	at := place(t)
	u, err := url.Parse(at)
	if err != nil {
		t.Fatal(err)
	}
	p := testserver.StartProxy(t, u.Host)
	u.Host = p.Addr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := openAt(ctx, withParam(t, u.String(), "connect_timeout", "1"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	p.Down() // ends the pool's connections
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatalf("listen at %s: %v", p.Addr, err)
	}
	stop := silentAt(t, ln)
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.Ping(ctx)
		checkTimedOutUnavailable(t, ctx, fmt.Sprintf("Ping %d against the silent server", i), err)
		_, err = s.Reserve(ctx, &store.ReserveParams{Queues: []string{"q"}, WorkerID: "w", Max: 1, Lease: time.Minute, Now: time.Now()})
		checkTimedOutUnavailable(t, ctx, fmt.Sprintf("Reserve %d against the silent server", i), err)
		cancel()
	}
	// A hung server that comes back ends the connections it held (a
	// broken connection's cancel request among them: pgx waits up to 15 s
	// for its answer, and Close for that).
	stop()
	p.Up(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.Ping(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not work again after the database came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
