package sepp_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/effect"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/testserver"
	"github.com/sepp-dev/sepp/worker"
)

// The global tracer provider and propagator are the app's, set once for
// every test of this file: the client, the worker and package effect use
// them, as they would in an app. Each test tells its spans apart by its
// own trace id.
var (
	tracingOnce sync.Once
	spans       *tracetest.InMemoryExporter
	tracerProv  *sdktrace.TracerProvider
)

func installTracing() {
	tracingOnce.Do(func() {
		spans = tracetest.NewInMemoryExporter()
		tracerProv = sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		otel.SetTracerProvider(tracerProv)
		otel.SetTextMapPropagator(propagation.TraceContext{})
	})
}

// spansOf returns the ended spans of trace id, by name.
func spansOf(id trace.TraceID) map[string]tracetest.SpanStub {
	out := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		if s.SpanContext.TraceID() == id {
			out[s.Name] = s
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestTraceFromProducerToHandler follows one job: a producer's span, the
// client's producer span, the server's enqueue, reserve and complete spans,
// the worker's process span and the effect's span are one trace, each
// where it belongs in it.
func TestTraceFromProducerToHandler(t *testing.T) {
	installTracing()
	srv := testserver.Start(t, testserver.Options{RealTime: true, TracerProvider: tracerProv})
	c := connect(t, srv, sepp.Config{})

	ctx, checkout := otel.Tracer("shop").Start(context.Background(), "checkout")
	ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "mail", JobType: "receipt", IdempotencyKey: sepp.Key("order-1")})
	checkout.End()
	if err != nil {
		t.Fatal(err)
	}
	id := checkout.SpanContext().TraceID()

	handled := make(chan struct{})
	w := worker.New(c, worker.Config{Queues: []string{"mail"}, Concurrency: 1})
	w.Handle("receipt", func(ctx context.Context, job *worker.Job) ([]byte, error) {
		defer close(handled)
		_, err := effect.Do(ctx, c, "mail.receipt", "order-1", effect.Options{}, func(context.Context) ([]byte, error) {
			return []byte("sent"), nil
		})
		return nil, err
	})
	wctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	<-handled
	stop()
	// Run returns once the job's completion was reported, and the
	// server's span of it ended before it answered.
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	got := spansOf(id)
	for _, name := range []string{"checkout", "sepp.enqueue mail", "sepp.server.enqueue", "sepp.server.reserve",
		"sepp.process mail", "sepp.effect mail.receipt", "sepp.server.complete"} {
		if _, ok := got[name]; !ok {
			t.Errorf("trace %s has no span %q; it has %v", id, name, keys(got))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	producer := got["sepp.enqueue mail"]
	checkParent := func(child, parent string) {
		t.Helper()
		if p := got[child].Parent.SpanID(); p != got[parent].SpanContext.SpanID() {
			t.Errorf("%s: parent span %s, want %s's %s", child, p, parent, got[parent].SpanContext.SpanID())
		}
	}
	checkParent("sepp.enqueue mail", "checkout")
	checkParent("sepp.server.enqueue", "sepp.enqueue mail")
	checkParent("sepp.server.reserve", "sepp.enqueue mail")
	checkParent("sepp.server.complete", "sepp.enqueue mail")
	checkParent("sepp.process mail", "sepp.enqueue mail")
	checkParent("sepp.effect mail.receipt", "sepp.process mail")
	if producer.SpanKind != trace.SpanKindProducer || got["sepp.process mail"].SpanKind != trace.SpanKindConsumer {
		t.Errorf("kinds: producer %v, process %v", producer.SpanKind, got["sepp.process mail"].SpanKind)
	}
	process := got["sepp.process mail"]
	if len(process.Links) != 1 || process.Links[0].SpanContext.SpanID() != producer.SpanContext.SpanID() {
		t.Errorf("process span links %+v, want one to the producer span", process.Links)
	}
	for span, want := range map[string]map[string]string{
		"sepp.enqueue mail": {"messaging.system": "sepp", "messaging.destination.name": "mail", "messaging.message.id": ack.JobID},
		"sepp.process mail": {"messaging.system": "sepp", "messaging.destination.name": "mail", "messaging.message.id": ack.JobID,
			"sepp.job.type": "receipt", "sepp.job.attempt": "1"},
		"sepp.effect mail.receipt": {"sepp.effect.key": "order-1", "sepp.effect.outcome": "ran"},
		"sepp.server.enqueue":      {"messaging.destination.name": "mail", "messaging.message.id": ack.JobID, "sepp.jobs.created": "1"},
	} {
		for k, v := range want {
			if got := attr(got[span], k).Emit(); got != v {
				t.Errorf("%s: %s = %q, want %q", span, k, got, v)
			}
		}
	}

	// The job carries the producer span's context, and nothing else was
	// added to its headers.
	job, err := c.GetJob(context.Background(), ack.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if tp := job.Headers["traceparent"]; !strings.Contains(tp, producer.SpanContext.SpanID().String()) || len(job.Headers) != 1 {
		t.Errorf("job headers %v, want the producer span's traceparent only", job.Headers)
	}
}

func keys(m map[string]tracetest.SpanStub) []string {
	var out []string
	for k := range maps.Keys(m) {
		out = append(out, k)
	}
	return out
}

// TestTraceContextInjection: a job enqueued without a span carries no
// header; a traceparent the caller set is kept as set; and a job whose
// headers are at the server's limit is enqueued without the trace context
// rather than refused, in a batch as alone.
func TestTraceContextInjection(t *testing.T) {
	installTracing()
	srv := testserver.Start(t, testserver.Options{})
	c := connect(t, srv, sepp.Config{})
	headersOf := func(ack *sepp.Ack) map[string]string {
		t.Helper()
		j, err := c.GetJob(context.Background(), ack.JobID)
		if err != nil {
			t.Fatal(err)
		}
		return j.Headers
	}

	plain, err := c.Enqueue(context.Background(), sepp.EnqueueRequest{Queue: "q", JobType: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if h := headersOf(plain); len(h) != 0 {
		t.Errorf("untraced enqueue: headers %v, want none", h)
	}

	ctx, span := otel.Tracer("app").Start(context.Background(), "request")
	defer span.End()
	mine := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	callerHeaders := map[string]string{"traceparent": mine}
	kept, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", Headers: callerHeaders})
	if err != nil {
		t.Fatal(err)
	}
	if h := headersOf(kept); h["traceparent"] != mine || len(h) != 1 {
		t.Errorf("caller's traceparent: headers %v, want it kept as set", h)
	}

	full := map[string]string{}
	for i := range config.MaxHeaderEntries {
		full[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = "v"
	}
	before := maps.Clone(full)
	ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", Headers: full})
	if err != nil {
		t.Fatalf("a job at the header limit: %v, want it enqueued", err)
	}
	if h := headersOf(ack); len(h) != config.MaxHeaderEntries || h["traceparent"] != "" {
		t.Errorf("a job at the header limit: %d headers, traceparent %q; want its own headers only", len(h), h["traceparent"])
	}
	res, err := c.EnqueueBatch(ctx, []sepp.EnqueueRequest{{Queue: "q", JobType: "t", Headers: full}, {Queue: "q", JobType: "t"}}, sepp.BatchOptions{})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("batch: %v %+v", err, res)
	}
	if h := headersOf(res[0].Ack); h["traceparent"] != "" {
		t.Errorf("batch, job at the limit: traceparent %q, want none", h["traceparent"])
	}
	if h := headersOf(res[1].Ack); !strings.Contains(h["traceparent"], span.SpanContext().TraceID().String()) {
		t.Errorf("batch, other job: headers %v, want the request's trace", h)
	}
	if !maps.Equal(full, before) || len(callerHeaders) != 1 {
		t.Errorf("the caller's header maps were written to")
	}
}

// TestTraceFailureAndReplay: a handler's error is recorded on its process
// span, the server's fail span continues the same trace, and an effect that
// ran on the first delivery shows as replayed on the second.
func TestTraceFailureAndReplay(t *testing.T) {
	installTracing()
	srv := testserver.Start(t, testserver.Options{RealTime: true, TracerProvider: tracerProv,
		Config: "[[queues]]\nname = \"pay\"\nbackoff_initial_ms = 1\nbackoff_max_ms = 1\n"})
	c := connect(t, srv, sepp.Config{})
	ctx, root := otel.Tracer("shop").Start(context.Background(), "pay")
	if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "pay", JobType: "charge"}); err != nil {
		t.Fatal(err)
	}
	root.End()
	id := root.SpanContext().TraceID()

	done := make(chan struct{})
	w := worker.New(c, worker.Config{Queues: []string{"pay"}, Concurrency: 1})
	w.Handle("charge", func(ctx context.Context, job *worker.Job) ([]byte, error) {
		_, err := effect.Do(ctx, c, "card.charge", "order-2", effect.Options{}, func(context.Context) ([]byte, error) {
			return []byte("charged"), nil
		})
		if err != nil {
			return nil, err
		}
		if job.Attempt == 1 {
			return nil, errors.New("the receipt printer is out of paper")
		}
		close(done)
		return nil, nil
	})
	wctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	<-done
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	var outcomes []string
	var failed, fail int
	for _, s := range spans.GetSpans() {
		if s.SpanContext.TraceID() != id {
			continue
		}
		switch s.Name {
		case "sepp.effect card.charge":
			outcomes = append(outcomes, attr(s, "sepp.effect.outcome").Emit())
		case "sepp.process pay":
			if s.Status.Code == codes.Error && strings.Contains(s.Status.Description, "out of paper") {
				failed++
			}
		case "sepp.server.fail":
			fail++
		}
	}
	if strings.Join(outcomes, ",") != "ran,replayed" {
		t.Errorf("effect outcomes %v, want ran on the first delivery and replayed on the second", outcomes)
	}
	if failed != 1 || fail != 1 {
		t.Errorf("%d process spans with the handler's error, %d server fail spans; want 1 and 1", failed, fail)
	}
}
