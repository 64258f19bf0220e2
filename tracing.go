package sepp

import (
	"context"
	"slices"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/spans"
)

// TracerName is the instrumentation scope of the spans the Go client, the
// worker runtime and package effect start, on the global tracer provider.
const TracerName = "github.com/sepp-dev/sepp"

// The trace context headers a job carries (W3C Trace Context).
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// MessagingSystem is the attribute every Sepp span carries, after the
// OpenTelemetry messaging conventions: messaging.system = "sepp".
func MessagingSystem() attribute.KeyValue { return spans.MessagingSystem() }

// Propagator is what the client injects a job's trace context with, and
// the worker extracts it with: the global propagator
// (otel.GetTextMapPropagator), and W3C Trace Context as well when the
// global one does not write traceparent (an app that set none, or only B3),
// since the server and the workers in other languages read traceparent.
func Propagator() propagation.TextMapPropagator {
	global := otel.GetTextMapPropagator()
	if slices.Contains(global.Fields(), HeaderTraceparent) {
		return global
	}
	return propagation.NewCompositeTextMapPropagator(global, propagation.TraceContext{})
}

// startEnqueueSpan starts the producer span of an Enqueue or EnqueueBatch
// whose ctx carries a span, and injects its context into each job's
// headers. A ctx without a span (an app that does not trace) starts
// nothing, so its jobs carry no header and the call pays one context
// lookup. The span ends with end.
func startEnqueueSpan(ctx context.Context, pbs []*seppv1.EnqueueRequest) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() || len(pbs) == 0 {
		return ctx, nil
	}
	queue := spans.OneQueue(pbs)
	name := "sepp.enqueue"
	attrs := append(make([]attribute.KeyValue, 0, 6), MessagingSystem(), attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "enqueue"))
	if queue != "" {
		name += " " + queue
		attrs = append(attrs, attribute.String("messaging.destination.name", queue))
	}
	if len(pbs) == 1 {
		attrs = append(attrs, attribute.String("sepp.job.type", pbs[0].GetJobType()))
	} else {
		attrs = append(attrs, attribute.Int("messaging.batch.message_count", len(pbs)))
	}
	ctx, span := otel.Tracer(TracerName).Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	prop := Propagator()
	skipped := 0
	for _, pb := range pbs {
		if !injectTraceContext(ctx, prop, pb) {
			skipped++
		}
	}
	if skipped > 0 {
		// The job still goes: its trace is only cut here, which the span
		// says rather than failing an enqueue that is valid as written.
		span.AddEvent("sepp.trace_context_not_injected", trace.WithAttributes(attribute.Int("sepp.jobs", skipped),
			attribute.String("sepp.reason", "the job sets a trace header itself, or the headers are at their limit")))
	}
	return ctx, span
}

// injectTraceContext adds ctx's trace context to the job's headers
// (withTraceContext) and reports whether it did.
func injectTraceContext(ctx context.Context, prop propagation.TextMapPropagator, pb *seppv1.EnqueueRequest) bool {
	h, ok := withTraceContext(ctx, prop, pb.Headers)
	pb.Headers = h
	return ok
}

// TraceHeaders returns headers with the W3C trace context of ctx's span
// added (traceparent, and tracestate when the trace has one), for a job
// written some other way than through Enqueue: package outbox adds it to
// the rows it writes. It returns headers itself, unchanged, when ctx
// carries no span, when headers already hold traceparent or tracestate,
// or when the two would take them past the server's header limits. It
// never writes to headers.
func TraceHeaders(ctx context.Context, headers map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return headers
	}
	h, _ := withTraceContext(ctx, Propagator(), headers)
	return h
}

// withTraceContext returns a copy of headers with ctx's trace context
// added, and true; or headers itself and false when they already set
// traceparent or tracestate in any case (the caller's choice wins), or
// when the added headers would take them past the server's header limits
// (config.MaxHeaderEntries, config.MaxHeaderBytes): a job the server would
// accept without them must not be refused because of them.
func withTraceContext(ctx context.Context, prop propagation.TextMapPropagator, headers map[string]string) (map[string]string, bool) {
	size := 0
	for k, v := range headers {
		if strings.EqualFold(k, HeaderTraceparent) || strings.EqualFold(k, HeaderTracestate) {
			return headers, false
		}
		size += len(k) + len(v)
	}
	carrier := propagation.MapCarrier{}
	prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return headers, true
	}
	for k, v := range carrier {
		if _, taken := headers[k]; taken {
			return headers, false
		}
		size += len(k) + len(v)
	}
	if len(headers)+len(carrier) > config.MaxHeaderEntries || size > config.MaxHeaderBytes {
		return headers, false
	}
	out := make(map[string]string, len(headers)+len(carrier))
	for k, v := range headers {
		out[k] = v
	}
	for k, v := range carrier {
		out[k] = v
	}
	return out, true
}

// endEnqueueSpan records an enqueue's outcome on its span (nil: not
// traced) and ends it.
func endEnqueueSpan(span trace.Span, ack *Ack, err error) {
	if span == nil {
		return
	}
	if err == nil && ack != nil {
		span.SetAttributes(attribute.String("messaging.message.id", ack.JobID), attribute.Bool("sepp.deduplicated", ack.Deduplicated))
	}
	spans.End(span, err)
}
