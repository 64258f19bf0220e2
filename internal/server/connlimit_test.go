package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/clock/clocktest"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// attackConfig has short timeouts, so idle connections go within seconds,
// and room for 1,000 connections, fewer than the attack opens. The header
// timeout is longer than the body timeout, so that a slow body held for a
// header timeout more after its own (as net/http does when it keeps the
// connection and reads the rest of the body as the next request) fails.
const attackConfig = `
[limits]
max_connections = 1000
max_connections_per_ip = 1000
idle_timeout_ms = 1000
header_timeout_ms = 3000
body_timeout_ms = 1000
`

// resendUnavailable makes call, and makes it again (up to five times more)
// while it fails with Unavailable. The test's own connection, too, goes
// after a second without a call (GOAWAY), and a call sent as the GOAWAY
// arrives fails with Unavailable; on a loaded machine the gaps between the
// test's calls can be that long. A client resends such a call, as the SDKs
// do (an enqueue's key makes that safe). The resends wait for the
// connection to be back (WaitForReady: a call made while it reconnects
// would fail at once), for at most 10 s each.
func resendUnavailable(call func(context.Context, ...grpc.CallOption) error) error {
	err := call(context.Background())
	for try := 0; status.Code(err) == codes.Unavailable && try < 5; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = call(ctx, grpc.WaitForReady(true))
		cancel()
	}
	return err
}

// idleKind is one way of holding a connection open without using it.
type idleKind struct {
	name string
	// start sends what the kind sends on c and returns; slow, if not nil,
	// runs in its own goroutine afterwards and keeps sending until c fails.
	start func(c net.Conn) error
	slow  func(c net.Conn)
	// answered: start reads the server's answer, so that a connection it
	// returns without an error was accepted.
	answered bool
}

var idleKinds = []idleKind{
	{
		// The HTTP/2 preface and nothing else, not even SETTINGS: the
		// splitter waits header_timeout_ms for a request, grpc-go then
		// header_timeout_ms (ConnectionTimeout) for the SETTINGS frame.
		// Measured: closed after 6 s.
		name:  "h2-preface-only",
		start: func(c net.Conn) error { _, err := io.WriteString(c, http2.ClientPreface); return err },
	},
	{
		// The preface and SETTINGS, as an idle gRPC channel: grpc-go closes
		// it after idle_timeout_ms (checked on a timer of that period, so up
		// to twice it), sending GOAWAY, then after 5 s for the answer the
		// client never sends. Measured: closed after 8 s.
		name: "h2-settings-then-quiet",
		start: func(c net.Conn) error {
			_, err := io.WriteString(c, http2.ClientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
			return err
		},
	},
	{
		// One HTTP/1.1 request, then an idle keep-alive: closed after
		// idle_timeout_ms.
		name: "http1-keepalive",
		start: func(c net.Conn) error {
			if _, err := io.WriteString(c, "GET /no-such-path HTTP/1.1\r\nHost: sepp\r\n\r\n"); err != nil {
				return err
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		},
		answered: true,
	},
	{
		// A Connect enqueue whose body comes one byte a second: it fails
		// after body_timeout_ms, and its connection is closed then.
		name: "slowloris-body",
		start: func(c net.Conn) error {
			_, err := io.WriteString(c, "POST /sepp.v1.JobService/Enqueue HTTP/1.1\r\nHost: sepp\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
			return err
		},
		slow: func(c net.Conn) {
			for {
				time.Sleep(time.Second) // the attack's pace: one byte a second
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		},
	},
}

// idleDeadline bounds how long the test waits for the server to close an
// idle connection. The timeouts of attackConfig close every kind within
// about 8 s; a connection still open at idleDeadline was never going to be
// closed.
const idleDeadline = 60 * time.Second

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestIdleConnectionsClosed opens 300 connections of each idle kind against
// a server with 1 s timeouts and room for 1,000 connections, and checks that
// the server closes every one, the ones over the limit before it answers
// anything, that enqueues succeed and health says SERVING meanwhile, and
// that the heap comes back. How fast enqueues answer meanwhile is
// BenchmarkEnqueueUnderAttack's (990-idle-connections).
func TestIdleConnectionsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1,200 connections")
	}
	const perKind = 300
	srv := testserver.Start(t, testserver.Options{Config: attackConfig, RealTime: true})
	// The test's own connection, too, goes after a second without a call,
	// and one it dials again while the attack fills the server is refused
	// and counted with the attack's: count its dials.
	var dials atomic.Int64
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	jobs := seppv1.NewJobServiceClient(conn)
	health := healthpb.NewHealthClient(conn)
	n := 0
	enqueue := func() {
		n++
		req := &seppv1.EnqueueRequest{Queue: "attack", JobType: "t", IdempotencyKey: proto.String(fmt.Sprint("k", n))}
		err := resendUnavailable(func(ctx context.Context, opts ...grpc.CallOption) error {
			_, err := jobs.Enqueue(ctx, req, opts...)
			return err
		})
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	enqueue() // the test's own connection is up
	heapBefore := heapInUse()

	// A connection the server refused at accept was closed before the
	// server sent it anything; one it accepted got an answer first: the
	// server's SETTINGS frame, a response, or the body's error.
	type result struct {
		kind    string
		refused bool
		err     error
	}
	results := make(chan result, perKind*len(idleKinds))
	var conns []net.Conn
	var wg sync.WaitGroup
	for _, k := range idleKinds {
		for range perKind {
			c, err := net.Dial("tcp", srv.Addr)
			if err != nil {
				t.Fatalf("%s: dial: %v", k.name, err)
			}
			conns = append(conns, c)
			wg.Go(func() {
				if err := k.start(c); err != nil {
					results <- result{k.name, true, nil} // closed as it sent
					return
				}
				if k.slow != nil {
					go k.slow(c)
				}
				// Read until the server closes: EOF (or a reset, for a body
				// the server stopped reading) is the close.
				c.SetReadDeadline(time.Now().Add(idleDeadline))
				got, err := io.Copy(io.Discard, c)
				if err == nil || errors.Is(err, syscall.ECONNRESET) {
					err = nil
				}
				results <- result{k.name, got == 0 && err == nil && !k.answered, err}
			})
		}
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})

	// During the attack: enqueues succeed, health says SERVING.
	for range 15 {
		enqueue()
	}
	var res *healthpb.HealthCheckResponse
	err = resendUnavailable(func(ctx context.Context, opts ...grpc.CallOption) (err error) {
		res, err = health.Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
		return err
	})
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health during the attack: %v %v", res.GetStatus(), err)
	}

	wg.Wait()
	close(results)
	refusedBy := map[string]int{}
	refused := 0
	for r := range results {
		if r.err != nil {
			t.Errorf("%s: %v, want the server to close it", r.kind, r.err)
		}
		if r.refused {
			refused++
			refusedBy[r.kind]++
		}
	}
	hc := keepAliveClient(t)
	counted, _ := metricValue(t, hc, srv, `sepp_connections_refused_total{reason="max_connections"}`)
	redials := dials.Load() - 1 // each may have been refused
	t.Logf("%d connections closed before an answer (%v), %v refused for max_connections, %d dials again by the test's client", refused, refusedBy, counted, redials)
	if counted < 150 || float64(refused) > counted || counted > float64(refused+int(redials)) {
		t.Errorf("%d connections closed before an answer and %v refused for max_connections (the test's client dialed %d times more); want the same number, about 200 (1,200 opened, room for 1,000 less the client's), and at most one more for each time the test's client dialed again", refused, counted, redials)
	}
	for _, c := range conns {
		c.Close()
	}
	err = resendUnavailable(func(ctx context.Context, opts ...grpc.CallOption) (err error) {
		res, err = health.Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
		return err
	})
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health after the attack: %v %v", res.GetStatus(), err)
	}
	enqueue()
	heapAfter := heapInUse()
	t.Logf("heap: %d KiB before, %d KiB after", heapBefore>>10, heapAfter>>10)
	if heapAfter > heapBefore+50<<20 {
		t.Errorf("heap grew from %d to %d bytes, more than 50 MB", heapBefore, heapAfter)
	}
	// The gauge is back to the connections still open: the gRPC client's.
	waitMetric(t, hc, srv, "sepp_connections_open", func(v float64) bool { return v <= 2 })
}

// metricValue reads one sample of /metrics: name with its labels as
// printed, like `sepp_connections_refused_total{reason="max_connections"}`.
// It reads over hc, which keeps its connection, so that reading does not
// change the count of open connections from one read to the next.
func metricValue(t *testing.T, hc *http.Client, srv *testserver.Server, sample string) (float64, bool) {
	t.Helper()
	resp, err := hc.Get(srv.URL + "/metrics")
	if err != nil {
		t.Logf("GET /metrics: %v", err) // waitMetric tries again
		return 0, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f, true
		}
	}
	return 0, false
}

// keepAliveClient is an HTTP/1.1 client with one connection, closed when
// the test ends.
func keepAliveClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// overConn is an HTTP/1.1 client whose one connection is c, already open.
func overConn(t *testing.T, c net.Conn) *http.Client {
	var once sync.Once
	tr := &http.Transport{MaxConnsPerHost: 1, DialContext: func(context.Context, string, string) (net.Conn, error) {
		var conn net.Conn
		once.Do(func() { conn = c })
		if conn == nil {
			return nil, errors.New("the held connection was closed")
		}
		return conn, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// waitMetric polls sample until ok holds: the pause between two reads only
// paces the poll, and the deadline only turns a hang into a failure.
func waitMetric(t *testing.T, hc *http.Client, srv *testserver.Server, sample string, ok func(float64) bool) {
	t.Helper()
	var v float64
	for deadline := time.Now().Add(clocktest.HangGuard); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var found bool
		if v, found = metricValue(t, hc, srv, sample); found && ok(v) {
			return
		}
	}
	t.Errorf("%s = %v", sample, v)
}

// dialFrom dials srv from the loopback address src (127.0.0.0/8 is all
// loopback on Linux), so a test can be several clients.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedAtOnce checks that the server closes c, with nothing sent. Under
// the hour-long timeouts of TestConnectionLimits, a connection the server
// accepted would stay open past the read's deadline, clocktest.HangGuard.
func closedAtOnce(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(clocktest.HangGuard))
	n, err := c.Read(make([]byte, 1))
	if n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
		t.Errorf("%s: read %d bytes, %v; want the connection closed at once", what, n, err)
	}
}

// stillOpen checks that c is open: a read waits. It cannot fail for a slow
// server, only miss one that closes c late.
func stillOpen(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%s: %v, want the connection still open", what, err)
	}
	c.SetReadDeadline(time.Time{})
}

// TestConnectionLimits: a connection over max_connections_per_ip, or over
// max_connections, is closed before anything is read; each is counted by
// reason; closing connections makes room again.
func TestConnectionLimits(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: `
[limits]
max_connections = 6
max_connections_per_ip = 4
header_timeout_ms = 3600000
idle_timeout_ms = 3600000
`})
	var held []net.Conn
	for i := range 4 {
		c := dialFrom(t, "127.0.0.1", srv.Addr)
		held = append(held, c)
		stillOpen(t, c, fmt.Sprintf("127.0.0.1 #%d", i+1))
	}
	closedAtOnce(t, dialFrom(t, "127.0.0.1", srv.Addr), "127.0.0.1 #5, over max_connections_per_ip")
	for i := range 2 {
		c := dialFrom(t, "127.0.0.2", srv.Addr)
		held = append(held, c)
		stillOpen(t, c, fmt.Sprintf("127.0.0.2 #%d", i+1))
	}
	closedAtOnce(t, dialFrom(t, "127.0.0.3", srv.Addr), "127.0.0.3 #1, over max_connections")
	closedAtOnce(t, dialFrom(t, "127.0.0.3", srv.Addr), "127.0.0.3 #2, over max_connections")

	// Room again once two close, when the server has seen them closed
	// (asked over a held connection, so that asking takes no new place):
	// /metrics answers on a new connection.
	held[0].Close()
	held[4].Close()
	waitMetric(t, overConn(t, held[1]), srv, "sepp_connections_open", func(v float64) bool { return v == 4 })
	hc := keepAliveClient(t)
	waitMetric(t, hc, srv, "sepp_connections_open", func(v float64) bool { return v == 5 }) // 4 held, and hc's
	if v, _ := metricValue(t, hc, srv, `sepp_connections_refused_total{reason="max_connections_per_ip"}`); v != 1 {
		t.Errorf("refused for max_connections_per_ip: %v, want 1", v)
	}
	if v, _ := metricValue(t, hc, srv, `sepp_connections_refused_total{reason="max_connections"}`); v != 2 {
		t.Errorf("refused for max_connections: %v, want 2", v)
	}
	// Rate-limited: one line per reason for the two max_connections
	// refusals, which came within logEvery.
	logs := srv.Logs.String()
	if got := strings.Count(logs, "reason=max_connections "); got != 1 {
		t.Errorf("%d log lines for max_connections, want 1:\n%s", got, logs)
	}
	if got := strings.Count(logs, "reason=max_connections_per_ip "); got != 1 {
		t.Errorf("%d log lines for max_connections_per_ip, want 1:\n%s", got, logs)
	}
}

// TestLongPollOutlivesBodyTimeout: the body deadline ends with the body, so
// a Connect Reserve that waits longer than body_timeout_ms, over HTTP/1.1
// and over HTTP/2, answers when its wait is over, not with an error. The
// wait runs on the server's test clock, so it is over when the test says:
// after the body deadline, which is real time, has passed.
func TestLongPollOutlivesBodyTimeout(t *testing.T) {
	const bodyTimeout = 300 * time.Millisecond
	srv := testserver.Start(t, testserver.Options{ClockTimers: true, Config: `
[limits]
body_timeout_ms = 300
idle_timeout_ms = 5000
`})
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		tr := &http.Transport{}
		if proto == "HTTP/2" {
			p := new(http.Protocols)
			p.SetUnencryptedHTTP2(true)
			tr.Protocols = p
		}
		type answer struct {
			status int
			body   []byte
			err    error
		}
		answered := make(chan answer, 1)
		go func() {
			resp, err := (&http.Client{Transport: tr}).Post(srv.URL+"/sepp.v1.WorkerService/Reserve", "application/json",
				strings.NewReader(`{"queues":["nothing-here"],"workerId":"w","maxJobs":1,"waitMs":1500}`))
			if err != nil {
				answered <- answer{err: err}
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answered <- answer{status: resp.StatusCode, body: body}
		}()
		testserver.Await(t, "the Reserve waiting", func() bool { return srv.WaitingReserves("nothing-here") == 1 || len(answered) > 0 })
		// Not synchronization: the scenario is a wait that outlives the
		// body deadline, a real-time deadline on the connection, which has
		// passed once this much real time has.
		time.Sleep(2 * bodyTimeout)
		if len(answered) > 0 {
			a := <-answered
			t.Fatalf("%s: answered %d %s %v before its wait was over", proto, a.status, a.body, a.err)
		}
		srv.Clock.Advance(1500 * time.Millisecond)
		select {
		case a := <-answered:
			if a.err != nil || a.status != 200 || string(a.body) != `{"jobs":[]}` {
				t.Errorf("%s: %d %s %v, want 200 and no job once the wait is over", proto, a.status, a.body, a.err)
			}
		case <-time.After(clocktest.HangGuard):
			t.Fatalf("%s: no answer once the wait was over", proto)
		}
		tr.CloseIdleConnections()
	}
}

// TestSlowBodyOverHTTP2: on an HTTP/2 connection net/http serves (Connect
// over h2c), a body still arriving after body_timeout_ms fails its request
// at once.
func TestSlowBodyOverHTTP2(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: `
[limits]
body_timeout_ms = 500
`})
	hc := h2cClient(t)
	pr, pw := io.Pipe()
	done := make(chan struct{})
	defer close(done)
	go func() {
		pw.Write([]byte(`{"queue":"slow",`))
		for {
			select {
			case <-done:
				pw.Close()
				return
			case <-time.After(300 * time.Millisecond):
				if _, err := pw.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	// The body never ends: only the server's deadline ends the request.
	ctx, cancel := context.WithTimeout(context.Background(), clocktest.HangGuard)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/sepp.v1.JobService/Enqueue", pr)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if ctx.Err() != nil {
		t.Fatalf("the slow body was not cut: %v", err)
	}
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatalf("a body still arriving was accepted: %s", body)
		}
		t.Logf("answered %d %s", resp.StatusCode, body)
	} else {
		t.Logf("failed: %v", err)
	}
}
