package idempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/idempotency"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// app is an app's own HTTP API behind the middleware: POST /orders creates
// an order (counted in runs), answering 201 with its number; the handler
// fails with 500 while fail is set, panics while panics is set, and, when
// they are not nil, tells entered that it started and waits for gate.
type app struct {
	runs   atomic.Int64
	fail   atomic.Bool
	panics atomic.Bool
	gate   chan struct{}
	// entered, when not nil, hears when the handler starts.
	entered chan struct{}
	url     string
}

func startApp(t *testing.T, c *sepp.Client, a *app) {
	t.Helper()
	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if a.entered != nil {
			a.entered <- struct{}{}
		}
		if a.gate != nil {
			<-a.gate
		}
		if a.panics.Load() {
			panic("handler broke")
		}
		if a.fail.Load() {
			http.Error(w, "database down", http.StatusInternalServerError)
			return
		}
		n := a.runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/orders/%d", n))
		w.Header().Set("X-Not-Stored", "1")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d,"request":%q}`, n, body)
	})
	mux := http.NewServeMux()
	mux.Handle("/orders", idempotency.Middleware(c, idempotency.Options{Scope: "api.orders", Required: true})(create))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a.url = srv.URL
}

func connect(t *testing.T, srv *testserver.Server) *sepp.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sepp.NewClient(ctx, srv.URL, sepp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type answer struct {
	status int
	header http.Header
	body   string
}

func post(t *testing.T, url, key, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/orders", strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func wantProblem(t *testing.T, a answer, status int, reason string) {
	t.Helper()
	var p struct {
		Status int    `json:"status"`
		Reason string `json:"reason"`
	}
	if a.status != status || a.header.Get("Content-Type") != "application/problem+json" || json.Unmarshal([]byte(a.body), &p) != nil || p.Reason != reason || p.Status != status {
		t.Fatalf("got %d %s %s, want a %d problem with reason %s", a.status, a.header.Get("Content-Type"), a.body, status, reason)
	}
}

// TestReplay: a repeat with the same key and body gets the stored response
// (status, stored headers, body) with Idempotent-Replayed, and the handler
// ran once; another body under the key gets 422; no key on a route that
// requires one gets 400; a GET passes through.
func TestReplay(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	a := &app{}
	startApp(t, connect(t, srv), a)
	first := post(t, a.url, "order-1", `{"sku":"a"}`)
	if first.status != http.StatusCreated || first.header.Get(idempotency.ReplayedHeader) != "" || first.header.Get("X-Not-Stored") != "1" {
		t.Fatalf("first: %+v", first)
	}
	again := post(t, a.url, "order-1", `{"sku":"a"}`)
	if again.status != http.StatusCreated || again.body != first.body || again.header.Get(idempotency.ReplayedHeader) != "true" ||
		again.header.Get("Location") != "/orders/1" || again.header.Get("Content-Type") != "application/json" || again.header.Get("X-Not-Stored") != "" {
		t.Fatalf("repeat: %+v, want the stored answer replayed", again)
	}
	if n := a.runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
	wantProblem(t, post(t, a.url, "order-1", `{"sku":"b"}`), http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")
	wantProblem(t, post(t, a.url, "", `{"sku":"a"}`), http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED")
	wantProblem(t, post(t, a.url, strings.Repeat("k", 257), `{}`), http.StatusBadRequest, "IDEMPOTENCY_KEY_INVALID")
	resp, err := http.Get(a.url + "/orders")
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("GET passes through: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestInFlight: a repeat while the first request runs gets 409; once it
// has answered, the repeat is replayed.
func TestInFlight(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	a := &app{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	startApp(t, connect(t, srv), a)
	done := make(chan answer)
	go func() { done <- post(t, a.url, "order-2", `{}`) }()
	<-a.entered // the first request holds the key and runs
	wantProblem(t, post(t, a.url, "order-2", `{}`), http.StatusConflict, "IDEMPOTENCY_KEY_IN_FLIGHT")
	close(a.gate)
	first := <-done
	if first.status != http.StatusCreated {
		t.Fatalf("first: %+v", first)
	}
	if r := post(t, a.url, "order-2", `{}`); r.header.Get(idempotency.ReplayedHeader) != "true" || r.body != first.body {
		t.Fatalf("after: %+v", r)
	}
}

// TestFailureReleases: a 500 or a panic releases the key, so the retry
// runs the handler and its answer is the one stored.
func TestFailureReleases(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	a := &app{}
	startApp(t, connect(t, srv), a)
	a.fail.Store(true)
	if r := post(t, a.url, "order-3", `{}`); r.status != http.StatusInternalServerError {
		t.Fatalf("failing handler: %+v", r)
	}
	a.fail.Store(false)
	a.panics.Store(true)
	req, _ := http.NewRequest(http.MethodPost, a.url+"/orders", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "order-3")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close() // net/http closes the connection of a panicking handler
	}
	a.panics.Store(false)
	r := post(t, a.url, "order-3", `{}`)
	if r.status != http.StatusCreated || r.header.Get(idempotency.ReplayedHeader) != "" || a.runs.Load() != 1 {
		t.Fatalf("retry after a 500 and a panic: %+v, runs %d", r, a.runs.Load())
	}
	if again := post(t, a.url, "order-3", `{}`); again.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("then: %+v", again)
	}
}

// TestTwoAppInstances: two app processes with their own Sepp clients,
// under concurrent retries of one key, run the handler once; every answer
// is the created order, replayed, or 409 while it runs.
func TestTwoAppInstances(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	a, b := &app{}, &app{}
	startApp(t, connect(t, srv), a)
	startApp(t, connect(t, srv), b)
	var wg sync.WaitGroup
	var mu sync.Mutex
	bodies := map[string]int{}
	for i := range 16 {
		wg.Go(func() {
			url := a.url
			if i%2 == 1 {
				url = b.url
			}
			r := post(t, url, "order-4", `{"sku":"x"}`)
			mu.Lock()
			defer mu.Unlock()
			switch r.status {
			case http.StatusCreated:
				bodies[r.body]++
			case http.StatusConflict:
			default:
				t.Errorf("answer %+v", r)
			}
		})
	}
	wg.Wait()
	if runs := a.runs.Load() + b.runs.Load(); runs != 1 || len(bodies) != 1 {
		t.Fatalf("the handler ran %d times, %d distinct bodies", runs, len(bodies))
	}
}

// TestUnavailable: with Sepp unreachable the handler does not run and the
// client gets 503 with Retry-After.
func TestUnavailable(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := connect(t, srv)
	a := &app{}
	startApp(t, c, a)
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := post(t, a.url, "order-5", `{}`)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || a.runs.Load() != 0 {
		t.Fatalf("Sepp down: %+v, runs %d", r, a.runs.Load())
	}
}

// TestTimeoutReleases: a handler that gives up when its Timeout ends,
// without answering, gets 504 and its key released, so the retry runs it;
// one that answers anyway has its answer stored.
func TestTimeoutReleases(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := connect(t, srv)
	var runs atomic.Int32
	slow := atomic.Bool{}
	slow.Store(true)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if slow.Load() {
			<-r.Context().Done() // waits for the Timeout, then gives up
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"order":"o-9"}`)
	})
	app := httptest.NewServer(idempotency.Middleware(c, idempotency.Options{Scope: "api.timeout", Timeout: 50 * time.Millisecond})(h))
	defer app.Close()
	wantProblem(t, post(t, app.URL, "order-9", `{}`), http.StatusGatewayTimeout, "IDEMPOTENCY_HANDLER_TIMEOUT")
	slow.Store(false)
	if r := post(t, app.URL, "order-9", `{}`); r.status != http.StatusCreated || r.header.Get(idempotency.ReplayedHeader) != "" || runs.Load() != 2 {
		t.Fatalf("retry after the timeout: %+v, runs %d", r, runs.Load())
	}
	if r := post(t, app.URL, "order-9", `{}`); r.header.Get(idempotency.ReplayedHeader) != "true" || runs.Load() != 2 {
		t.Fatalf("then: %+v, runs %d", r, runs.Load())
	}
}
