package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// The regression tests of the ways one unauthenticated client could slow
// everyone else (docs/security.md, Limits on requests). Each attacks a real
// server and checks that the attack gets a clean error with a stable
// reason, that another client's enqueues succeed during the attack, and
// that the heap after is within 50 MB of the heap before. How fast the
// other client's enqueues answer meanwhile is measured, not asserted:
// BenchmarkEnqueueUnderAttack, whose results docs/benchmarks.md records.

// victim is the well-behaved client of an attack: its own connection.
type victim struct {
	tb   testing.TB
	jobs seppv1.JobServiceClient
	n    atomic.Int64
}

func newVictim(tb testing.TB, srv *testserver.Server) *victim {
	return &victim{tb: tb, jobs: seppv1.NewJobServiceClient(dialGRPC(tb, srv))}
}

// enqueue sends one enqueue on the declared queue "victim", which must
// succeed.
func (v *victim) enqueue() {
	v.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := v.jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "victim", JobType: "t",
		IdempotencyKey: proto.String(fmt.Sprintf("k-%d", v.n.Add(1)))})
	if err != nil {
		v.tb.Errorf("victim enqueue: %v", err)
	}
}

func heapBytes() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// startAttack runs attack in workers goroutines, each calling it again
// until the returned stop is called, and returns once every worker's
// first call has returned: the attack is under way.
func startAttack(tb testing.TB, workers int, attack func(ctx context.Context)) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var first sync.WaitGroup
	for range workers {
		first.Add(1)
		wg.Go(func() {
			attack(ctx)
			first.Done()
			for ctx.Err() == nil {
				attack(ctx)
			}
		})
	}
	first.Wait()
	return func() {
		cancel()
		wg.Wait()
	}
}

// underAttack runs attack (until its context ends) in workers goroutines,
// has the victim enqueue meanwhile, stops the attack, and checks the heap
// and that the server still answers.
func underAttack(t *testing.T, v *victim, workers int, attack func(ctx context.Context)) {
	t.Helper()
	v.enqueue() // the victim's connection is up
	before := heapBytes()
	stop := startAttack(t, workers, attack)
	for range 9 {
		v.enqueue()
	}
	stop()
	after := heapBytes()
	t.Logf("heap %.1f MB before the attack, %.1f MB after", float64(before)/1e6, float64(after)/1e6)
	if after-before > 50<<20 {
		t.Errorf("heap grew by %.1f MB during the attack", float64(after-before)/1e6)
	}
	v.enqueue() // the server still answers
}

// wantLimit checks that err is ResourceExhausted with reason LIMIT_EXCEEDED
// and a message naming key and its value.
func wantLimit(t *testing.T, err error, key string, value int) {
	t.Helper()
	st := status.Convert(err)
	code, reason := grpcReason(err)
	if code != codes.ResourceExhausted || reason != "LIMIT_EXCEEDED" ||
		!strings.Contains(st.Message(), key) || !strings.Contains(st.Message(), fmt.Sprint(value)) {
		t.Fatalf("got %v %q %q; want ResourceExhausted LIMIT_EXCEEDED naming %s = %d", code, reason, st.Message(), key, value)
	}
}

// wantInvalidField checks that err is INVALID_FIELD naming field and, in
// its message, want.
func wantInvalidField(t *testing.T, err error, field, want string) {
	t.Helper()
	st := status.Convert(err)
	code, reason := grpcReason(err)
	var meta map[string]string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			meta = info.GetMetadata()
			if info.GetDomain() != "sepp.dev" {
				t.Fatalf("domain %q", info.GetDomain())
			}
		}
	}
	if code != codes.InvalidArgument || reason != "INVALID_FIELD" || meta["field"] != field || !strings.Contains(st.Message(), want) {
		t.Fatalf("got %v %q %v %q; want InvalidArgument INVALID_FIELD field %s with %q", code, reason, meta, st.Message(), field, want)
	}
}

const victimConfig = `
[[queues]]
name = "victim"
`

func TestLimitReserveQueues(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: victimConfig, RealTime: true})
	v := newVictim(t, srv)
	workers := seppv1.NewWorkerServiceClient(dialGRPC(t, srv))
	queues := make([]string, 20000)
	for i := range queues {
		queues[i] = fmt.Sprintf("queue-%05d", i)
	}
	ctx := context.Background()
	_, err := workers.Reserve(ctx, &seppv1.ReserveRequest{Queues: queues, WaitMs: 1000})
	wantLimit(t, err, "limits.max_reserve_queues", 100)
	// 100 queues are fine.
	if _, err := workers.Reserve(ctx, &seppv1.ReserveRequest{Queues: queues[:100]}); err != nil {
		t.Fatalf("100 queues: %v", err)
	}
	underAttack(t, v, 2, func(ctx context.Context) {
		_, err := workers.Reserve(ctx, &seppv1.ReserveRequest{Queues: queues, WaitMs: 15000})
		if code, reason := grpcReason(err); code != codes.Canceled && reason != "LIMIT_EXCEEDED" {
			t.Errorf("attack: %v", err)
		}
	})
}

func TestLimitReserveJobs(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: victimConfig + "[limits]\nmax_reserve_jobs = 50\n"})
	workers := seppv1.NewWorkerServiceClient(dialGRPC(t, srv))
	ctx := context.Background()
	for _, n := range []int32{51, 1 << 30, 2147483647} {
		_, err := workers.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"victim"}, MaxJobs: n})
		wantLimit(t, err, "limits.max_reserve_jobs", 50)
	}
	if _, err := workers.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"victim"}, MaxJobs: 50}); err != nil {
		t.Fatalf("max_jobs 50: %v", err)
	}
	_, err := workers.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"victim"}, MaxJobs: -1})
	wantInvalidField(t, err, "max_jobs", "must be between 0 and 50")
}

// awaitHeld waits until the server holds reserves waiting Reserve calls on
// queue "idle" and claims waiting ClaimEffect calls on effect s/held.
func awaitHeld(t *testing.T, srv *testserver.Server, reserves, claims int) {
	t.Helper()
	testserver.Await(t, fmt.Sprintf("%d Reserve and %d ClaimEffect calls waiting", reserves, claims), func() bool {
		return srv.WaitingReserves("idle") == reserves && srv.WaitingEffectClaims("s", "held") == claims
	})
}

func TestLimitLongPolls(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: victimConfig + `
[limits]
max_long_polls_per_connection = 5
max_long_polls_per_client = 8
max_long_polls = 8
`})
	v := newVictim(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// hold starts n waiting calls on w's or e's connection, Reserve and
	// ClaimEffect in turn; they wait until the test ends.
	hold := func(w seppv1.WorkerServiceClient, e seppv1.EffectServiceClient, n int) {
		for i := range n {
			wg.Go(func() {
				var err error
				if i%2 == 0 {
					_, err = w.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"idle"}, WaitMs: 60000})
				} else {
					// Someone else holds the effect: ClaimEffect waits.
					_, err = e.ClaimEffect(ctx, &seppv1.ClaimEffectRequest{Scope: "s", Key: "held", WaitMs: 60000})
				}
				if status.Code(err) != codes.Canceled {
					t.Errorf("a held call ended before the test did: %v", err)
				}
			})
		}
	}
	// The effect someone else holds, so that ClaimEffect waits.
	effects := seppv1.NewEffectServiceClient(dialGRPC(t, srv))
	if _, err := effects.ClaimEffect(ctx, &seppv1.ClaimEffectRequest{Scope: "s", Key: "held", LeaseMs: 600000}); err != nil {
		t.Fatal(err)
	}

	conn1 := dialGRPC(t, srv)
	w1, e1 := seppv1.NewWorkerServiceClient(conn1), seppv1.NewEffectServiceClient(conn1)
	hold(w1, e1, 5)
	awaitHeld(t, srv, 3, 2)
	_, err := w1.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"idle"}, WaitMs: 20})
	wantLimit(t, err, "limits.max_long_polls_per_connection", 5)
	_, err = e1.ClaimEffect(ctx, &seppv1.ClaimEffectRequest{Scope: "s", Key: "held", WaitMs: 20})
	wantLimit(t, err, "limits.max_long_polls_per_connection", 5)
	// A call that does not wait is not limited.
	if _, err := w1.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"idle"}}); err != nil {
		t.Fatalf("Reserve without wait_ms: %v", err)
	}

	// Another connection has its own 5, up to the node's 8.
	conn2 := dialGRPC(t, srv)
	w2, e2 := seppv1.NewWorkerServiceClient(conn2), seppv1.NewEffectServiceClient(conn2)
	hold(w2, e2, 3)
	awaitHeld(t, srv, 5, 3)
	_, err = w2.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"idle"}, WaitMs: 20})
	wantLimit(t, err, "limits.max_long_polls", 8)

	// The victim, on a third connection, enqueues as fast as before.
	underAttack(t, v, 2, func(actx context.Context) {
		_, err := w1.Reserve(actx, &seppv1.ReserveRequest{Queues: []string{"idle"}, WaitMs: 60000})
		if code, reason := grpcReason(err); code != codes.Canceled && reason != "LIMIT_EXCEEDED" {
			t.Errorf("attack: %v", err)
		}
	})

	// Over Connect (HTTP/1.1), the node's limit holds too.
	status, body := postJSON(t, srv.URL+"/sepp.v1.WorkerService/Reserve", `{"queues":["idle"],"waitMs":"20"}`)
	if status != 429 || reasonOf(t, body) != "LIMIT_EXCEEDED" || !strings.Contains(body["message"].(string), "limits.max_long_polls") {
		t.Fatalf("Connect: %d %v", status, body)
	}

	// /metrics shows the node full and the refusals by limit, which the
	// SeppLongPollsSaturated and SeppLongPollsRefused alerts read.
	text := scrape(t, srv)
	if w, l := sample(text, "sepp_long_polls_waiting"), sample(text, "sepp_long_polls_limit"); w != 8 || l != 8 {
		t.Errorf("sepp_long_polls_waiting %v, sepp_long_polls_limit %v; want 8 and 8", w, l)
	}
	for _, limit := range []string{"max_long_polls", "max_long_polls_per_connection"} {
		if n := sample(text, `sepp_long_polls_refused_total{limit="`+limit+`"}`); n < 2 {
			t.Errorf("sepp_long_polls_refused_total{limit=%q} = %v, want at least 2", limit, n)
		}
	}
	if n := sample(text, `sepp_long_polls_refused_total{limit="max_long_polls_per_client"}`); n != 0 {
		t.Errorf("refusals by max_long_polls_per_client: %v, want 0", n)
	}

	// Once the waiting calls end, their places are free again: once the
	// server has seen the cancellations, which it learns of on its own time.
	cancel()
	wg.Wait()
	testserver.Await(t, "a waiting Reserve admitted after the others ended", func() bool {
		_, err := w1.Reserve(context.Background(), &seppv1.ReserveRequest{Queues: []string{"idle"}, WaitMs: 1})
		return err == nil
	})
}

func TestMetricsFoldRefusedQueues(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[server]\nstrict = true\n" + victimConfig})
	v := newVictim(t, srv)
	const n = 5000
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 4 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > n {
					return
				}
				_, err := v.jobs.Enqueue(context.Background(), &seppv1.EnqueueRequest{Queue: fmt.Sprintf("made-up-%d", i), JobType: "t"})
				if _, reason := grpcReason(err); reason != "UNKNOWN_QUEUE" {
					t.Errorf("enqueue %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// More of them, while the victim enqueues.
	underAttack(t, v, 2, func(ctx context.Context) {
		i := next.Add(1)
		_, err := v.jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: fmt.Sprintf("made-up-%d", i), JobType: "t"})
		if code, reason := grpcReason(err); reason != "UNKNOWN_QUEUE" && code != codes.Canceled {
			t.Errorf("enqueue %d: %v", i, err)
		}
	})
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	text := string(raw)
	if strings.Contains(text, "made-up-") {
		t.Fatalf("/metrics has series of refused queues")
	}
	var other int64
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, `sepp_enqueues_total{outcome="rejected",queue="other"} `); ok {
			fmt.Sscan(v, &other)
		}
	}
	if other < n {
		t.Errorf(`sepp_enqueues_total{outcome="rejected",queue="other"} is %d, want at least %d`, other, n)
	}
	if !strings.Contains(text, `sepp_enqueues_total{outcome="created",queue="victim"}`) {
		t.Errorf("/metrics lacks the declared queue's series")
	}
	series := 0
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "sepp_") {
			series++
		}
	}
	t.Logf("%d sepp_ series after %d refused enqueues", series, n)
	if series > 200 {
		t.Errorf("%d series", series)
	}
}

// TestMetricsUndeclaredQueueExists: without strict, an undeclared queue
// gets its own series once it holds a job; its refusals before that fold
// into "other".
func TestMetricsUndeclaredQueueExists(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	jobs := seppv1.NewJobServiceClient(dialGRPC(t, srv))
	ctx := context.Background()
	_, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "fresh", JobType: ""}) // INVALID_FIELD
	if code, _ := grpcReason(err); code != codes.InvalidArgument {
		t.Fatal(err)
	}
	if _, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "fresh", JobType: "t"}); err != nil {
		t.Fatal(err)
	}
	_, _ = jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "fresh", JobType: ""})
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`sepp_enqueues_total{outcome="rejected",queue="other"} 1`,
		`sepp_enqueues_total{outcome="rejected",queue="fresh"} 1`,
		`sepp_enqueues_total{outcome="created",queue="fresh"} 1`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// zeros is an endless reader of zero bytes that allocates nothing.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// postBig sends a body of size bytes (chunked if chunked) to the Connect
// Enqueue without holding it in memory, and returns the answer's HTTP status
// and body.
func postBig(t testing.TB, url string, size int64, chunked bool) (int, map[string]any, error) {
	t.Helper()
	var body io.Reader = io.LimitReader(zeros{}, size)
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/proto")
	if chunked {
		req.ContentLength = -1
	} else {
		req.ContentLength = size
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("not JSON: %d %q", resp.StatusCode, raw)
	}
	return resp.StatusCode, out, nil
}

func TestLimitRequestBytes(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: victimConfig, RealTime: true})
	v := newVictim(t, srv)
	url := srv.URL + "/sepp.v1.JobService/Enqueue"
	const want = 1<<20 + 1000*4096 + 128<<10
	check := func(chunked bool) {
		t.Helper()
		status, body, err := postBig(t, url, 100<<20, chunked)
		if err != nil {
			t.Errorf("100 MB body (chunked %v): no answer: %v", chunked, err)
			return
		}
		if status != 429 || reasonOf(t, body) != "LIMIT_EXCEEDED" || !strings.Contains(body["message"].(string), "limits.max_request_bytes") ||
			!strings.Contains(body["message"].(string), fmt.Sprint(want)) {
			t.Fatalf("100 MB body (chunked %v): %d %v", chunked, status, body)
		}
	}
	check(false)
	check(true)
	// Another path (a webhook's, /metrics) gets a plain 413.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/nothing", io.LimitReader(zeros{}, 100<<20))
	req.ContentLength = 100 << 20
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), "limits.max_request_bytes") {
		t.Fatalf("100 MB body to another path: %d %q", resp.StatusCode, raw)
	}

	// gRPC: a 63 MiB message is refused from its length prefix.
	big := &seppv1.EnqueueRequest{Queue: "victim", JobType: "t", Payload: make([]byte, 63<<20)}
	_, err = v.jobs.Enqueue(context.Background(), big, grpc.MaxCallSendMsgSize(100<<20))
	// Refused from its length prefix by Sepp's frame reading (frames.go),
	// with the reason every other route gives.
	wantLimit(t, err, "max_request_bytes", want)
	t.Logf("63 MiB gRPC message: %v", status.Convert(err).Message())
	big = nil

	// A message at the limits still goes through: one job with the
	// largest payload.
	if _, err := v.jobs.Enqueue(context.Background(), &seppv1.EnqueueRequest{Queue: "victim", JobType: "t", Payload: make([]byte, 1<<20)}); err != nil {
		t.Fatalf("1 MiB payload: %v", err)
	}

	before := heapBytes()
	underAttack(t, v, 2, func(ctx context.Context) {
		check(false)
		if ctx.Err() == nil {
			check(true)
		}
	})
	if after := heapBytes(); after-before > 50<<20 {
		t.Errorf("heap %.1f MB before the 100 MB bodies, %.1f MB after", float64(before)/1e6, float64(after)/1e6)
	}
}

func TestWaitMsOutOfRange(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	conn := dialGRPC(t, srv)
	workers, effects := seppv1.NewWorkerServiceClient(conn), seppv1.NewEffectServiceClient(conn)
	ctx := context.Background()
	const wrap = 18446744075710 // × 1 ms wraps around int64 nanoseconds to about 2 s
	_, err := workers.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"q"}, WaitMs: wrap})
	wantInvalidField(t, err, "wait_ms", "between 0 and 300000")
	_, err = effects.ClaimEffect(ctx, &seppv1.ClaimEffectRequest{Scope: "s", Key: "k", WaitMs: wrap})
	wantInvalidField(t, err, "wait_ms", "between 0 and 300000")
	huge := int64(1) << 62
	_, err = workers.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"q"}, LeaseMs: huge})
	wantInvalidField(t, err, "lease_ms", "between 0 and 9223372036854")
	_, err = effects.ClaimEffect(ctx, &seppv1.ClaimEffectRequest{Scope: "s", Key: "k", TtlMs: huge})
	wantInvalidField(t, err, "ttl_ms", "between 0 and 9223372036854")
	_, err = effects.ClaimEffect(ctx, &seppv1.ClaimEffectRequest{Scope: "s", Key: "k", LeaseMs: huge})
	wantInvalidField(t, err, "lease_ms", "between 0 and 9223372036854")
	_, err = effects.ExtendEffectLease(ctx, &seppv1.ExtendEffectLeaseRequest{Token: strings.Repeat("0", 32), LeaseMs: huge})
	wantInvalidField(t, err, "lease_ms", "between 0 and 9223372036854")
	id := "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d"
	_, err = workers.ExtendLease(ctx, &seppv1.ExtendLeaseRequest{JobId: id, LeaseToken: strings.Repeat("0", 32), LeaseMs: huge})
	wantInvalidField(t, err, "lease_ms", "between 0 and 9223372036854")
	_, err = workers.Fail(ctx, &seppv1.FailRequest{JobId: id, LeaseToken: strings.Repeat("0", 32), RetryAfterMs: proto.Int64(huge)})
	wantInvalidField(t, err, "retry_after_ms", "between 0 and 9223372036854")

	// The probe's own request, in Connect JSON.
	for path, body := range map[string]string{
		"/sepp.v1.WorkerService/Reserve":     `{"queues":["q"],"waitMs":"18446744075710"}`,
		"/sepp.v1.EffectService/ClaimEffect": `{"scope":"s","key":"k","waitMs":"18446744075710"}`,
	} {
		status, out := postJSON(t, srv.URL+path, body)
		if status != 400 || reasonOf(t, out) != "INVALID_FIELD" || !strings.Contains(out["message"].(string), "wait_ms") {
			t.Fatalf("%s: %d %v", path, status, out)
		}
	}
}

// rawCodec sends and receives bytes as they are, to put a malformed message
// on the wire.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// malformed are request bodies that do not decode as an EnqueueRequest.
var malformed = map[string][]byte{
	"invalid UTF-8":     protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "q\xff\xfe"),
	"truncated":         append(protowire.AppendTag(nil, 1, protowire.BytesType), 50, 'q'),
	"bad wire type":     {0x0f},
	"overlong varint":   {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	"field number zero": {0x02, 0x00},
}

func TestMalformedProtobuf(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: victimConfig})
	conn := dialGRPC(t, srv)
	v := newVictim(t, srv)
	ctx := context.Background()
	for name, msg := range malformed {
		var out []byte
		err := conn.Invoke(ctx, "/sepp.v1.JobService/Enqueue", &msg, &out, grpc.ForceCodecV2(rawCodec{}))
		wantInvalidField(t, err, "request", "sepp.v1.EnqueueRequest")
		t.Logf("gRPC, %s: %v", name, status.Convert(err).Message())

		// Connect, binary: the error body is JSON.
		resp, err := http.Post(srv.URL+"/sepp.v1.JobService/Enqueue", "application/proto", bytes.NewReader(msg))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("Connect, %s: %d %q", name, resp.StatusCode, raw)
		}
		if resp.StatusCode != 400 || body["code"] != "invalid_argument" || reasonOf(t, body) != "INVALID_FIELD" {
			t.Fatalf("Connect, %s: %d %v", name, resp.StatusCode, body)
		}
	}
	// Connect JSON that does not parse gets the reason too.
	status, body := postJSON(t, srv.URL+"/sepp.v1.JobService/Enqueue", `{"queue":`)
	if status != 400 || reasonOf(t, body) != "INVALID_FIELD" {
		t.Fatalf("bad JSON: %d %v", status, body)
	}
	// The health check's stream decodes the same way.
	var out []byte
	bad := malformed["truncated"]
	err := conn.Invoke(ctx, "/grpc.health.v1.Health/Check", &bad, &out, grpc.ForceCodecV2(rawCodec{}))
	if code, reason := grpcReason(err); code != codes.InvalidArgument || reason != "INVALID_FIELD" {
		t.Fatalf("health check: %v", err)
	}
	underAttack(t, v, 2, func(ctx context.Context) {
		for _, msg := range malformed {
			var out []byte
			err := conn.Invoke(ctx, "/sepp.v1.JobService/Enqueue", &msg, &out, grpc.ForceCodecV2(rawCodec{}))
			if code, reason := grpcReason(err); reason != "INVALID_FIELD" && code != codes.Canceled {
				t.Errorf("attack: %v", err)
			}
		}
	})
}
