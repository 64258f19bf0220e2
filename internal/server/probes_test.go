package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// faultyStore makes Ping fail while fail is set, and stall while stall is
// non-nil (until it is closed), under a running server.
type faultyStore struct {
	store.Store
	fail  atomic.Bool
	mu    sync.Mutex
	stall chan struct{}
	pings atomic.Int64
}

func (f *faultyStore) Ping(ctx context.Context) error {
	f.pings.Add(1)
	f.mu.Lock()
	stall := f.stall
	f.mu.Unlock()
	if stall != nil {
		select {
		case <-stall:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.fail.Load() {
		return fmt.Errorf("pebble: read the schema version: %w", store.ErrClosed)
	}
	return f.Store.Ping(ctx)
}

func startFaulty(t *testing.T, config string) (*testserver.Server, *faultyStore) {
	t.Helper()
	f := &faultyStore{}
	srv := testserver.Start(t, testserver.Options{Config: config, ClockTimers: true, WrapStore: func(s store.Store) store.Store {
		f.Store = s
		return f
	}})
	return srv, f
}

// probe sends method path with c and returns the status, the body and the
// Content-Type.
func probe(t *testing.T, c *http.Client, method, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Content-Type")
}

func grpcHealth(t *testing.T, addr string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("gRPC health: %v", err)
	}
	return res.GetStatus()
}

// TestProbesOK: /healthz and /readyz answer 200 "ok\n" in text/plain to GET
// and HEAD, over HTTP/1.1 and h2c, without a token although [auth] has tokens
// (and /metrics needs one); other methods get 405.
func TestProbesOK(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: authConfig(`metrics_token_role = "reader"`)})
	for name, c := range map[string]*http.Client{"HTTP/1.1": http.DefaultClient, "h2c": h2cClient(t)} {
		for _, path := range []string{"/healthz", "/readyz"} {
			code, body, ctype := probe(t, c, "GET", srv.URL+path)
			if code != 200 || body != "ok\n" || !strings.HasPrefix(ctype, "text/plain") {
				t.Errorf("%s GET %s: %d %q %q, want 200 \"ok\\n\" text/plain", name, path, code, body, ctype)
			}
			if code, body, _ := probe(t, c, "HEAD", srv.URL+path); code != 200 || body != "" {
				t.Errorf("%s HEAD %s: %d %q, want 200 and no body", name, path, code, body)
			}
			if code, _, _ := probe(t, c, "POST", srv.URL+path); code != http.StatusMethodNotAllowed {
				t.Errorf("%s POST %s: %d, want 405", name, path, code)
			}
		}
		if code, _, _ := probe(t, c, "GET", srv.URL+"/metrics"); code != 401 {
			t.Errorf("%s GET /metrics without a token: %d, want 401 (the probes' openness must not leak to /metrics)", name, code)
		}
	}
}

// TestProbesBehindLimits: the probes pass through the [limits] wrappers like
// every route: a body over max_request_bytes is refused before the handler.
func TestProbesBehindLimits(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[limits]\nmax_request_bytes = 4096\n"})
	for _, path := range []string{"/healthz", "/readyz"} {
		req, _ := http.NewRequest("GET", srv.URL+path, strings.NewReader(strings.Repeat("x", 64<<10)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("GET %s with a 64 KiB body: %d, want 413", path, resp.StatusCode)
		}
	}
}

// TestReadyzStoreUnreadable: while the store's Ping fails, /readyz answers
// 503 "store unreadable: ..." once the last probe is older than readyFresh
// (2s), without waiting for the 5s health loop, gRPC health says
// NOT_SERVING too (one rule), and /healthz stays 200; once the store reads
// again, both recover. The server's clock, which ages the probe and runs
// the health loop, moves only when the test moves it.
func TestReadyzStoreUnreadable(t *testing.T) {
	srv, f := startFaulty(t, "")
	if code, body, _ := probe(t, http.DefaultClient, "GET", srv.URL+"/readyz"); code != 200 {
		t.Fatalf("/readyz before the fault: %d %q", code, body)
	}
	f.fail.Store(true)
	if code, body, _ := probe(t, http.DefaultClient, "GET", srv.URL+"/readyz"); code != 200 {
		t.Fatalf("/readyz with a probe younger than readyFresh: %d %q, want its 200", code, body)
	}
	srv.Clock.Advance(2*time.Second + time.Millisecond) // past readyFresh, before the health loop's 5 s
	code, body, _ := probe(t, http.DefaultClient, "GET", srv.URL+"/readyz")
	if code != 503 || !strings.HasPrefix(body, "store unreadable: ") || !strings.Contains(body, "closed") ||
		strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
		t.Fatalf("/readyz with an unreadable store: %d %q, want 503 \"store unreadable: ...\" on one line", code, body)
	}
	if st := grpcHealth(t, srv.Addr); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health with an unreadable store: %v, want NOT_SERVING", st)
	}
	if code, body, _ := probe(t, h2cClient(t), "GET", srv.URL+"/readyz"); code != 503 {
		t.Errorf("h2c /readyz with an unreadable store: %d %q, want 503", code, body)
	}
	if code, _, _ := probe(t, http.DefaultClient, "HEAD", srv.URL+"/readyz"); code != 503 {
		t.Errorf("HEAD /readyz with an unreadable store: %d, want 503", code)
	}
	if code, body, _ := probe(t, http.DefaultClient, "GET", srv.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz with an unreadable store: %d %q, want 200 (the process is alive)", code, body)
	}
	if !strings.Contains(srv.Logs.String(), "NOT_SERVING") {
		t.Errorf("no NOT_SERVING line in the log:\n%s", srv.Logs)
	}
	if up := sample(scrape(t, srv), "sepp_store_up"); up != 0 {
		t.Errorf("sepp_store_up with an unreadable store: %v, want 0", up)
	}

	f.fail.Store(false)
	srv.Clock.Advance(2*time.Second + time.Millisecond)
	if code, body, _ = probe(t, http.DefaultClient, "GET", srv.URL+"/readyz"); code != 200 || body != "ok\n" {
		t.Fatalf("/readyz after the store recovered: %d %q, want 200", code, body)
	}
	if st := grpcHealth(t, srv.Addr); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health after the store recovered: %v, want SERVING", st)
	}
	if up := sample(scrape(t, srv), "sepp_store_up"); up != 1 {
		t.Errorf("sepp_store_up after the store recovered: %v, want 1", up)
	}
}

// TestReadyzConcurrentProbesPingOnce: many /readyz at once with a stale
// result make one fresh Ping, not one each, so unauthenticated probes cannot
// multiply the store's load.
func TestReadyzConcurrentProbesPingOnce(t *testing.T) {
	srv, f := startFaulty(t, "")
	stall := make(chan struct{})
	f.mu.Lock()
	f.stall = stall
	f.mu.Unlock()
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			code, _, _ := probe(t, &http.Client{Transport: tr}, "GET", srv.URL+"/readyz")
			codes <- code
		}()
	}
	// Not synchronization: a window for the probes to arrive while the
	// first one's Ping stalls. Those that arrive after it find its result,
	// fresh on the server's clock, which does not move: one Ping either way.
	time.Sleep(300 * time.Millisecond)
	f.mu.Lock()
	f.stall = nil
	f.mu.Unlock()
	close(stall)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Errorf("/readyz: %d, want 200", code)
		}
	}
	if n := f.pings.Load(); n != 1 { // the health loop's clock does not move
		t.Errorf("20 concurrent /readyz made %d Pings, want 1", n)
	}
}

// TestReadyzShuttingDown: a /readyz in flight when Shutdown begins answers
// 503 "shutting down", though the store reads fine, and the gRPC health check
// says NOT_SERVING from then on.
func TestReadyzShuttingDown(t *testing.T) {
	srv, f := startFaulty(t, "")
	stall := make(chan struct{})
	f.mu.Lock()
	f.stall = stall // no probe yet: the first /readyz probes afresh, and stalls
	f.mu.Unlock()
	type answer struct {
		code int
		body string
	}
	got := make(chan answer, 1)
	go func() {
		code, body, _ := probe(t, http.DefaultClient, "GET", srv.URL+"/readyz")
		got <- answer{code, body}
	}()
	testserver.Await(t, "the /readyz probe stalled", func() bool { return f.pings.Load() > 0 })
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	// Shutdown stops the node before it closes the listener: once dialing
	// fails, the node is shutting down.
	testserver.Await(t, "the listener closed by Shutdown", func() bool {
		c, err := net.DialTimeout("tcp", srv.Addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	f.mu.Lock()
	f.stall = nil
	f.mu.Unlock()
	close(stall)
	select {
	case a := <-got:
		if a.code != 503 || a.body != "shutting down\n" {
			t.Errorf("/readyz in flight during shutdown: %d %q, want 503 \"shutting down\\n\"", a.code, a.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("/readyz did not answer during shutdown")
	}
	if err := <-shut; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("shutdown: %v", err)
	}
}
