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
	srv := testserver.Start(t, testserver.Options{WrapStore: func(store.Store) store.Store { return pg }})

	if code, body, _ := probe(t, http.DefaultClient, "GET", srv.URL+"/readyz"); code != 200 || body != "ok\n" {
		t.Fatalf("/readyz with the database reachable: %d %q, want 200", code, body)
	}
	p.Down()
	start := time.Now()
	var code int
	var body string
	for time.Since(start) < 10*time.Second {
		if code, body, _ = probe(t, http.DefaultClient, "GET", srv.URL+"/readyz"); code == 503 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != 503 || !strings.HasPrefix(body, "store unreadable: ") || strings.Count(body, "\n") != 1 {
		t.Fatalf("/readyz with the database unreachable after %v: %d %q, want 503 \"store unreadable: ...\"", time.Since(start), code, body)
	}
	t.Logf("/readyz said %q after %v", strings.TrimSpace(body), time.Since(start).Round(time.Millisecond))
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("/readyz took %v to notice the database was gone, want within readyFresh + readyTimeout", d)
	}
	if st := grpcHealth(t, srv.Addr); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health with the database unreachable: %v, want NOT_SERVING", st)
	}
	if code, _, _ := probe(t, http.DefaultClient, "GET", srv.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz with the database unreachable: %d, want 200", code)
	}

	p.Up(t)
	start = time.Now()
	for time.Since(start) < 20*time.Second {
		if code, body, _ = probe(t, http.DefaultClient, "GET", srv.URL+"/readyz"); code == 200 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code != 200 {
		t.Fatalf("/readyz after the database came back: %d %q, want 200", code, body)
	}
	if st := grpcHealth(t, srv.Addr); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health after the database came back: %v, want SERVING", st)
	}
}
