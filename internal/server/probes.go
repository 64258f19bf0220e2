package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/grpchealth"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// This file is the one home of the store-health rule that the gRPC and
// Connect health checks, /healthz and /readyz share: the node is ready while
// the last probe of the store (store.Ping) succeeded and it is not shutting
// down. healthLoop probes every healthCheckEvery; /readyz reuses that result
// while it is younger than readyFresh, and otherwise probes afresh with a
// readyTimeout deadline, so a store lost between two loop ticks fails /readyz
// at once rather than up to healthCheckEvery later.

const (
	// readyFresh is how old the last probe may be for /readyz to reuse it.
	readyFresh = 2 * time.Second
	// readyTimeout bounds the fresh probe /readyz makes: a store that does
	// not answer a cheap read within it counts as unreadable.
	readyTimeout = 2 * time.Second
)

// storeHealth is the result of the last probe of the store.
type storeHealth struct {
	mu         sync.Mutex
	started    time.Time // when the last recorded probe began, on Server.local; zero: none yet
	err        error     // its result
	notServing bool      // what the gRPC and Connect checks say now

	probing sync.Mutex // one fresh probe for /readyz at a time
}

// probeStore pings the store with a timeout, records the result, and turns the
// gRPC and Connect health checks to NOT_SERVING or back to SERVING when the
// result changed. healthLoop and /readyz both call it.
func (s *Server) probeStore(timeout time.Duration) error {
	start := s.local.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	// Ping is one cheap read that proves the stored data can be read.
	err := s.store.Ping(ctx)
	cancel()
	h := &s.storeState
	h.mu.Lock()
	defer h.mu.Unlock()
	if start.Before(h.started) { // a later probe already answered
		return err
	}
	h.started, h.err = start, err
	ok := err == nil
	if ok {
		s.metrics.storeUp.Set(1)
	} else {
		s.metrics.storeUp.Set(0)
	}
	if ok == !h.notServing {
		return err
	}
	h.notServing = !ok
	if s.stopping() {
		return err // Shutdown has said NOT_SERVING for good
	}
	st, cst := healthpb.HealthCheckResponse_SERVING, grpchealth.StatusServing
	if !ok {
		st, cst = healthpb.HealthCheckResponse_NOT_SERVING, grpchealth.StatusNotServing
		s.log.Warn("store unreachable: health check says NOT_SERVING", "err", err)
	} else {
		s.log.Info("store reachable again: health check says SERVING")
	}
	for _, name := range append([]string{""}, serviceNames...) {
		s.health.SetServingStatus(name, st)
		s.connectHealth.SetStatus(name, cst)
	}
	return err
}

// connectNotServing turns the Connect health check to NOT_SERVING for good,
// as health.Server.Shutdown does for gRPC's: Shutdown calls it once it has
// begun, under the lock probeStore holds, so no probe turns it back.
func (s *Server) connectNotServing() {
	s.storeState.mu.Lock()
	defer s.storeState.mu.Unlock()
	for _, name := range append([]string{""}, serviceNames...) {
		s.connectHealth.SetStatus(name, grpchealth.StatusNotServing)
	}
}

// stopping reports whether Shutdown has begun.
func (s *Server) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// readiness applies the rule: "" when the node is ready, else the one-line
// reason it is not.
func (s *Server) readiness() string {
	if s.stopping() {
		return "shutting down"
	}
	h := &s.storeState
	h.mu.Lock()
	started, err := h.started, h.err
	h.mu.Unlock()
	if s.local.Now().Sub(started) > readyFresh {
		h.probing.Lock()
		h.mu.Lock()
		started, err = h.started, h.err
		h.mu.Unlock()
		if s.local.Now().Sub(started) > readyFresh { // no other /readyz probed meanwhile
			err = s.probeStore(readyTimeout)
		}
		h.probing.Unlock()
	}
	if s.stopping() {
		return "shutting down"
	}
	if err != nil {
		return "store unreadable: " + strings.Join(strings.Fields(errText(err)), " ")
	}
	return ""
}

// healthz answers GET and HEAD /healthz: 200 "ok" while the process serves.
// It needs no token.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if !probeMethod(w, r) {
		return
	}
	writeProbe(w, http.StatusOK, "ok")
}

// readyz answers GET and HEAD /readyz: 200 "ok" while the store can be read
// and the node is not shutting down, else 503 and the reason. It needs no
// token.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !probeMethod(w, r) {
		return
	}
	if reason := s.readiness(); reason != "" {
		writeProbe(w, http.StatusServiceUnavailable, reason)
		return
	}
	writeProbe(w, http.StatusOK, "ok")
}

func probeMethod(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeProbe(w, http.StatusMethodNotAllowed, r.URL.Path+" answers GET and HEAD only")
	return false
}

func writeProbe(w http.ResponseWriter, code int, line string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(line + "\n"))
}
