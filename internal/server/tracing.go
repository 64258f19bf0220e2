package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/spans"
	"github.com/sepp-dev/sepp/internal/store"
)

// tracerName is the instrumentation scope of the server's spans.
const tracerName = "github.com/sepp-dev/sepp/internal/server"

// maxTraceLinks bounds the jobs whose trace context one span takes in
// (links, and for Complete the stored jobs read for it), so a batch of a
// thousand jobs costs a bounded amount of tracing.
const maxTraceLinks = 64

// traceContext reads the W3C trace context of job headers. The server uses
// W3C Trace Context whatever a client's propagators are: it is what every
// Sepp client writes (traceparent, tracestate).
var traceContext = propagation.TraceContext{}

// newTracing returns the tracer of the server's spans and the function that
// flushes and stops what it started: opts.TracerProvider when given (its
// owner stops it), else, with [tracing] enabled, an OTLP/HTTP exporter
// behind a batch span processor. Off, it returns a nil tracer, which every
// handler checks before doing any tracing work.
func newTracing(cfg config.TracingConfig, given trace.TracerProvider, log *slog.Logger) (trace.Tracer, func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	if given != nil {
		return given.Tracer(tracerName), noop, nil
	}
	if !cfg.Enabled {
		return nil, noop, nil
	}
	var opts []otlptracehttp.Option
	switch u := cfg.ExporterURL(); {
	case u != "":
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	case cfg.Endpoint != "":
		opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint))
	}
	if cfg.Insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	// New reads the OTEL_EXPORTER_OTLP_* variables for what opts leave
	// out, and does not connect: an unreachable collector costs dropped
	// spans and log lines, never a server that will not start.
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("[tracing]: the OTLP exporter: %w", err)
	}
	// OTEL_RESOURCE_ATTRIBUTES first, so service_name wins over it.
	res, err := resource.New(context.Background(), resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", cfg.ServiceName)))
	if err != nil {
		return nil, nil, fmt.Errorf("[tracing]: the resource attributes: %w", err)
	}
	// The SDK reports a failed export to the global error handler, which
	// would print it with the standard logger: send it to the server's.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: spans were not exported", "endpoint", cfg.Endpoint, "err", err)
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))))
	return tp.Tracer(tracerName), tp.Shutdown, nil
}

// jobContexts collects the distinct trace contexts found in job headers, up
// to maxTraceLinks.
type jobContexts struct {
	seen  []trace.SpanContext
	links []trace.Link
}

func (c *jobContexts) add(headers map[string]string, jobID string) {
	if len(c.seen) >= maxTraceLinks {
		return
	}
	if _, ok := headers["traceparent"]; !ok {
		return
	}
	sc := trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.MapCarrier(headers)))
	if !sc.IsValid() {
		return
	}
	for _, s := range c.seen {
		if s.Equal(sc) {
			return
		}
	}
	c.seen = append(c.seen, sc)
	var attrs []attribute.KeyValue
	if jobID != "" {
		attrs = []attribute.KeyValue{attribute.String("messaging.message.id", jobID)}
	}
	c.links = append(c.links, trace.Link{SpanContext: sc, Attributes: attrs})
}

// start starts a server span that continues the jobs' trace: the child of
// their producer's span when they all carry the same one (one producer,
// the usual case), else a span of its own trace that links to each.
func (c *jobContexts) start(ctx context.Context, t trace.Tracer, name string, attrs []attribute.KeyValue, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	opts = append(opts, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	switch len(c.seen) {
	case 0:
	case 1:
		ctx = trace.ContextWithRemoteSpanContext(ctx, c.seen[0])
	default:
		opts = append(opts, trace.WithLinks(c.links...), trace.WithNewRoot())
	}
	return t.Start(ctx, name, opts...)
}

// spanAttrs are the attributes of a server span on queues.
func spanAttrs(operation, kind string, queues ...string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{spans.MessagingSystem(),
		attribute.String("messaging.operation.name", operation), attribute.String("messaging.operation.type", kind)}
	if len(queues) == 1 {
		attrs = append(attrs, attribute.String("messaging.destination.name", queues[0]))
	}
	return attrs
}

// Enqueue enqueues one job (enqueue.go), in a span when tracing is on.
func (j *jobService) Enqueue(ctx context.Context, req *seppv1.EnqueueRequest) (*seppv1.EnqueueResponse, error) {
	if j.s.tracer == nil {
		return j.enqueue(ctx, req)
	}
	var res *seppv1.EnqueueResponse
	err := j.tracedEnqueue(ctx, []*seppv1.EnqueueRequest{req}, func(ctx context.Context) ([]*seppv1.EnqueueBatchResult, error) {
		var err error
		if res, err = j.enqueue(ctx, req); err != nil {
			return nil, err
		}
		return []*seppv1.EnqueueBatchResult{{Outcome: &seppv1.EnqueueBatchResult_Ack{Ack: res}}}, nil
	})
	return res, err
}

// EnqueueBatch enqueues a batch (enqueue.go), in a span when tracing is on.
func (j *jobService) EnqueueBatch(ctx context.Context, req *seppv1.EnqueueBatchRequest) (*seppv1.EnqueueBatchResponse, error) {
	if j.s.tracer == nil {
		return j.enqueueBatch(ctx, req)
	}
	var res *seppv1.EnqueueBatchResponse
	err := j.tracedEnqueue(ctx, req.GetJobs(), func(ctx context.Context) ([]*seppv1.EnqueueBatchResult, error) {
		var err error
		res, err = j.enqueueBatch(ctx, req)
		return res.GetResults(), err
	})
	return res, err
}

// CompleteBatch completes jobs (worker.go), in a span when tracing is on.
func (w *workerService) CompleteBatch(ctx context.Context, req *seppv1.CompleteBatchRequest) (*seppv1.CompleteBatchResponse, error) {
	if w.s.tracer == nil {
		return w.completeBatch(ctx, req)
	}
	return w.tracedCompleteBatch(ctx, req)
}

// Fail fails a job (worker.go), in a span when tracing is on.
func (w *workerService) Fail(ctx context.Context, req *seppv1.FailRequest) (*seppv1.FailResponse, error) {
	if w.s.tracer == nil {
		return w.fail(ctx, req)
	}
	return w.tracedFail(ctx, req)
}

// tracedEnqueue is Enqueue and EnqueueBatch in a span sepp.server.enqueue
// that continues the trace of the jobs' headers. A single job's span names
// the job it created or found; a batch's counts the outcomes.
func (j *jobService) tracedEnqueue(ctx context.Context, reqs []*seppv1.EnqueueRequest, call func(context.Context) ([]*seppv1.EnqueueBatchResult, error)) error {
	var jc jobContexts
	for _, r := range reqs {
		jc.add(r.GetHeaders(), "")
	}
	var attrs []attribute.KeyValue
	if q := spans.OneQueue(reqs); q != "" {
		attrs = spanAttrs("enqueue", "send", q)
	} else {
		attrs = spanAttrs("enqueue", "send")
	}
	attrs = append(attrs, attribute.Int("messaging.batch.message_count", len(reqs)))
	ctx, span := jc.start(ctx, j.s.tracer, "sepp.server.enqueue", attrs)
	results, err := call(ctx)
	if err == nil {
		var created, deduplicated, rejected int
		for _, r := range results {
			switch {
			case r.GetError() != nil:
				rejected++
			case r.GetAck().GetDeduplicated():
				deduplicated++
			default:
				created++
			}
		}
		span.SetAttributes(attribute.Int("sepp.jobs.created", created), attribute.Int("sepp.jobs.deduplicated", deduplicated),
			attribute.Int("sepp.jobs.rejected", rejected))
		if len(results) == 1 && results[0].GetAck() != nil {
			span.SetAttributes(attribute.String("messaging.message.id", results[0].GetAck().GetJobId()))
		}
	}
	spans.End(span, err)
	return err
}

// traceReserve records a Reserve that handed out jobs as a span
// sepp.server.reserve, from the store call that reserved them (tried) to
// now: a long poll's wait before it is no part of the jobs' story. A Reserve
// that found nothing records nothing.
func (s *Server) traceReserve(ctx context.Context, tried time.Time, req *seppv1.ReserveRequest, jobs []store.ReservedJob) {
	if len(jobs) == 0 {
		return
	}
	var jc jobContexts
	for _, r := range jobs {
		jc.add(r.Job.Headers, formatJobID(r.Job.ID))
	}
	attrs := append(spanAttrs("reserve", "receive", req.GetQueues()...),
		attribute.Int("messaging.batch.message_count", len(jobs)), attribute.String("sepp.worker_id", req.GetWorkerId()))
	if len(jobs) == 1 {
		attrs = append(attrs, attribute.String("messaging.message.id", formatJobID(jobs[0].Job.ID)),
			attribute.Int("sepp.job.attempt", int(jobs[0].Job.Attempts)))
	}
	_, span := jc.start(ctx, s.tracer, "sepp.server.reserve", attrs, trace.WithTimestamp(tried))
	span.End()
}

// storedContexts reads the trace context of the stored jobs ids name, up to
// maxTraceLinks of them: Complete and Fail carry no headers, the jobs do.
// It costs a read of each job, which only a server with [tracing] on pays.
func (s *Server) storedContexts(ctx context.Context, ids []string) *jobContexts {
	var jc jobContexts
	for i, id := range ids {
		if i == maxTraceLinks {
			break
		}
		jid, aerr := parseJobID(id)
		if aerr != nil {
			continue
		}
		if job, err := s.store.GetJob(ctx, &store.GetJobParams{ID: jid}); err == nil {
			jc.add(job.Headers, id)
		}
	}
	return &jc
}

// tracedCompleteBatch is CompleteBatch in a span sepp.server.complete.
func (w *workerService) tracedCompleteBatch(ctx context.Context, req *seppv1.CompleteBatchRequest) (*seppv1.CompleteBatchResponse, error) {
	ids := make([]string, len(req.GetCompletions()))
	for i, c := range req.GetCompletions() {
		ids[i] = c.GetJobId()
	}
	jc := w.s.storedContexts(ctx, ids)
	attrs := append(spanAttrs("complete", "settle"), attribute.Int("messaging.batch.message_count", len(ids)))
	if len(ids) == 1 {
		attrs = append(attrs, attribute.String("messaging.message.id", ids[0]))
	}
	ctx, span := jc.start(ctx, w.s.tracer, "sepp.server.complete", attrs)
	res, err := w.completeBatch(ctx, req)
	if err == nil {
		lost := 0
		for _, r := range res.GetResults() {
			if r.GetError() != nil {
				lost++
			}
		}
		span.SetAttributes(attribute.Int("sepp.jobs.refused", lost))
	}
	spans.End(span, err)
	return res, err
}

// tracedFail is Fail in a span sepp.server.fail, which says what became of
// the job.
func (w *workerService) tracedFail(ctx context.Context, req *seppv1.FailRequest) (*seppv1.FailResponse, error) {
	jc := w.s.storedContexts(ctx, []string{req.GetJobId()})
	attrs := append(spanAttrs("fail", "settle"), attribute.String("messaging.message.id", req.GetJobId()),
		attribute.Bool("sepp.permanent", req.GetPermanent()))
	ctx, span := jc.start(ctx, w.s.tracer, "sepp.server.fail", attrs)
	res, err := w.fail(ctx, req)
	if err == nil {
		state := "retried"
		if res.GetState() == seppv1.JobState_JOB_STATE_DEAD {
			state = "dead"
		}
		span.SetAttributes(attribute.String("sepp.job.outcome", state))
	}
	spans.End(span, err)
	return res, err
}
