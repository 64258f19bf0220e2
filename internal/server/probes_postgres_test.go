package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/store/postgres"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// TestReadyzPostgresUnreachable: a node on PostgreSQL, reached through a TCP
// proxy; when the proxy drops every connection and refuses new ones, /readyz
// answers 503 "store unreadable: ..." within a few seconds and gRPC health
// says NOT_SERVING, while /healthz stays 200; when the proxy is back, /readyz
// answers 200 again. Needs SEPP_TEST_POSTGRES_URL (CI sets it).
func TestReadyzPostgresUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(testserver.PostgresSchema(t, "sepp_readyz"))
	if err != nil {
		t.Fatal(err)
	}
	p := testserver.StartProxy(t, u.Host)
	u.Host = p.Addr
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	pg, err := postgres.Open(ctx, postgres.Options{URL: u.String(), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() }) // after the server's shutdown (cleanups run last first)
	srv := testserver.Start(t, testserver.Options{ClockTimers: true, WrapStore: func(store.Store) store.Store { return pg }})

	if code, body, _ := probe(t, http.DefaultClient, "GET", srv.URL+"/readyz"); code != 200 || body != "ok\n" {
		t.Fatalf("/readyz with the database reachable: %d %q, want 200", code, body)
	}
	p.Down()
	// Past readyFresh on the server's clock, which runs its health loop too
	// and moves only when the test moves it: the next /readyz probes the
	// database itself, within readyTimeout.
	srv.Clock.Advance(2*time.Second + time.Millisecond)
	code, body, _ := probe(t, http.DefaultClient, "GET", srv.URL+"/readyz")
	if code != 503 || !strings.HasPrefix(body, "store unreadable: ") || strings.Count(body, "\n") != 1 {
		t.Fatalf("/readyz with the database unreachable: %d %q, want 503 \"store unreadable: ...\"", code, body)
	}
	t.Logf("/readyz said %q", strings.TrimSpace(body))
	if st := grpcHealth(t, srv.Addr); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health with the database unreachable: %v, want NOT_SERVING", st)
	}
	if code, _, _ := probe(t, http.DefaultClient, "GET", srv.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz with the database unreachable: %d, want 200", code)
	}

	p.Up(t)
	// The pool may spend a probe or two on connections the outage broke.
	testserver.Await(t, "/readyz 200 after the database came back", func() bool {
		srv.Clock.Advance(2*time.Second + time.Millisecond)
		code, body, _ = probe(t, http.DefaultClient, "GET", srv.URL+"/readyz")
		return code == 200
	})
	if st := grpcHealth(t, srv.Addr); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health after the database came back: %v, want SERVING", st)
	}
}
