// Command goproducer is the TypeScript tests' Go producer: it enqueues one
// job with the Go client inside a span of a real OpenTelemetry SDK tracer
// provider, as a traced Go app does, and prints the trace id, the id of the
// client's producer span (sepp.enqueue <queue>) and the job id as JSON.
//
//	go run ./clients/typescript/test/testdata/goproducer http://127.0.0.1:50051 QUEUE
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sepp-dev/sepp"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: goproducer ADDR QUEUE")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "goproducer:", err)
		os.Exit(1)
	}
}

func run(addr, queue string) error {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	ctx := context.Background()
	c, err := sepp.Connect(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, span := tp.Tracer("goproducer").Start(ctx, "checkout")
	ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: queue, JobType: "receipt"})
	span.End()
	if err != nil {
		return err
	}
	out := map[string]string{"traceId": span.SpanContext().TraceID().String(), "jobId": ack.JobID}
	for _, s := range spans.Ended() {
		if s.Name() == "sepp.enqueue "+queue {
			out["producerSpanId"] = s.SpanContext().SpanID().String()
		}
	}
	if out["producerSpanId"] == "" {
		return fmt.Errorf("the client made no sepp.enqueue %s span", queue)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
