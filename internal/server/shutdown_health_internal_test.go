package server

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/grpchealth"
)

// TestShutdownConnectHealth: once Shutdown begins, the Connect health check
// says NOT_SERVING, as the gRPC one does, and a store probe afterwards does
// not turn it back.
func TestShutdownConnectHealth(t *testing.T) {
	s, st, err := newWebhookServer(t, "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check := func() grpchealth.Status {
		res, err := s.connectHealth.Check(context.Background(), &grpchealth.CheckRequest{Service: "sepp.v1.JobService"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Status
	}
	if got := check(); got != grpchealth.StatusServing {
		t.Fatalf("before Shutdown: %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := check(); got != grpchealth.StatusNotServing {
		t.Fatalf("after Shutdown: %v, want NOT_SERVING", got)
	}
	s.storeState.mu.Lock()
	s.storeState.notServing = true // as if the store had been lost meanwhile
	s.storeState.mu.Unlock()
	s.probeStore(time.Second) // the store reads fine again
	if got := check(); got != grpchealth.StatusNotServing {
		t.Fatalf("a probe after Shutdown turned the Connect health check to %v", got)
	}
}
