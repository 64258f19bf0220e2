package server

import (
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/sepp-dev/sepp/internal/store"
)

// TestStaleEnqueueIsUnavailable: an enqueue refused because the sweep
// passed its time is UNAVAILABLE, retryable with the same key, and its
// message says why rather than blaming the database.
func TestStaleEnqueueIsUnavailable(t *testing.T) {
	e := toAPIError(fmt.Errorf("enqueue: %w", store.ErrStaleEnqueue))
	if e.code != connect.CodeUnavailable || e.reason != ReasonUnavailable {
		t.Fatalf("got %v %s, want unavailable %s", e.code, e.reason, ReasonUnavailable)
	}
	if !strings.Contains(e.msg, "sweeper") || !strings.Contains(e.msg, "same idempotency key") {
		t.Fatalf("message %q does not say what happened and what to do", e.msg)
	}
}
