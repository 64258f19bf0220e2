package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/testserver"
)

// TestSweepTimestampMetric: a sweep that succeeds moves
// sepp_sweep_last_success_timestamp_seconds to its time, which the
// SeppSweeperStalled alert compares with the time now.
func TestSweepTimestampMetric(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	before := time.Now()
	if v := sample(scrape(t, srv), "sepp_sweep_last_success_timestamp_seconds"); v <= 0 || v > float64(before.Unix()+1) {
		t.Fatalf("before any sweep: %v, want the server's start", v)
	}
	if _, err := srv.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := sample(scrape(t, srv), "sepp_sweep_last_success_timestamp_seconds"); v < float64(before.UnixNano())/1e9 {
		t.Fatalf("after a sweep: %v, want at least %v", v, float64(before.UnixNano())/1e9)
	}
}
