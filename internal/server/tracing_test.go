package server_test

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// otlpReceiver is a tiny OTLP/HTTP trace receiver: it decodes each export
// request as a collector would and keeps its spans.
type otlpReceiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil && r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
		err = proto.Unmarshal(body, &req)
	} else if err == nil {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		http.Error(w, "not an OTLP/HTTP protobuf export to /v1/traces", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				o.services = append(o.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
	o.mu.Unlock()
	// No keep-alive: the exporter's connection ends with the request, so
	// no goroutine of it outlives the test.
	w.Header().Set("Connection", "close")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// TestTracingExportsOverOTLP runs a server whose [tracing] exports to a
// real OTLP/HTTP receiver: the spans of an enqueue, a reserve and a fail
// arrive there, flushed by Shutdown, each continuing the trace the job's
// traceparent header names, with the configured service name.
func TestTracingExportsOverOTLP(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	defer collector.Close()
	srv := testserver.Start(t, testserver.Options{RealTime: true,
		Config: "[tracing]\nenabled = true\nendpoint = \"" + collector.URL + "\"\nservice_name = \"sepp-test\"\n"})
	ctx := context.Background()
	c, err := sepp.NewClient(ctx, srv.URL, sepp.Config{FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const traceID, producerID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	headers := map[string]string{"traceparent": "00-" + traceID + "-" + producerID + "-01"}
	if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", Headers: headers}); err != nil {
		t.Fatal(err)
	}
	rs, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"q"}, MaxJobs: 1})
	if err != nil || len(rs) != 1 {
		t.Fatalf("reserve: %v %v", err, rs)
	}
	if _, err := c.Fail(ctx, rs[0].Job.ID, rs[0].LeaseToken, "boom", sepp.FailOptions{Permanent: true}); err != nil {
		t.Fatal(err)
	}
	// A job without a trace context starts a trace of the server's own.
	if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t"}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil { // sends the spans it holds
		t.Fatal(err)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	found := map[string]int{}
	for _, s := range recv.spans {
		if hex.EncodeToString(s.GetTraceId()) != traceID {
			found["other "+s.GetName()]++
			continue
		}
		found[s.GetName()]++
		if p := hex.EncodeToString(s.GetParentSpanId()); p != producerID {
			t.Errorf("%s: parent %s, want the producer's %s", s.GetName(), p, producerID)
		}
		if s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("%s: kind %v, want server", s.GetName(), s.GetKind())
		}
		if s.GetName() == "sepp.server.fail" && s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_UNSET {
			t.Errorf("fail span status %v: the call succeeded", s.GetStatus())
		}
	}
	for _, name := range []string{"sepp.server.enqueue", "sepp.server.reserve", "sepp.server.fail"} {
		if found[name] != 1 {
			t.Errorf("%s: %d spans in the job's trace, want 1 (spans: %v)", name, found[name], found)
		}
	}
	if found["other sepp.server.enqueue"] != 1 {
		t.Errorf("the enqueue without a trace context: %d spans of their own, want 1 (spans: %v)", found["other sepp.server.enqueue"], found)
	}
	for _, s := range recv.services {
		if s != "sepp-test" {
			t.Errorf("service.name %q, want sepp-test", s)
		}
	}
	if len(recv.services) == 0 {
		t.Error("no resource with a service.name")
	}
}

// TestTracingCollectorDown: with the collector unreachable, calls succeed,
// the failed export is logged by the server, and Shutdown still returns.
func TestTracingCollectorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	srv := testserver.Start(t, testserver.Options{RealTime: true,
		Config: "[tracing]\nenabled = true\nendpoint = \"" + down + "\"\n"})
	ctx := context.Background()
	c, err := sepp.NewClient(ctx, srv.URL, sepp.Config{FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t"}); err != nil {
		t.Fatalf("enqueue with the collector down: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	err = srv.Shutdown(sctx)
	t.Logf("Shutdown took %v: %v", time.Since(start), err)
	if !strings.Contains(srv.Logs.String(), "tracing: spans were not exported") {
		t.Errorf("no log line of the failed export; logs:\n%s", srv.Logs.String())
	}
}

// TestTracingBatchOfManyTraces: a batch whose jobs carry the contexts of
// two producers is a span of its own trace that links to both; a batch of
// one producer's jobs is that producer's child.
func TestTracingBatchOfManyTraces(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	srv := testserver.Start(t, testserver.Options{TracerProvider: tp})
	ctx := context.Background()
	c, err := sepp.NewClient(ctx, srv.URL, sepp.Config{FailFast: true, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tp1 := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	tp2 := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	for _, batch := range [][]map[string]string{{tp1, tp2, tp1}, {tp2, tp2}} {
		var reqs []sepp.EnqueueRequest
		for _, h := range batch {
			reqs = append(reqs, sepp.EnqueueRequest{Queue: "q", JobType: "t", Headers: h})
		}
		if _, err := c.EnqueueBatch(ctx, reqs, sepp.BatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got := exp.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans, want one per batch", len(got))
	}
	mixed, one := got[0], got[1]
	if mixed.Parent.IsValid() || len(mixed.Links) != 2 ||
		mixed.Links[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		mixed.Links[1].SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("the batch of two traces: parent %v, links %+v; want a root span linking to both", mixed.Parent, mixed.Links)
	}
	if one.SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || one.Parent.SpanID().String() != "b7ad6b7169203331" || len(one.Links) != 0 {
		t.Errorf("the batch of one trace: trace %s parent %s links %d; want the producer's child", one.SpanContext.TraceID(), one.Parent.SpanID(), len(one.Links))
	}
}
