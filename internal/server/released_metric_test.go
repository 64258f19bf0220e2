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

const releasedMetricConfig = `
[[queues]]
name = "reports"
release_key_on = ["completed"]

[[queues]]
name = "kept"
release_key_on = ["dead"]
`

// TestReleasedOutcomeMetric: a job completed on a queue with
// release_key_on = ["completed"] frees its key, and /metrics counts it as
// sepp_dedup_outcomes_total{outcome="released"}; a completion on a queue
// whose release_key_on does not name completed counts nothing.
func TestReleasedOutcomeMetric(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: releasedMetricConfig})
	c := connectClient(t, srv)
	ctx := context.Background()
	for _, queue := range []string{"reports", "kept"} {
		ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: queue, JobType: "monthly", Payload: []byte(`{}`), IdempotencyKey: sepp.Key("report-2026-11")})
		if err != nil || ack.Deduplicated {
			t.Fatalf("enqueue on %s: %+v %v", queue, ack, err)
		}
		jobs, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{queue}, MaxJobs: 1})
		if err != nil || len(jobs) != 1 || jobs[0].Job.ID != ack.JobID {
			t.Fatalf("reserve on %s: %+v %v", queue, jobs, err)
		}
		if err := c.Complete(ctx, ack.JobID, jobs[0].LeaseToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := c.LookupIdempotencyKey(ctx, "reports", "report-2026-11"); err != nil || l.Found {
		t.Fatalf("lookup after the job completed: %+v %v, want not found", l, err)
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(raw)
	if want := `sepp_dedup_outcomes_total{outcome="released",queue="reports"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if bad := `sepp_dedup_outcomes_total{outcome="released",queue="kept"}`; strings.Contains(metrics, bad) {
		t.Errorf("/metrics counts a release on a queue whose release_key_on does not name completed: %s", bad)
	}
}
