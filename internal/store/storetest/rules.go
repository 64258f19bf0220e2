package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// ruled is a job of queue with key (none if empty) under the rule "amount"
// whose key is ruleKey, with a window of a minute.
func ruled(queue, key, ruleKey string) store.EnqueueJob {
	j := job(queue, key)
	j.Rules = []store.RuleKey{{Name: "amount", Key: ruleKey, Window: time.Minute}}
	return j
}

func wantViolation(t *testing.T, err error, rule string, holder store.JobID, frees time.Time) {
	t.Helper()
	var re *store.RuleViolationError
	if !errors.Is(err, store.ErrDedupRuleViolated) || !errors.As(err, &re) || re.Rule != rule || re.JobID != holder || !re.FreesAt.Equal(frees) {
		t.Fatalf("got %v (%+v), want rule %q held by %v until %v", err, re, rule, holder, frees)
	}
}

// testRuleRefusesWithinWindow: a job whose rule key a job of the queue set
// within the rule's window is refused, naming the rule, the job and when it
// frees; the refused job writes nothing, not even its own key; a retry of
// the first job's key is still a hit; after the window the rule key is free.
func testRuleRefusesWithinWindow(t *testing.T, s store.Store) {
	first := enqueueOne(t, s, t0, ruled("payments", "pay-1", `["acc-1",100]`))
	res := enqueue(t, s, t0.Add(time.Second), ruled("payments", "pay-2", `["acc-1",100]`))
	wantViolation(t, res[0].Err, "amount", first.JobID, t0.Add(time.Minute))
	if _, err := lookup(t, s, t0.Add(time.Second), "payments", "pay-2"); !errors.Is(err, store.ErrDedupNotFound) {
		t.Fatalf("the refused job wrote its key: %v", err)
	}
	if r := enqueueOne(t, s, t0.Add(2*time.Second), ruled("payments", "pay-1", `["acc-1",100]`)); !r.Deduplicated || r.JobID != first.JobID {
		t.Fatalf("a retry of the first key: %+v, want a hit", r)
	}
	if r := enqueueOne(t, s, t0.Add(3*time.Second), ruled("payments", "pay-3", `["acc-1",200]`)); r.Deduplicated || r.Err != nil {
		t.Fatalf("another rule key: %+v", r)
	}
	// Another queue has its own rule records.
	if r := enqueueOne(t, s, t0.Add(4*time.Second), ruled("refunds", "pay-2", `["acc-1",100]`)); r.Err != nil || r.Deduplicated {
		t.Fatalf("the same rule key on another queue: %+v", r)
	}
	later := enqueueOne(t, s, t0.Add(time.Minute), ruled("payments", "pay-2", `["acc-1",100]`))
	if later.Deduplicated {
		t.Fatalf("after the rule's window: %+v, want a new job", later)
	}
	// Rule records are not a queue's dedup records.
	qs, err := s.ListQueues(context.Background(), &store.ListQueuesParams{Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name != "payments" && q.Name != "refunds" {
			t.Fatalf("ListQueues shows %q", q.Name)
		}
	}
}

// testRuleInBatches: in a batch each job is judged in order, against the
// earlier ones too; a non-atomic batch refuses the offender alone, an atomic
// batch fails whole at its index and writes nothing. An unkeyed job is held
// to the rules as well.
func testRuleInBatches(t *testing.T, s store.Store) {
	res := enqueue(t, s, t0, ruled("payments", "a", `["x"]`), ruled("payments", "b", `["x"]`), ruled("payments", "", `["y"]`), ruled("payments", "", `["y"]`))
	if res[0].Err != nil || res[2].Err != nil {
		t.Fatalf("first of each rule key: %+v", res)
	}
	wantViolation(t, res[1].Err, "amount", res[0].JobID, t0.Add(time.Minute))
	wantViolation(t, res[3].Err, "amount", res[2].JobID, t0.Add(time.Minute))
	if _, err := lookup(t, s, t0, "payments", "b"); !errors.Is(err, store.ErrDedupNotFound) {
		t.Fatalf("the refused batch item wrote its key: %v", err)
	}
	_, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Atomic: true, Now: t0.Add(time.Second),
		Jobs: []store.EnqueueJob{ruled("payments", "c", `["z"]`), ruled("payments", "d", `["x"]`)}})
	var je *store.JobError
	if !errors.As(err, &je) || je.Index != 1 {
		t.Fatalf("atomic batch: %v, want a JobError at index 1", err)
	}
	wantViolation(t, je.Err, "amount", res[0].JobID, t0.Add(time.Minute))
	// Held by an item of the failed atomic batch: named as such.
	_, err = s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Atomic: true, Now: t0.Add(time.Second),
		Jobs: []store.EnqueueJob{ruled("payments", "f", `["q"]`), ruled("payments", "g", `["q"]`)}})
	var re *store.RuleViolationError
	if !errors.As(err, &je) || je.Index != 1 || !errors.As(je.Err, &re) || !re.InBatch || re.Index != 0 {
		t.Fatalf("atomic batch whose items share a rule key: %v, want item 1 refused naming item 0", err)
	}
	// Nothing of the atomic batch stayed: key c and rule key ["z"] are free.
	if r := enqueueOne(t, s, t0.Add(2*time.Second), ruled("payments", "c", `["z"]`)); r.Deduplicated || r.Err != nil {
		t.Fatalf("after the failed atomic batch: %+v", r)
	}
}

// testRuleConcurrent: concurrent enqueues with different keys and one rule
// key make exactly one job.
func testRuleConcurrent(t *testing.T, s store.Store) {
	const n = 64
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for i := range n {
		wg.Go(func() {
			res, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Now: t0,
				Jobs: []store.EnqueueJob{ruled("payments", fmt.Sprintf("pay-%d", i), `["acc-1",100]`)}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("enqueue %d: %v", i, err)
			case res[0].Err == nil && !res[0].Deduplicated:
				created++
			case errors.Is(res[0].Err, store.ErrDedupRuleViolated):
				refused++
			default:
				t.Errorf("enqueue %d: %+v", i, res[0])
			}
		})
	}
	wg.Wait()
	if created != 1 || refused != n-1 {
		t.Fatalf("%d created, %d refused; want 1 and %d", created, refused, n-1)
	}
}

// testRuleRefusalFreesLaterItems: a batch item refused by a rule counts as
// never enqueued for the items after it: a later item with its key is
// created (not a hit on a job that does not exist), and a later item with a
// rule key it would have held is created too.
func testRuleRefusalFreesLaterItems(t *testing.T, s store.Store) {
	held := enqueueOne(t, s, t0, ruled("payments", "e", `["x"]`))
	a := ruled("payments", "k", `["x"]`) // refused: ["x"] is held
	a.Rules = append(a.Rules, store.RuleKey{Name: "account", Key: `["acc-9"]`, Window: time.Minute})
	sameKey := ruled("payments", "k", `["w"]`)
	sameRule := job("payments", "m")
	sameRule.Rules = []store.RuleKey{{Name: "account", Key: `["acc-9"]`, Window: time.Minute}}
	res := enqueue(t, s, t0.Add(time.Second), a, sameKey, sameRule)
	wantViolation(t, res[0].Err, "amount", held.JobID, t0.Add(time.Minute))
	for i, r := range res[1:] {
		if r.Err != nil || r.Deduplicated {
			t.Fatalf("item %d after the refused one: %+v, want a new job", i+1, r)
		}
		if _, err := s.GetJob(context.Background(), &store.GetJobParams{ID: r.JobID}); err != nil {
			t.Fatalf("item %d's job: %v", i+1, err)
		}
	}
	if l, err := lookup(t, s, t0.Add(time.Second), "payments", "k"); err != nil || l.Record.JobID != res[1].JobID {
		t.Fatalf("key k: %+v %v, want the second item's job %v", l, err, res[1].JobID)
	}
	// The refused item held nothing: a new job with its rule key is refused
	// naming the third item.
	again := job("payments", "n")
	again.Rules = sameRule.Rules
	r := enqueue(t, s, t0.Add(2*time.Second), again)[0]
	wantViolation(t, r.Err, "account", res[2].JobID, t0.Add(time.Second+time.Minute))
}
