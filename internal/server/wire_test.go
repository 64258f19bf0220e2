package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/testserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// postJSON is what curl does: Connect JSON over HTTP/1.1.
func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	tr := &http.Transport{} // HTTP/1.1, like curl without --http2
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: not JSON: %s", url, raw)
	}
	return resp.StatusCode, out
}

// TestConnectJSONSeedScenario is the README's curl tour in Connect JSON: a
// retried enqueue is a hit on the first job, and the same key on another
// queue is a new job.
func TestConnectJSONSeedScenario(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	url := srv.URL + "/sepp.v1.JobService/Enqueue"
	body := `{"queue":"emails","jobType":"receipt","idempotencyKey":"receipt-order-8a3f"}`
	code, first := postJSON(t, url, body)
	if code != 200 || first["jobId"] == nil || first["deduplicated"] != false {
		t.Fatalf("first: %d %v", code, first)
	}
	code, second := postJSON(t, url, body)
	if code != 200 || second["jobId"] != first["jobId"] || second["deduplicated"] != true {
		t.Fatalf("second: %d %v; want jobId %v, deduplicated true", code, second, first["jobId"])
	}
	_, other := postJSON(t, url, `{"queue":"sms","jobType":"receipt","idempotencyKey":"receipt-order-8a3f"}`)
	if other["jobId"] == first["jobId"] || other["deduplicated"] == true {
		t.Fatalf("other queue: %v", other)
	}
}

// reasonOf extracts the ErrorInfo reason of a Connect JSON error body.
func reasonOf(t *testing.T, body map[string]any) string {
	t.Helper()
	details, _ := body["details"].([]any)
	for _, d := range details {
		m := d.(map[string]any)
		if m["type"] != "google.rpc.ErrorInfo" {
			continue
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(m["value"].(string), "="))
		if err != nil {
			t.Fatalf("detail value: %v", err)
		}
		var info errdetails.ErrorInfo
		if err := proto.Unmarshal(raw, &info); err != nil {
			t.Fatal(err)
		}
		return info.GetReason()
	}
	t.Fatalf("no ErrorInfo in %v", body)
	return ""
}

func TestConnectJSONErrors(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	url := srv.URL + "/sepp.v1.JobService/Enqueue"
	for _, tc := range []struct {
		body, code, reason string
		status             int
	}{
		{`{"queue":"q","jobType":"t","idempotencyKey":""}`, "invalid_argument", "IDEMPOTENCY_KEY_EMPTY", 400},
		{`{"queue":"q","jobType":"t","idempotencyKey":"` + strings.Repeat("k", 257) + `"}`, "invalid_argument", "IDEMPOTENCY_KEY_TOO_LONG", 400},
		{`{"queue":"q"}`, "invalid_argument", "INVALID_FIELD", 400},
		{`{"queue":"bad\u0000name","jobType":"t"}`, "invalid_argument", "INVALID_FIELD", 400},
	} {
		status, body := postJSON(t, url, tc.body)
		if status != tc.status || body["code"] != tc.code || reasonOf(t, body) != tc.reason {
			t.Fatalf("%s: %d %v; want %d %s %s", tc.body[:min(len(tc.body), 60)], status, body, tc.status, tc.code, tc.reason)
		}
	}
	// A misspelled field must fail, not turn a keyed enqueue into an
	// unkeyed one.
	status, body := postJSON(t, url, `{"queue":"q","jobType":"t","idempotencykey":"k"}`)
	if status != 400 || body["code"] != "invalid_argument" || !strings.Contains(body["message"].(string), `unknown field "idempotencykey"`) {
		t.Fatalf("misspelled field: %d %v", status, body)
	}
	status, body = postJSON(t, srv.URL+"/sepp.v1.JobService/GetJob", `{"jobId":"0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d"}`)
	if status != 404 || reasonOf(t, body) != "JOB_NOT_FOUND" {
		t.Fatalf("unknown job: %d %v", status, body)
	}
}

// TestDurationFieldMessages: a *_ms field out of range is INVALID_FIELD,
// and the message says what 0 would have meant there: the queue's lease or
// backoff (decided by the store, not a fixed default), or the default.
func TestDurationFieldMessages(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	const token = `"jobId":"0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d","leaseToken":"0123456789abcdef0123456789abcdef"`
	for _, tc := range []struct{ method, body, want string }{
		{"WorkerService/Reserve", `{"queues":["q"],"leaseMs":"-1"}`, "lease_ms: must be between 0 and 9223372036854 (0: the queue's lease_ms), got -1"},
		{"WorkerService/Fail", `{` + token + `,"error":"x","retryAfterMs":"-1"}`, "retry_after_ms: must be between 0 and 9223372036854 (0: the queue's backoff), got -1"},
		{"WorkerService/ExtendLease", `{` + token + `,"leaseMs":"-1"}`, "lease_ms: must be between 0 and 9223372036854 (0: refused: name the lease to extend to), got -1"},
		{"EffectService/ClaimEffect", `{"scope":"s","key":"k","ttlMs":"-1"}`, "ttl_ms: must be between 0 and 9223372036854 (0: 24h0m0s), got -1"},
	} {
		status, body := postJSON(t, srv.URL+"/sepp.v1."+tc.method, tc.body)
		if status != 400 || reasonOf(t, body) != "INVALID_FIELD" || body["message"] != tc.want {
			t.Errorf("%s %s: %d %v; want 400 INVALID_FIELD %q", tc.method, tc.body, status, body, tc.want)
		}
	}
}

func dialGRPC(t testing.TB, srv *testserver.Server) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func grpcReason(err error) (codes.Code, string) {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

func TestGRPC(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	conn := dialGRPC(t, srv)
	ctx := context.Background()
	jobs := seppv1.NewJobServiceClient(conn)

	key := "receipt-order-8a3f"
	first, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt", IdempotencyKey: &key})
	if err != nil || first.GetDeduplicated() {
		t.Fatalf("first: %v %v", first, err)
	}
	second, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt", IdempotencyKey: &key})
	if err != nil || !second.GetDeduplicated() || second.GetJobId() != first.GetJobId() {
		t.Fatalf("second: %v %v", second, err)
	}

	empty := ""
	_, err = jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "emails", JobType: "receipt", IdempotencyKey: &empty})
	if code, reason := grpcReason(err); code != codes.InvalidArgument || reason != "IDEMPOTENCY_KEY_EMPTY" {
		t.Fatalf("empty key: %v", err)
	}
	_, err = seppv1.NewEffectServiceClient(conn).GetEffect(ctx, &seppv1.GetEffectRequest{})
	if code, reason := grpcReason(err); code != codes.InvalidArgument || reason != "INVALID_FIELD" {
		t.Fatalf("GetEffect without a scope: %v", err)
	}

	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "sepp.v1.JobService"})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}

	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"sepp.v1.JobService", "sepp.v1.WorkerService", "sepp.v1.EffectService", "sepp.v1.AdminService", "grpc.health.v1.Health"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Fatalf("reflection lists %v; missing %s", names, want)
		}
	}
}

func TestGRPCWeb(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := seppv1connect.NewJobServiceClient(&http.Client{Transport: tr}, srv.URL, connect.WithGRPCWeb())
	key := "k"
	ctx := context.Background()
	first, err := c.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: &key})
	if err != nil {
		t.Fatalf("gRPC-Web enqueue: %v", err)
	}
	second, err := c.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: &key})
	if err != nil || !second.GetDeduplicated() || second.GetJobId() != first.GetJobId() {
		t.Fatalf("gRPC-Web repeat: %v %v", second, err)
	}
	long := strings.Repeat("k", 300)
	_, err = c.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: &long})
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "300 bytes; the limit is 256") {
		t.Fatalf("gRPC-Web error: %v", err)
	}
}

func TestHTTPHealthAndMetrics(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	status, body := postJSON(t, srv.URL+"/grpc.health.v1.Health/Check", `{}`)
	if status != 200 || body["status"] != "SERVING_STATUS_SERVING" {
		t.Fatalf("health over Connect: %d %v", status, body)
	}
	url := srv.URL + "/sepp.v1.JobService/Enqueue"
	postJSON(t, url, `{"queue":"emails","jobType":"receipt","idempotencyKey":"k"}`)
	postJSON(t, url, `{"queue":"emails","jobType":"receipt","idempotencyKey":"k"}`)

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`sepp_dedup_hits_total{queue="emails"} 1`,
		`sepp_enqueues_total{outcome="created",queue="emails"} 1`,
		`sepp_store_commit_seconds_count`,
		`sepp_jobs{queue="emails",state="available"} 1`,
		`sepp_dedup_records{queue="emails"} 1`,
	} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
}

// TestPauseUnknownQueue: PauseQueue and ResumeQueue refuse a queue the
// server does not know (not declared, nothing of it stored) with
// UNKNOWN_QUEUE and a message that says what to do, for every client, here
// Connect JSON as the dashboard sends it; create: true pauses it before its
// first job, and a declared queue or one with jobs needs no create.
func TestPauseUnknownQueue(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[[queues]]\nname = \"mail\"\n"})
	pause, resume := srv.URL+"/sepp.v1.AdminService/PauseQueue", srv.URL+"/sepp.v1.AdminService/ResumeQueue"
	listed := func(name string) bool {
		_, body := postJSON(t, srv.URL+"/sepp.v1.AdminService/ListQueues", `{}`)
		qs, _ := body["queues"].([]any)
		for _, q := range qs {
			if q.(map[string]any)["name"] == name {
				return true
			}
		}
		return false
	}
	for _, url := range []string{pause, resume} {
		code, body := postJSON(t, url, `{"queue":"nosuchqueue"}`)
		msg, _ := body["message"].(string)
		if code != http.StatusNotFound || reasonOf(t, body) != "UNKNOWN_QUEUE" || !strings.Contains(msg, `queue "nosuchqueue" is not declared and has no jobs`) ||
			!strings.Contains(msg, "--create (create: true)") {
			t.Fatalf("%s of an unknown queue: %d %v", url, code, body)
		}
	}
	if listed("nosuchqueue") {
		t.Fatal("a refused pause left the queue listed")
	}
	if code, body := postJSON(t, pause, `{"queue":"later","create":true}`); code != 200 {
		t.Fatalf("pause with create: %d %v", code, body)
	}
	if code, body := postJSON(t, resume, `{"queue":"later"}`); code != 200 || !listed("later") {
		t.Fatalf("resume of the queue paused with create: %d %v", code, body)
	}
	if code, body := postJSON(t, pause, `{"queue":"mail"}`); code != 200 {
		t.Fatalf("pause of a declared queue: %d %v", code, body)
	}
	if code, _ := postJSON(t, srv.URL+"/sepp.v1.JobService/Enqueue", `{"queue":"emails","jobType":"t"}`); code != 200 {
		t.Fatal("enqueue")
	}
	if code, body := postJSON(t, pause, `{"queue":"emails"}`); code != 200 {
		t.Fatalf("pause of a queue with a job: %d %v", code, body)
	}
}
