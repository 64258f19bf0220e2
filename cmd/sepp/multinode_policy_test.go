package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sepp-dev/sepp"
)

// policyCluster declares a webhook route and a rule on the payments queue.
const policyCluster = `
[[queues]]
name = "payments"
require_key = true

[[queues.rules]]
name = "same-account-same-amount"
key_fields = ["/account", "/amount"]
window_ms = 60000

[[webhooks]]
path = "/hooks/payments"
queue = "payments"
job_type = "payment"
`

// TestThreeNodesWebhookAndRule: 64 concurrent posts of one payment id,
// spread over three nodes on one database, give one job (one 202, the
// rest 200 with its id); 64 concurrent enqueues over the three nodes with
// different keys and the same rule fields give exactly one job, and 63
// DEDUP_RULE_VIOLATED naming it.
func TestThreeNodesWebhookAndRule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three server processes; skipped with -short")
	}
	clients, nodes := clusterWith(t, 3, policyCluster)
	const n = 64
	type answer struct {
		status int
		id     string
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	body := `{"payment":"pay-1","account":"acc-1","amount":100}`
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", "http://"+nodes[i%3].addr+"/hooks/payments", strings.NewReader(body))
			req.Header.Set("Idempotency-Key", "pay-1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("post %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var b struct {
				JobID string `json:"jobId"`
			}
			json.Unmarshal(raw, &b)
			answers[i] = answer{resp.StatusCode, b.JobID}
		})
	}
	wg.Wait()
	created := 0
	for i, a := range answers {
		switch {
		case a.status == http.StatusAccepted:
			created++
		case a.status != http.StatusOK:
			t.Fatalf("post %d: status %d", i, a.status)
		}
		if a.id == "" || a.id != answers[0].id {
			t.Fatalf("post %d: job %q, post 0: %q; want one job", i, a.id, answers[0].id)
		}
	}
	if created != 1 {
		t.Fatalf("%d posts created a job, want 1", created)
	}

	var mu sync.Mutex
	made, refused := []string{}, 0
	var holders []string
	for i := range n {
		wg.Go(func() {
			ack, err := clients[i%3].Enqueue(context.Background(), sepp.EnqueueRequest{Queue: "payments", JobType: "payment",
				Payload: []byte(`{"account":"acc-2","amount":5}`), IdempotencyKey: sepp.Key(fmt.Sprint("pay-x-", i))})
			mu.Lock()
			defer mu.Unlock()
			var se *sepp.Error
			switch {
			case err == nil && !ack.Deduplicated:
				made = append(made, ack.JobID)
			case errors.Is(err, sepp.ErrDedupRuleViolated) && errors.As(err, &se):
				refused++
				holders = append(holders, se.Metadata["job_id"])
			default:
				t.Errorf("enqueue %d: %+v %v", i, ack, err)
			}
		})
	}
	wg.Wait()
	if len(made) != 1 || refused != n-1 {
		t.Fatalf("%d jobs made, %d refused; want 1 and %d", len(made), refused, n-1)
	}
	for _, h := range holders {
		if h != made[0] {
			t.Fatalf("a refusal names %s, want the one job %s", h, made[0])
		}
	}
}
