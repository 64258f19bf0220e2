package server_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// manyQueues returns n queue names.
func manyQueues(n int) []string {
	qs := make([]string, n)
	for i := range qs {
		qs[i] = fmt.Sprintf("queue-%05d", i)
	}
	return qs
}

// connectReason returns the code, ErrorInfo reason and message of a
// connect-go client's error.
func connectReason(err error) (connect.Code, string, string) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return connect.CodeOf(err), "", fmt.Sprint(err)
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok {
				return ce.Code(), info.GetReason(), ce.Message()
			}
		}
	}
	return ce.Code(), "", ce.Message()
}

// TestReserveQueuesRefusedBeforeDecode: a Reserve naming 3,000 queues (39
// KB, under the Reserve's request limit) is refused with LIMIT_EXCEEDED
// over gRPC, the Connect protocol (binary and JSON) and gRPC-Web, and the
// message says the count passed the limit without naming all of it: the
// queues past the 101st were never read (issue 22, point 6;
// BenchmarkReserveRefusal measures the cost).
func TestReserveQueuesRefusedBeforeDecode(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	queues := manyQueues(3000)
	const want = "Reserve names more than 100 queues; the limit is 100 (limits.max_reserve_queues): name fewer queues, or run several workers"

	_, err := seppv1.NewWorkerServiceClient(dialGRPC(t, srv)).Reserve(ctx, &seppv1.ReserveRequest{Queues: queues, WaitMs: 1000})
	wantLimit(t, err, "limits.max_reserve_queues", 100)
	if msg := status.Convert(err).Message(); msg != want {
		t.Errorf("gRPC: message %q, want %q", msg, want)
	}

	for name, opts := range map[string][]connect.ClientOption{
		"Connect":      nil,
		"Connect JSON": {connect.WithProtoJSON()},
		"gRPC-Web":     {connect.WithGRPCWeb()},
	} {
		w := seppv1connect.NewWorkerServiceClient(http.DefaultClient, srv.URL, opts...)
		_, err := w.Reserve(ctx, &seppv1.ReserveRequest{Queues: queues, WaitMs: 1000})
		if code, reason, msg := connectReason(err); code != connect.CodeResourceExhausted || reason != "LIMIT_EXCEEDED" || msg != want {
			t.Errorf("%s: got %v %q %q, want resource_exhausted LIMIT_EXCEEDED %q", name, code, reason, msg, want)
		}
	}

	// A list the count on the bytes does not follow (a member name written
	// with escapes) is decoded, and refused by the handler with its count.
	body := `{"\u0071ueues":["` + strings.Join(queues[:150], `","`) + `"]}`
	code, out := postJSON(t, srv.URL+"/sepp.v1.WorkerService/Reserve", body)
	if code != 429 || reasonOf(t, out) != "LIMIT_EXCEEDED" || !strings.Contains(out["message"].(string), "Reserve names 150 queues") {
		t.Errorf("escaped member name: %d %v", code, out)
	}
}

// TestReserveRefusedFromItsLength: a Reserve larger than any naming at most
// max_reserve_queues queues can be is refused from its length, the gRPC
// length prefix or the HTTP Content-Length, with LIMIT_EXCEEDED
// limits.max_reserve_queues, over gRPC, the Connect protocol (binary and
// JSON) and gRPC-Web; and before the server reads it: a call that sends
// only the length and holds the rest back gets the answer. Refused from
// its list, a Reserve naming 20,000 queues cost the server 0.7-1.0 ms of
// CPU, most of it in receiving and keeping its 260 KB (bench/fairlimits
// -run refusal).
func TestReserveRefusedFromItsLength(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	const path = "/sepp.v1.WorkerService/Reserve"
	reserve := &seppv1.ReserveRequest{Queues: manyQueues(20000), WaitMs: 1000}
	size := proto.Size(reserve) // 260003
	want := func(what string, size int, limit int) string {
		return fmt.Sprintf("the Reserve request %s is %d bytes, more than any Reserve naming at most 100 queues can be (%d bytes; limits.max_reserve_queues): name fewer queues, or run several workers", what, size, limit)
	}
	const limit, limitJSON = 57816, 323268 // twice the largest Reserve, and 4 KiB (counts.go)

	_, err := seppv1.NewWorkerServiceClient(dialGRPC(t, srv)).Reserve(ctx, reserve)
	wantLimit(t, err, "limits.max_reserve_queues", 100)
	if msg := status.Convert(err).Message(); msg != want("message", size, limit) {
		t.Errorf("gRPC: message %q, want %q", msg, want("message", size, limit))
	}
	// JSON may write each byte of a name as a 6-byte \u escape, so its
	// limit is higher: 40,000 queues are over it.
	jsonReserve := &seppv1.ReserveRequest{Queues: manyQueues(40000)}
	jsonSize := len(protojsonBytes(t, jsonReserve))
	for _, tc := range []struct {
		name string
		opts []connect.ClientOption
		req  *seppv1.ReserveRequest
		want string
	}{
		{"Connect", nil, reserve, want("body", size, limit)},
		{"gRPC-Web", []connect.ClientOption{connect.WithGRPCWeb()}, reserve, want("body", size+5, limit)},
		{"Connect JSON", []connect.ClientOption{connect.WithProtoJSON()}, jsonReserve, want("body", jsonSize, limitJSON)},
	} {
		w := seppv1connect.NewWorkerServiceClient(http.DefaultClient, srv.URL, tc.opts...)
		_, err := w.Reserve(ctx, tc.req)
		if code, reason, msg := connectReason(err); code != connect.CodeResourceExhausted || reason != "LIMIT_EXCEEDED" || msg != tc.want {
			t.Errorf("%s: got %v %q %q, want resource_exhausted LIMIT_EXCEEDED %q", tc.name, code, reason, msg, tc.want)
		}
	}

	// Only the length, and the rest held back until the answer came: on
	// every way a gRPC or gRPC-Web call reaches the server, its length
	// prefix...
	prefix := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(prefix[1:], uint32(size))
	for _, p := range grpcPaths {
		ct := "application/grpc"
		if p.web {
			ct = "application/grpc-web"
		}
		a := answerBeforeBody(t, p.client(t, srv), srv.URL+path, ct, prefix, -1)
		if a == nil {
			t.Errorf("%s: no answer before the message was sent", p.name)
			continue
		}
		ga := answerOf(t, srv.URL+path, a)
		if ga.code != "8" || ga.reason != "LIMIT_EXCEEDED" || ga.message != want("message", size, limit) {
			t.Errorf("%s: %v; want grpc-status 8 LIMIT_EXCEEDED %q", p.name, ga, want("message", size, limit))
		}
	}
	// ... and a Connect call's Content-Length, over HTTP/2 and HTTP/1.1.
	for name, hc := range map[string]*http.Client{"HTTP/2": h2cAfterHealthz(t, srv), "HTTP/1.1": http1Client(t, srv)} {
		a := answerBeforeBody(t, hc, srv.URL+path, "application/proto", prefix, int64(size))
		if a == nil {
			t.Errorf("Connect over %s: no answer before the body was sent", name)
			continue
		}
		raw, _ := io.ReadAll(a.Body)
		a.Body.Close()
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil || a.StatusCode != 429 || reasonOf(t, out) != "LIMIT_EXCEEDED" || out["message"] != want("body", size, limit) {
			t.Errorf("Connect over %s: %d %s", name, a.StatusCode, raw)
		}
	}

	// A Reserve within the bounds is served, with a worker_id at its bound
	// (1024 bytes), which the limit counts on; a longer one is refused.
	w := seppv1.NewWorkerServiceClient(dialGRPC(t, srv))
	if _, err := w.Reserve(ctx, &seppv1.ReserveRequest{Queues: manyQueues(100), WorkerId: strings.Repeat("w", 1024)}); err != nil {
		t.Errorf("a Reserve naming 100 queues: %v", err)
	}
	_, err = w.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"q"}, WorkerId: strings.Repeat("w", 1025)})
	wantInvalidField(t, err, "worker_id", "worker_id: is 1025 bytes; the limit is 1024")
}

// answerBeforeBody sends a call to url whose body is start and then holds
// back the rest (contentLength, or -1 for none), and returns the answer if
// it comes within 10 seconds, before the rest is sent; then it ends the
// body.
func answerBeforeBody(t *testing.T, hc *http.Client, url, contentType string, start []byte, contentLength int64) *http.Response {
	t.Helper()
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	go func() {
		<-ctx.Done()
		pw.Close() // no answer: the client stops waiting for its body
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = contentLength
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("TE", "trailers")
	resp, err := hc.Do(req)
	if err != nil {
		t.Logf("POST %s: %v", url, err)
		return nil
	}
	return resp
}

// protojsonBytes is m in JSON, as connect-go sends it.
func protojsonBytes(t *testing.T, m proto.Message) []byte {
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestListsRefusedBeforeDecode: the jobs of an EnqueueBatch and the
// completions of a CompleteBatch over max_batch_size, and the headers of an
// Enqueue over 64, are refused from the request's bytes with the reason
// the handler gives; at the bound the calls go through.
func TestListsRefusedBeforeDecode(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[server]\nmax_batch_size = 10\n"})
	ctx := context.Background()
	conn := dialGRPC(t, srv)
	jobs, workers := seppv1.NewJobServiceClient(conn), seppv1.NewWorkerServiceClient(conn)
	batch := func(n int) *seppv1.EnqueueBatchRequest {
		req := &seppv1.EnqueueBatchRequest{}
		for range n {
			req.Jobs = append(req.Jobs, &seppv1.EnqueueRequest{Queue: "q", JobType: "t"})
		}
		return req
	}
	completions := func(n int) *seppv1.CompleteBatchRequest {
		req := &seppv1.CompleteBatchRequest{}
		for range n {
			req.Completions = append(req.Completions, &seppv1.CompleteRequest{JobId: "0", LeaseToken: "0"})
		}
		return req
	}
	headers := func(n int) map[string]string {
		h := map[string]string{}
		for i := range n {
			h[fmt.Sprint("h", i)] = "v"
		}
		return h
	}
	check := func(what string, err error, code codes.Code, reason, msg string) {
		t.Helper()
		gotCode, gotReason := grpcReason(err)
		if gotCode != code || gotReason != reason || status.Convert(err).Message() != msg {
			t.Errorf("%s: got %v %q %q, want %v %s %q", what, gotCode, gotReason, status.Convert(err).Message(), code, reason, msg)
		}
	}
	_, err := jobs.EnqueueBatch(ctx, batch(11))
	check("11 jobs", err, codes.InvalidArgument, "BATCH_TOO_LARGE", "batch has more than 10 jobs; the limit is 10 (max_batch_size): split it into smaller batches")
	_, err = workers.CompleteBatch(ctx, completions(11))
	check("11 completions", err, codes.InvalidArgument, "BATCH_TOO_LARGE", "batch has more than 10 completions; the limit is 10 (max_batch_size): split it")
	_, err = jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "q", JobType: "t", Headers: headers(65)})
	check("65 headers", err, codes.InvalidArgument, "INVALID_FIELD", "headers: has more than 64 entries; the limit is 64")

	if _, err := jobs.EnqueueBatch(ctx, batch(10)); err != nil {
		t.Errorf("10 jobs: %v", err)
	}
	if _, err := workers.CompleteBatch(ctx, completions(10)); err != nil {
		t.Errorf("10 completions: %v", err)
	}
	if _, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "q", JobType: "t", Headers: headers(64)}); err != nil {
		t.Errorf("64 headers: %v", err)
	}

	// In a batch that is not atomic, a job with too many headers fails
	// alone, and the others are enqueued.
	req := batch(2)
	req.Jobs[1].Headers = headers(65)
	res, err := jobs.EnqueueBatch(ctx, req)
	if err != nil || res.GetResults()[0].GetAck() == nil || res.GetResults()[1].GetError().GetReason() != "INVALID_FIELD" {
		t.Errorf("a batch with one job over the headers' bound: %v %v", res, err)
	}

	// Connect JSON, whose headers are an object.
	h := make([]string, 65)
	for i := range h {
		h[i] = fmt.Sprintf(`"h%d":"v"`, i)
	}
	code, out := postJSON(t, srv.URL+"/sepp.v1.JobService/Enqueue", `{"queue":"q","jobType":"t","headers":{`+strings.Join(h, ",")+`}}`)
	if code != 400 || reasonOf(t, out) != "INVALID_FIELD" || out["message"] != "headers: has more than 64 entries; the limit is 64" {
		t.Errorf("Connect JSON, 65 headers: %d %v", code, out)
	}
}
