package sepp

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// retryPolicy is clients/retry-policy.json, which every client's tests read.
type retryPolicy struct {
	Retries int      `json:"retries"`
	BaseMs  float64  `json:"base_ms"`
	CapMs   float64  `json:"cap_ms"`
	RetryOn []string `json:"retry_on"`
	Cases   []struct {
		Retry   int     `json:"retry"`
		Random  float64 `json:"random"`
		DelayMs float64 `json:"delay_ms"`
	} `json:"cases"`
}

func TestRetryPolicyIsTheSharedOne(t *testing.T) {
	b, err := os.ReadFile("clients/retry-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var p retryPolicy
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.Retries != defaultRetries || time.Duration(p.BaseMs*float64(time.Millisecond)) != retryBase || time.Duration(p.CapMs*float64(time.Millisecond)) != retryCap {
		t.Fatalf("policy file says %d retries, %v ms to %v ms; the client has %d, %v to %v", p.Retries, p.BaseMs, p.CapMs, defaultRetries, retryBase, retryCap)
	}
	if len(p.RetryOn) != 1 || p.RetryOn[0] != ErrUnavailable.Error() {
		t.Fatalf("policy file retries on %q; the client on %s only", p.RetryOn, ErrUnavailable)
	}
	for _, c := range p.Cases {
		want := time.Duration(c.DelayMs * float64(time.Millisecond))
		if got := retryDelay(c.Retry, c.Random); got != want {
			t.Errorf("retry %d, random %v: waits %v, want %v", c.Retry, c.Random, got, want)
		}
	}
	if len(p.Cases) == 0 {
		t.Fatal("no cases")
	}
}
