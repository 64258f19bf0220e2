package sepp_test

import (
	"context"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

const releaseConfig = `
[[queues]]
name = "reports"
release_key_on = ["dead"]
`

// TestReleaseKeyOnDead: on a queue with release_key_on = ["dead"], a job
// that fails permanently frees its key at once: the next enqueue of the key
// creates a new job (deduplicated false) instead of returning the dead one.
// A job that completes keeps its key for the window.
func TestReleaseKeyOnDead(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: releaseConfig})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	req := func(k string) sepp.EnqueueRequest {
		return sepp.EnqueueRequest{Queue: "reports", JobType: "monthly", Payload: []byte(`{"month":"2026-11"}`), IdempotencyKey: sepp.Key(k)}
	}
	first, err := c.Enqueue(ctx, req("report-2026-11"))
	if err != nil || first.Deduplicated {
		t.Fatalf("first enqueue: %+v %v", first, err)
	}
	r, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"reports"}, Wait: 5 * time.Second})
	if err != nil || len(r) != 1 || r[0].Job.ID != first.JobID {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	res, err := c.Fail(ctx, first.JobID, r[0].LeaseToken, "the source data is missing", sepp.FailOptions{Permanent: true})
	if err != nil || res.State != sepp.JobStateDead {
		t.Fatalf("fail: %+v %v", res, err)
	}
	if l, err := c.LookupIdempotencyKey(ctx, "reports", "report-2026-11"); err != nil || l.Found {
		t.Fatalf("lookup after the job died: %+v %v, want not found", l, err)
	}
	second, err := c.Enqueue(ctx, req("report-2026-11"))
	if err != nil || second.Deduplicated || second.JobID == first.JobID {
		t.Fatalf("enqueue after the job died: %+v %v, want a new job", second, err)
	}

	// Completion is not in the set: the key stays recorded.
	r, err = c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"reports"}, Wait: 5 * time.Second})
	if err != nil || len(r) != 1 || r[0].Job.ID != second.JobID {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	if err := c.Complete(ctx, second.JobID, r[0].LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	third, err := c.Enqueue(ctx, req("report-2026-11"))
	if err != nil || !third.Deduplicated || third.JobID != second.JobID {
		t.Fatalf("enqueue after the job completed: %+v %v, want the completed job", third, err)
	}
}
