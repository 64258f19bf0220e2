package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

const flowMetricConfig = `
[[queues]]
name = "sync"
when_running = "run_again"

[[queues]]
name = "mails"
[[queues.rules]]
name = "account"
key_fields = ["/account"]
window_ms = 60000
action = "delay"

[[queues]]
name = "accounts"
[queues.concurrency]
key_fields = ["/account"]

[[queues]]
name = "api"
[queues.rate]
period_ms = 60000
`

// TestFlowMetrics: /metrics counts a created follow-up and a delayed job
// as dedup outcomes, and reports the jobs held back by a follow-up's
// original, by their concurrency key and by their rate window.
func TestFlowMetrics(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: flowMetricConfig})
	c := connectClient(t, srv)
	ctx := context.Background()
	enqueue := func(queue, key, payload string) {
		t.Helper()
		req := sepp.EnqueueRequest{Queue: queue, JobType: "t", Payload: []byte(payload)}
		if key != "" {
			req.IdempotencyKey = sepp.Key(key)
		}
		if _, err := c.Enqueue(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	reserve := func(queue string, want int) {
		t.Helper()
		if rs, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{queue}, MaxJobs: 10}); err != nil || len(rs) != want {
			t.Fatalf("reserve %s: %d jobs, %v; want %d", queue, len(rs), err, want)
		}
	}
	enqueue("sync", "k", `{}`)
	reserve("sync", 1)
	enqueue("sync", "k", `{}`)
	enqueue("mails", "", `{"account":"a"}`)
	enqueue("mails", "", `{"account":"a"}`)
	for range 3 {
		enqueue("accounts", "", `{"account":"a"}`)
		enqueue("api", "", `{}`)
	}
	reserve("accounts", 1)
	reserve("api", 1)

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`sepp_dedup_outcomes_total{outcome="follow_up",queue="sync"} 1`,
		`sepp_dedup_outcomes_total{outcome="delayed",queue="mails"} 1`,
		`sepp_jobs_held{by="follow_up",queue="sync"} 1`,
		`sepp_jobs_held{by="concurrency",queue="accounts"} 2`,
		`sepp_jobs_held{by="rate",queue="api"} 2`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
