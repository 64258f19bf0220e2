package effect

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/spans"
)

// startEffectSpan starts the span of one Do call, a child of the handler's.
// Its name holds the scope, not the key: a key names one effect of many
// ("order-9.invoice"), too many for span names, so it is an attribute.
func startEffectSpan(ctx context.Context, scope, key string) (context.Context, trace.Span) {
	attrs := append(make([]attribute.KeyValue, 0, 8), sepp.MessagingSystem(),
		attribute.String("sepp.effect.scope", scope), attribute.String("sepp.effect.key", key))
	return otel.Tracer(sepp.TracerName).Start(ctx, "sepp.effect "+scope, trace.WithAttributes(attrs...))
}

// endEffectSpan records what Do did: sepp.effect.outcome is "ran" (fn ran
// under the claim and its result was recorded), "replayed" (an earlier
// run's result came back; fn did not run), "unprotected" (FailOpen ran fn
// without a claim), "failed" (fn ran and returned an error, or its result
// could not be recorded), "in_progress" (another holder runs it, Raise) or
// "not_run" (no claim: an invalid key, the server unreachable).
func endEffectSpan(span trace.Span, res *Result, ran bool, err error) {
	outcome := "not_run"
	switch {
	case err == nil && res.Replayed:
		outcome = "replayed"
	case err == nil && res.Unprotected:
		outcome = "unprotected"
	case err == nil:
		outcome = "ran"
	case ran:
		outcome = "failed"
	case errors.Is(err, ErrInProgress):
		outcome = "in_progress"
	}
	span.SetAttributes(attribute.String("sepp.effect.outcome", outcome))
	spans.End(span, err)
}
