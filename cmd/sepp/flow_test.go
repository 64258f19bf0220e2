package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	seppclient "github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// flowConfig declares a queue that runs a key's job again after the
// running one (when_running = "run_again") and one whose rule delays the
// third job of a user within a minute.
const flowConfig = `
[[queues]]
name = "reports"
when_running = "run_again"

[[queues]]
name = "notifications"
[[queues.rules]]
name = "per-user"
key_fields = ["/user"]
window_ms = 60000
limit = 2
action = "delay"
`

// TestCLIFollowUp: an enqueue while the key's job runs prints the
// follow-up's follows_job_id; job get shows it held by follow_up, jobs list
// marks it, queues adds the held column; --json carries the same fields.
func TestCLIFollowUp(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: flowConfig})
	addr := "--addr=" + srv.URL
	ctx := context.Background()
	c, err := seppclient.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	enqueue := []string{"enqueue", addr, "--queue", "reports", "--type", "rebuild", "--key", "sales-dashboard"}

	// Before any job runs, the held column is not there.
	out, _, err := cli(t, "queues", addr)
	if err != nil || strings.Contains(out, "HELD") {
		t.Fatalf("queues with nothing held: %v\n%s", err, out)
	}
	out, _, err = cli(t, enqueue...)
	if err != nil || strings.Contains(out, "follows_job_id") {
		t.Fatalf("first enqueue: %v\n%s", err, out)
	}
	rs, err := c.Reserve(ctx, seppclient.ReserveRequest{Queues: []string{"reports"}})
	if err != nil || len(rs) != 1 {
		t.Fatalf("reserve: %v %+v", err, rs)
	}
	orig := rs[0].Job.ID

	out, _, err = cli(t, append(enqueue, "--json")...)
	var ack struct {
		JobID        string  `json:"jobId"`
		Deduplicated bool    `json:"deduplicated"`
		FollowsJobID string  `json:"followsJobId"`
		DelayedUntil *string `json:"delayedUntil"`
	}
	if err != nil || json.Unmarshal([]byte(out), &ack) != nil || ack.Deduplicated || ack.FollowsJobID != orig ||
		ack.JobID == orig || ack.DelayedUntil != nil {
		t.Fatalf("enqueue --json while the job runs: %v\n%s\nwant a follow-up of %s", err, out, orig)
	}
	follow := ack.JobID
	// The next enqueue is a hit on the follow-up, which the table prints
	// without follows_job_id.
	out, _, err = cli(t, enqueue...)
	if err != nil || !regexpLine(out, "job_id", follow) || !regexpLine(out, "deduplicated", "true") || strings.Contains(out, "follows_job_id") {
		t.Fatalf("enqueue while the follow-up waits: %v\n%s", err, out)
	}

	out, _, err = cli(t, "job", "get", follow, addr)
	if err != nil || !regexpLine(out, "state", "scheduled") || !regexpLine(out, "held_by", "follow_up") || !regexpLine(out, "follows_job_id", orig) {
		t.Fatalf("job get of the waiting follow-up: %v\n%s", err, out)
	}
	out, _, err = cli(t, "job", "get", follow, addr, "--json")
	var got struct {
		Job struct {
			State        string `json:"state"`
			HeldBy       string `json:"heldBy"`
			FollowsJobID string `json:"followsJobId"`
		} `json:"job"`
	}
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.Job.State != "JOB_STATE_SCHEDULED" ||
		got.Job.HeldBy != "JOB_HOLD_FOLLOW_UP" || got.Job.FollowsJobID != orig {
		t.Fatalf("job get --json of the waiting follow-up: %v\n%s", err, out)
	}
	out, _, err = cli(t, "jobs", "list", addr, "--queue", "reports")
	if err != nil || !strings.Contains(out, "scheduled (held: follow_up)") {
		t.Fatalf("jobs list: %v\n%s", err, out)
	}
	out, _, err = cli(t, "queues", addr)
	if err != nil || !strings.Contains(out, "HELD FOLLOW-UP") || strings.Contains(out, "HELD RATE") || strings.Contains(out, "HELD CONCURRENCY") {
		t.Fatalf("queues with a held follow-up: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "reports" && f[len(f)-1] != "1" {
			t.Fatalf("queues: the reports row should end in 1 held follow-up:\n%s", out)
		}
	}
	out, _, err = cli(t, "queues", addr, "--json")
	if err != nil || !strings.Contains(out, `"heldFollowUp": "1"`) {
		t.Fatalf("queues --json: %v\n%s", err, out)
	}

	// Once the running job completes, the follow-up is no longer held.
	if err := c.Complete(ctx, orig, rs[0].LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	out, _, err = cli(t, "job", "get", follow, addr)
	if err != nil || !regexpLine(out, "state", "available") || strings.Contains(out, "held_by") || strings.Contains(out, "follows_job_id") {
		t.Fatalf("job get after the original completed: %v\n%s", err, out)
	}
}

// TestCLIDelayed: an enqueue a delay rule scheduled for later prints
// delayed_until, and enqueue-batch counts such jobs.
func TestCLIDelayed(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: flowConfig})
	addr := "--addr=" + srv.URL
	enqueue := []string{"enqueue", addr, "--queue", "notifications", "--type", "push", "--payload", `{"user":"u-42"}`}
	for i := range 2 {
		if out, _, err := cli(t, enqueue...); err != nil || strings.Contains(out, "delayed_until") {
			t.Fatalf("push %d: %v\n%s", i, err, out)
		}
	}
	want := srv.Clock.Now().Add(time.Minute)
	out, _, err := cli(t, enqueue...)
	if err != nil || !regexpLine(out, "delayed_until", want.Local().Format(time.RFC3339Nano)) {
		t.Fatalf("third push: %v\n%s\nwant delayed_until %v", err, out, want)
	}
	out, _, err = cli(t, append(enqueue, "--json")...)
	var ack struct {
		DelayedUntil string `json:"delayedUntil"`
	}
	if err != nil || json.Unmarshal([]byte(out), &ack) != nil || ack.DelayedUntil != want.UTC().Format(time.RFC3339Nano) {
		t.Fatalf("fourth push --json: %v\n%s\nwant delayedUntil %v", err, out, want)
	}

	// Two more lines for the user: both delayed; a line for another user
	// is not.
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	lines := `{"jobType":"push","payload":{"user":"u-42"}}
{"jobType":"push","payload":{"user":"u-42"}}
{"jobType":"push","payload":{"user":"u-7"}}
`
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = cli(t, "enqueue-batch", addr, "--file", file, "--queue", "notifications")
	if err != nil || !regexpLine(out, "created", "3") || !regexpLine(out, "delayed", "2") || strings.Contains(out, "follow-ups") {
		t.Fatalf("enqueue-batch: %v\n%s", err, out)
	}
	out, _, err = cli(t, "enqueue-batch", addr, "--file", file, "--queue", "notifications", "--json")
	var sum batchSummary
	if err != nil || json.Unmarshal([]byte(out), &sum) != nil || sum.Created != 3 || sum.Delayed != 2 || sum.FollowUps != 0 {
		t.Fatalf("enqueue-batch --json: %v\n%s", err, out)
	}
}
