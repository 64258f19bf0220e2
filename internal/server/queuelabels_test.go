package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// scrape returns the text of srv's /metrics.
func scrape(t *testing.T, srv *testserver.Server) string {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

var queueLabelValue = regexp.MustCompile(`queue="([^"]*)"`)

// queueLabelValues returns the distinct queue label values of a scrape.
func queueLabelValues(text string) map[string]bool {
	values := map[string]bool{}
	for _, m := range queueLabelValue.FindAllStringSubmatch(text, -1) {
		values[m[1]] = true
	}
	return values
}

// sample returns the value of the sample line that starts with series
// ("name{labels}"), or -1.
func sample(text, series string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

// TestMetricsQueueLabelsBounded: one job, with a key, on each of 20,000
// new queues (strict = false) adds series for the first
// limits.max_queue_labels of them (100 by default) and counts the others
// under queue="other", in the enqueue counters and in the sepp_jobs and
// sepp_dedup_records gauges a scrape reads from the store; declared queues
// keep their own series. /metrics stays under 2,000 lines (issue 22,
// point 5: it had 160,203).
func TestMetricsQueueLabelsBounded(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[[queues]]\nname = \"declared\"\n"})
	jobs := seppv1.NewJobServiceClient(dialGRPC(t, srv))
	ctx := context.Background()
	const queues, batch = 20000, 1000
	for i := 0; i < queues; i += batch {
		req := &seppv1.EnqueueBatchRequest{}
		for k := i; k < i+batch; k++ {
			req.Jobs = append(req.Jobs, &seppv1.EnqueueRequest{Queue: fmt.Sprintf("new-%05d", k), JobType: "t",
				IdempotencyKey: proto.String("k")})
		}
		res, err := jobs.EnqueueBatch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if e := res.GetResults()[0].GetError(); e != nil {
			t.Fatal(e)
		}
	}
	// A repeat on a folded queue is a hit counted under "other".
	if _, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: fmt.Sprintf("new-%05d", queues-1), JobType: "t", IdempotencyKey: proto.String("k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "declared", JobType: "t"}); err != nil {
		t.Fatal(err)
	}

	text := scrape(t, srv)
	lines := strings.Count(text, "\n")
	values := queueLabelValues(text)
	t.Logf("/metrics after one job on each of %d new queues: %d lines, %d bytes, %d queue label values", queues, lines, len(text), len(values))
	if len(values) != 100+2 || !values["declared"] || !values["other"] || !values["new-00000"] {
		t.Errorf("%d queue label values, want the 100 first new queues, declared and other: %v", len(values), values)
	}
	if lines >= 2000 {
		t.Errorf("/metrics has %d lines", lines)
	}
	const folded = queues - 100
	for series, want := range map[string]float64{
		`sepp_enqueues_total{outcome="created",queue="other"}`:       folded,
		`sepp_enqueues_total{outcome="deduplicated",queue="other"}`:  1,
		`sepp_dedup_hits_total{queue="other"}`:                       1,
		`sepp_dedup_outcomes_total{outcome="created",queue="other"}`: folded,
		`sepp_jobs{queue="other",state="available"}`:                 folded,
		`sepp_dedup_records{queue="other"}`:                          folded,
		`sepp_jobs{queue="new-00000",state="available"}`:             1,
		`sepp_enqueues_total{outcome="created",queue="declared"}`:    1,
	} {
		if got := sample(text, series); got != want {
			t.Errorf("%s is %v, want %v", series, got, want)
		}
	}
}

// TestMetricsQueueLabelsConfigured: limits.max_queue_labels sets the bound;
// the first queues found to exist keep their names.
func TestMetricsQueueLabelsConfigured(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[limits]\nmax_queue_labels = 3\n"})
	jobs := seppv1.NewJobServiceClient(dialGRPC(t, srv))
	ctx := context.Background()
	for i := range 10 {
		if _, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: fmt.Sprintf("q%d", i), JobType: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	text := scrape(t, srv)
	values := queueLabelValues(text)
	if len(values) != 4 || !values["q0"] || !values["q1"] || !values["q2"] || !values["other"] {
		t.Errorf("queue label values %v, want q0, q1, q2 and other", values)
	}
	if got := sample(text, `sepp_jobs{queue="other",state="available"}`); got != 7 {
		t.Errorf(`sepp_jobs{queue="other",state="available"} is %v, want 7`, got)
	}
}
