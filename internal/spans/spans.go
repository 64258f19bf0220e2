// Package spans holds what every span of Sepp's shares, whoever starts it
// (the Go client, the worker runtime, package effect, the server): the
// messaging.system attribute, the queue a batch of enqueues names, and how
// a span ends with an error.
package spans

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
)

// MessagingSystem is the attribute every Sepp span carries, after the
// OpenTelemetry messaging conventions: messaging.system = "sepp".
func MessagingSystem() attribute.KeyValue { return attribute.String("messaging.system", "sepp") }

// OneQueue is the queue every request of reqs is on, or "" when there are
// none or they name several.
func OneQueue(reqs []*seppv1.EnqueueRequest) string {
	if len(reqs) == 0 {
		return ""
	}
	q := reqs[0].GetQueue()
	for _, r := range reqs[1:] {
		if r.GetQueue() != q {
			return ""
		}
	}
	return q
}

// End records err, if any, on span (the error event and the status Error)
// and ends the span.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
