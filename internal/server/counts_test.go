package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// TestReserveQueuesRefusedBeforeDecode: a Reserve naming 20,000 queues is
// refused with LIMIT_EXCEEDED over gRPC, the Connect protocol (binary and
// JSON) and gRPC-Web, and the message says the count passed the limit
// without naming all of it: the queues past the 101st were never read
// (issue 22, point 6; BenchmarkReserveRefusal measures the cost).
func TestReserveQueuesRefusedBeforeDecode(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	queues := manyQueues(20000)
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
