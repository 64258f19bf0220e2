package worker

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/spans"
)

// startProcessSpan starts the consumer span sepp.process <queue> around a
// job's handler, continuing the trace whose context the producer put in
// the job's headers: the span is the producer span's child, and links to
// it too, as the OpenTelemetry messaging conventions ask of a process span
// (a backend that draws only one of the two still joins them). A job
// without a traceparent header starts nothing, so workers of apps that do
// not trace pay one map lookup per job.
func startProcessSpan(ctx context.Context, job *Job) (context.Context, trace.Span) {
	if _, ok := job.Headers[sepp.HeaderTraceparent]; !ok {
		return ctx, nil
	}
	parent := sepp.Propagator().Extract(ctx, propagation.MapCarrier(job.Headers))
	producer := trace.SpanContextFromContext(parent)
	if !producer.IsValid() {
		return ctx, nil
	}
	attrs := append(make([]attribute.KeyValue, 0, 8), sepp.MessagingSystem(),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.destination.name", job.Queue),
		attribute.String("messaging.message.id", job.ID),
		attribute.String("sepp.job.type", job.JobType),
		attribute.Int("sepp.job.attempt", int(job.Attempt)))
	return otel.Tracer(sepp.TracerName).Start(parent, "sepp.process "+job.Queue,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...),
		trace.WithLinks(trace.Link{SpanContext: producer}))
}

// endProcessSpan records the handler's outcome on span (nil: not traced)
// and ends it.
func endProcessSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		var p *permanentError
		span.SetAttributes(attribute.Bool("sepp.job.permanent_failure", errors.As(err, &p)))
	}
	spans.End(span, err)
}
