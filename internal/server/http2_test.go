package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// h2cClient speaks HTTP/2 with prior knowledge over cleartext, as curl
// --http2-prior-knowledge does; all its requests share one connection.
func h2cClient(t *testing.T) *http.Client {
	t.Helper()
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestHTTP2PriorKnowledge: on the one port, an HTTP/2 connection whose first
// request is a webhook is served whole by the HTTP stack: webhooks, /metrics,
// Connect and, on the same connection, gRPC calls.
func TestHTTP2PriorKnowledge(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: webhookConfig})
	hc := h2cClient(t)
	post := func() (int, string, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/hooks/plain", strings.NewReader(`{"n":1}`))
		req.Header.Set("Idempotency-Key", "h2-delivery-1")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Fatalf("answered over %s, want HTTP/2", resp.Proto)
		}
		return resp.StatusCode, resp.Header.Get("Sepp-Job-Id"), string(body)
	}
	status, id, body := post()
	if status != http.StatusAccepted || id == "" {
		t.Fatalf("first post: %d %q %s", status, id, body)
	}
	if status, again, body := post(); status != http.StatusOK || again != id || !strings.Contains(body, `"deduplicated":true`) {
		t.Fatalf("retry: %d %q %s, want 200 with %s", status, again, body, id)
	}

	resp, err := hc.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || !strings.Contains(string(metrics), "sepp_webhook_requests_total") {
		t.Fatalf("/metrics over HTTP/2: %d %s", resp.StatusCode, resp.Proto)
	}

	for _, proto := range []struct {
		name string
		opt  []connect.ClientOption
	}{{"connect", nil}, {"grpc", []connect.ClientOption{connect.WithGRPC()}}, {"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}}} {
		jobs := seppv1connect.NewJobServiceClient(hc, srv.URL, proto.opt...)
		got, err := jobs.GetJob(context.Background(), &seppv1.GetJobRequest{JobId: id})
		if err != nil {
			t.Fatalf("%s GetJob over the webhook's connection: %v", proto.name, err)
		}
		if got.GetJob().GetJobType() != "plain.event" || string(got.GetJob().GetPayload()) != `{"n":1}` {
			t.Fatalf("%s GetJob: %v", proto.name, got.GetJob())
		}
	}
	// A gRPC client's own connection still reaches the gRPC server.
	c := connectClient(t, srv)
	if j, err := c.GetJob(context.Background(), id); err != nil || j.ID != id {
		t.Fatalf("gRPC client GetJob: %v %v", j, err)
	}
}
