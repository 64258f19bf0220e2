// Package storetest is the conformance suite every store.Store backend runs.
// It states the behaviour the server asks of storage: atomic dedup with
// exact windows (docs/idempotency.md), batches, lookups, release, cancel and
// the sweeper, exactly-one-job-per-key under concurrency, delivery under
// leases (docs/lifecycle.md), the admin calls, and effect keys
// (docs/effects.md).
//
// A backend's test calls Run with a function that opens a fresh, empty store.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/store"
)

// Opener returns a fresh, empty store. The suite closes it, and may close
// it twice: a second Close must return nil.
type Opener func(t *testing.T) store.Store

// t0 is the suite's clock origin; every test passes explicit times.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

// Run runs the whole suite against the backend that open creates.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"EnqueueCreatesThenDeduplicates", testEnqueueCreatesThenDeduplicates},
		{"KeysScopedPerQueue", testKeysScopedPerQueue},
		{"KeysComparedByteForByte", testKeysComparedByteForByte},
		{"UnkeyedJobsNeverDeduplicate", testUnkeyedJobsNeverDeduplicate},
		{"WindowExpiryWithoutSweep", testWindowExpiryWithoutSweep},
		{"PerJobWindow", testPerJobWindow},
		{"PayloadMismatchReturnOriginal", testPayloadMismatchReturnOriginal},
		{"PayloadMismatchReject", testPayloadMismatchReject},
		{"NonAtomicBatchPerItemResults", testNonAtomicBatchPerItemResults},
		{"AtomicBatchFailsWhole", testAtomicBatchFailsWhole},
		{"AtomicBatchWithHits", testAtomicBatchWithHits},
		{"HitsCounted", testHitsCounted},
		{"HitsOnAJobOfTheBatch", testHitsOnAJobOfTheBatch},
		{"RejectDuplicate", testRejectDuplicate},
		{"RejectDuplicateInBatches", testRejectDuplicateInBatches},
		{"ReplaceWaitingJob", testReplaceWaitingJob},
		{"ReplaceInBatch", testReplaceInBatch},
		{"ReplaceTwiceInBatch", testReplaceTwiceInBatch},
		{"ReplaceInAtomicBatch", testReplaceInAtomicBatch},
		{"Debounce", testDebounce},
		{"RuleRefusesWithinWindow", testRuleRefusesWithinWindow},
		{"RuleInBatches", testRuleInBatches},
		{"RuleConcurrent", testRuleConcurrent},
		{"RuleRefusalFreesLaterItems", testRuleRefusalFreesLaterItems},
		{"RuleLimit", testRuleLimit},
		{"RuleDelay", testRuleDelay},
		{"RuleLimitConcurrent", testRuleLimitConcurrent},
		{"RunAgainFollowUp", testRunAgainFollowUp},
		{"RunAgainEnds", testRunAgainEnds},
		{"RunAgainReplacesFollowUp", testRunAgainReplacesFollowUp},
		{"RunAgainConcurrent", testRunAgainConcurrent},
		{"ConcurrencyLimit", testConcurrencyLimit},
		{"ConcurrencyOrdered", testConcurrencyOrdered},
		{"ConcurrencyHotKey", testConcurrencyHotKey},
		{"ConcurrencyConcurrentReserve", testConcurrencyConcurrentReserve},
		{"RateLimit", testRateLimit},
		{"RateCancelWaiting", testRateCancelWaiting},
		{"RateConcurrentReserve", testRateConcurrentReserve},
		{"JobFieldsRoundTrip", testJobFieldsRoundTrip},
		{"ScheduledRunAt", testScheduledRunAt},
		{"CancelJob", testCancelJob},
		{"LookupAfterJobDeleted", testLookupAfterJobDeleted},
		{"ReleaseFreesKey", testReleaseFreesKey},
		{"SweepBoundedBatches", testSweepBoundedBatches},
		{"SweepHorizon", testSweepHorizon},
		{"ConcurrentSameKey", testConcurrentSameKey},
		{"ConcurrentAtomicFailuresLeaveNoTrace", testConcurrentAtomicFailuresLeaveNoTrace},
		{"ReserveOrder", testReserveOrder},
		{"ReserveSkipsFutureAndReserved", testReserveSkipsFutureAndReserved},
		{"LeaseFencing", testLeaseFencing},
		{"LeaseExpiryRedelivers", testLeaseExpiryRedelivers},
		{"LeaseExpiryOnLastAttemptIsDead", testLeaseExpiryOnLastAttemptIsDead},
		{"FailRetriesThenDead", testFailRetriesThenDead},
		{"FailPermanent", testFailPermanent},
		{"ExtendLease", testExtendLease},
		{"CompleteBatch", testCompleteBatch},
		{"RepeatedCompleteSucceeds", testRepeatedCompleteSucceeds},
		{"RepeatedCompleteBatchSucceeds", testRepeatedCompleteBatchSucceeds},
		{"RepeatedFailSucceeds", testRepeatedFailSucceeds},
		{"RepeatedFailDeadSucceeds", testRepeatedFailDeadSucceeds},
		{"RepeatedCompleteEffectSucceeds", testRepeatedCompleteEffectSucceeds},
		{"ConcurrentReserveDeliversOnce", testConcurrentReserveDeliversOnce},
		{"PausedQueue", testPausedQueue},
		{"ListQueuesCounts", testListQueuesCounts},
		{"ListJobsPages", testListJobsPages},
		{"DeadLetterRequeueAndPurge", testDeadLetterRequeueAndPurge},
		{"EffectClaimCompleteReplay", testEffectClaimCompleteReplay},
		{"EffectReleaseAndLeaseExpiry", testEffectReleaseAndLeaseExpiry},
		{"EffectConcurrentClaims", testEffectConcurrentClaims},
		{"EffectSweep", testEffectSweep},
		{"ClosedStoreRefusesCalls", testClosedStoreRefusesCalls},
		{"PingOpenStore", testPingOpenStore},
		{"ReleaseOnCompleted", testReleaseOnCompleted},
		{"ReleaseOnDeadFail", testReleaseOnDeadFail},
		{"ReleaseOnDeadLeaseExpiry", testReleaseOnDeadLeaseExpiry},
		{"ReleaseOnCancelled", testReleaseOnCancelled},
		{"ReleaseOnlyNamedStates", testReleaseOnlyNamedStates},
		{"ReleaseWithoutPolicy", testReleaseWithoutPolicy},
		{"ReleaseKeepsReplacedRecord", testReleaseKeepsReplacedRecord},
		{"ScheduleStateMonotonic", testScheduleStateMonotonic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tt.fn(t, s)
		})
	}
}

func key(k string) *string { return &k }

func job(queue, key string) store.EnqueueJob {
	j := store.EnqueueJob{Queue: queue, JobType: "receipt", Payload: []byte("{}"), MaxAttempts: 25, DedupWindow: day}
	if key != "" {
		j.IdempotencyKey = &key
	}
	return j
}

func enqueue(t *testing.T, s store.Store, now time.Time, jobs ...store.EnqueueJob) []store.EnqueueResult {
	t.Helper()
	res, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Jobs: jobs, Now: now})
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	if len(res) != len(jobs) {
		t.Fatalf("EnqueueBatch: %d results for %d jobs", len(res), len(jobs))
	}
	return res
}

func enqueueOne(t *testing.T, s store.Store, now time.Time, j store.EnqueueJob) store.EnqueueResult {
	t.Helper()
	r := enqueue(t, s, now, j)[0]
	if r.Err != nil {
		t.Fatalf("enqueue: %v", r.Err)
	}
	return r
}

func lookup(t *testing.T, s store.Store, now time.Time, queue, key string) (*store.DedupLookup, error) {
	t.Helper()
	return s.LookupDedup(context.Background(), &store.LookupDedupParams{Queue: queue, Key: key, Now: now})
}

func testEnqueueCreatesThenDeduplicates(t *testing.T, s store.Store) {
	first := enqueueOne(t, s, t0, job("emails", "receipt-order-8a3f"))
	if first.Deduplicated {
		t.Fatal("first enqueue reported deduplicated")
	}
	if !first.OriginalEnqueuedAt.Equal(t0) || !first.ExpiresAt.Equal(t0.Add(day)) {
		t.Fatalf("first enqueue: enqueued at %v, expires %v; want %v, %v", first.OriginalEnqueuedAt, first.ExpiresAt, t0, t0.Add(day))
	}
	second := enqueueOne(t, s, t0.Add(time.Minute), job("emails", "receipt-order-8a3f"))
	if !second.Deduplicated || second.JobID != first.JobID {
		t.Fatalf("second enqueue: deduplicated=%v id=%x; want true and %x", second.Deduplicated, second.JobID, first.JobID)
	}
	if !second.OriginalEnqueuedAt.Equal(t0) || !second.ExpiresAt.Equal(t0.Add(day)) {
		t.Fatalf("hit must report the original times and not extend the window: %v %v", second.OriginalEnqueuedAt, second.ExpiresAt)
	}
	j, err := s.GetJob(context.Background(), &store.GetJobParams{ID: first.JobID})
	if err != nil {
		t.Fatalf("GetJob: %v", err)
	}
	if j.State != store.JobStateAvailable || j.IdempotencyKey == nil || *j.IdempotencyKey != "receipt-order-8a3f" {
		t.Fatalf("job = %+v", j)
	}
}

func testKeysScopedPerQueue(t *testing.T, s store.Store) {
	a := enqueueOne(t, s, t0, job("emails", "k"))
	b := enqueueOne(t, s, t0, job("sms", "k"))
	if b.Deduplicated || a.JobID == b.JobID {
		t.Fatalf("same key on another queue must create another job: %+v %+v", a, b)
	}
}

func testKeysComparedByteForByte(t *testing.T, s store.Store) {
	keys := []string{"a", "a\x00", "a\x00b", "A", "a ", "order:9/invoice", "emoji-😀", "emoji-😁", "e\u0301", "\u00e9"}
	ids := map[store.JobID]string{}
	for _, k := range keys {
		r := enqueueOne(t, s, t0, job("q", k))
		if r.Deduplicated {
			t.Fatalf("key %q deduplicated against another key", k)
		}
		ids[r.JobID] = k
	}
	for _, k := range keys {
		r := enqueueOne(t, s, t0, job("q", k))
		if !r.Deduplicated || ids[r.JobID] != k {
			t.Fatalf("repeat of key %q: deduplicated=%v, matched key %q", k, r.Deduplicated, ids[r.JobID])
		}
		l, err := lookup(t, s, t0, "q", k)
		if err != nil || l.Record.JobID != r.JobID || l.Record.Key != k {
			t.Fatalf("lookup %q: %+v, %v", k, l, err)
		}
	}
}

func testUnkeyedJobsNeverDeduplicate(t *testing.T, s store.Store) {
	a := enqueueOne(t, s, t0, job("q", ""))
	b := enqueueOne(t, s, t0, job("q", ""))
	if a.Deduplicated || b.Deduplicated || a.JobID == b.JobID {
		t.Fatalf("unkeyed jobs deduplicated: %+v %+v", a, b)
	}
}

func testWindowExpiryWithoutSweep(t *testing.T, s store.Store) {
	first := enqueueOne(t, s, t0, job("q", "k"))
	justBefore := t0.Add(day - time.Microsecond)
	if r := enqueueOne(t, s, justBefore, job("q", "k")); !r.Deduplicated || r.JobID != first.JobID {
		t.Fatalf("repeat just inside the window: %+v", r)
	}
	if _, err := lookup(t, s, justBefore, "q", "k"); err != nil {
		t.Fatalf("lookup inside window: %v", err)
	}
	// At expires_at exactly the record is absent, though nothing swept it.
	at := t0.Add(day)
	if _, err := lookup(t, s, at, "q", "k"); !errors.Is(err, store.ErrDedupNotFound) {
		t.Fatalf("lookup at expires_at: err = %v, want ErrDedupNotFound", err)
	}
	second := enqueueOne(t, s, at, job("q", "k"))
	if second.Deduplicated || second.JobID == first.JobID {
		t.Fatalf("repeat at expires_at must create a new job: %+v", second)
	}
	if !second.ExpiresAt.Equal(at.Add(day)) {
		t.Fatalf("fresh record expires %v, want %v", second.ExpiresAt, at.Add(day))
	}
	l, err := lookup(t, s, at, "q", "k")
	if err != nil || l.Record.JobID != second.JobID || l.Record.Hits != 0 {
		t.Fatalf("fresh record: %+v, %v", l, err)
	}
}

func testPerJobWindow(t *testing.T, s store.Store) {
	long := job("payments", "k")
	long.DedupWindow = 7 * day
	first := enqueueOne(t, s, t0, long)
	if r := enqueueOne(t, s, t0.Add(3*day), long); !r.Deduplicated || r.JobID != first.JobID {
		t.Fatalf("7-day window: repeat after 3 days not deduplicated: %+v", r)
	}
	if r := enqueueOne(t, s, t0.Add(7*day), long); r.Deduplicated {
		t.Fatalf("7-day window: repeat after 7 days deduplicated: %+v", r)
	}
}

func testPayloadMismatchReturnOriginal(t *testing.T, s store.Store) {
	first := enqueueOne(t, s, t0, job("q", "k"))
	same := enqueueOne(t, s, t0, job("q", "k"))
	if same.PayloadMismatch {
		t.Fatal("same payload flagged as mismatch")
	}
	other := job("q", "k")
	other.Payload = []byte(`{"amount":2}`)
	r := enqueueOne(t, s, t0, other)
	if !r.Deduplicated || !r.PayloadMismatch || r.JobID != first.JobID {
		t.Fatalf("different payload: %+v", r)
	}
	otherType := job("q", "k")
	otherType.JobType = "refund"
	if r := enqueueOne(t, s, t0, otherType); !r.PayloadMismatch {
		t.Fatalf("different job type not flagged: %+v", r)
	}
}

func testPayloadMismatchReject(t *testing.T, s store.Store) {
	strict := job("q", "k")
	strict.RejectMismatch = true
	first := enqueueOne(t, s, t0, strict)
	if r := enqueueOne(t, s, t0, strict); !r.Deduplicated || r.JobID != first.JobID {
		t.Fatalf("same payload on reject_mismatch queue: %+v", r)
	}
	strict.Payload = []byte("other")
	r := enqueue(t, s, t0, strict)[0]
	if !errors.Is(r.Err, store.ErrIdempotencyKeyConflict) {
		t.Fatalf("different payload: err = %v, want ErrIdempotencyKeyConflict", r.Err)
	}
	l, err := lookup(t, s, t0, "q", "k")
	if err != nil || l.Record.Hits != 1 {
		t.Fatalf("a rejected enqueue must not count as a hit: %+v %v", l, err)
	}
}

func conflictingBatch(t *testing.T, s store.Store) (jobs []store.EnqueueJob, existing store.EnqueueResult) {
	existingJob := job("q", "existing")
	existingJob.RejectMismatch = true
	existing = enqueueOne(t, s, t0, existingJob)
	conflict := existingJob
	conflict.Payload = []byte("different")
	return []store.EnqueueJob{
		job("q", "new-1"),
		existingJob, // a hit
		conflict,    // rejected
		job("q", "pair"),
		job("q", "pair"), // a hit on the previous job
		job("q", ""),
	}, existing
}

func testNonAtomicBatchPerItemResults(t *testing.T, s store.Store) {
	jobs, existing := conflictingBatch(t, s)
	res := enqueue(t, s, t0, jobs...)
	if res[0].Err != nil || res[0].Deduplicated {
		t.Fatalf("result 0: %+v", res[0])
	}
	if res[1].Err != nil || !res[1].Deduplicated || res[1].JobID != existing.JobID {
		t.Fatalf("result 1 (hit): %+v", res[1])
	}
	if !errors.Is(res[2].Err, store.ErrIdempotencyKeyConflict) {
		t.Fatalf("result 2 (conflict): %+v", res[2])
	}
	if res[3].Err != nil || res[3].Deduplicated {
		t.Fatalf("result 3: %+v", res[3])
	}
	if res[4].Err != nil || !res[4].Deduplicated || res[4].JobID != res[3].JobID {
		t.Fatalf("result 4 (hit on 3): %+v", res[4])
	}
	if res[5].Err != nil || res[5].Deduplicated {
		t.Fatalf("result 5: %+v", res[5])
	}
	for _, i := range []int{0, 3, 5} {
		if _, err := s.GetJob(context.Background(), &store.GetJobParams{ID: res[i].JobID}); err != nil {
			t.Fatalf("job %d not written: %v", i, err)
		}
	}
}

func testAtomicBatchFailsWhole(t *testing.T, s store.Store) {
	jobs, _ := conflictingBatch(t, s)
	_, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{Jobs: jobs, Atomic: true, Now: t0})
	var je *store.JobError
	if !errors.As(err, &je) || je.Index != 2 || !errors.Is(err, store.ErrIdempotencyKeyConflict) {
		t.Fatalf("atomic batch: err = %v, want JobError{Index: 2, conflict}", err)
	}
	for _, k := range []string{"new-1", "pair"} {
		if _, err := lookup(t, s, t0, "q", k); !errors.Is(err, store.ErrDedupNotFound) {
			t.Fatalf("atomic batch wrote key %q: %v", k, err)
		}
	}
	l, err := lookup(t, s, t0, "q", "existing")
	if err != nil || l.Record.Hits != 0 {
		t.Fatalf("atomic batch counted a hit: %+v %v", l, err)
	}
}

func testAtomicBatchWithHits(t *testing.T, s store.Store) {
	existing := enqueueOne(t, s, t0, job("q", "existing"))
	res, err := s.EnqueueBatch(context.Background(), &store.EnqueueBatchParams{
		Jobs: []store.EnqueueJob{job("q", "a"), job("q", "existing"), job("q", "b")}, Atomic: true, Now: t0,
	})
	if err != nil {
		t.Fatalf("atomic batch: %v", err)
	}
	if res[0].Deduplicated || res[2].Deduplicated || !res[1].Deduplicated || res[1].JobID != existing.JobID {
		t.Fatalf("results: %+v", res)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := lookup(t, s, t0, "q", k); err != nil {
			t.Fatalf("key %q not written: %v", k, err)
		}
	}
}

// testHitsOnAJobOfTheBatch: hits on a job the same batch creates count on
// its record, whether the key was new or its record had expired.
func testHitsOnAJobOfTheBatch(t *testing.T, s store.Store) {
	for _, now := range []time.Time{t0, t0.Add(day)} { // the second: the first's record has expired
		res := enqueue(t, s, now, job("q", "k"), job("q", "k"), job("q", "k"))
		if res[0].Deduplicated || !res[1].Deduplicated || !res[2].Deduplicated || res[2].JobID != res[0].JobID {
			t.Fatalf("at %v: %+v", now, res)
		}
		l, err := lookup(t, s, now, "q", "k")
		if err != nil || l.Record.JobID != res[0].JobID || l.Record.Hits != 2 || !l.Record.ExpiresAt.Equal(now.Add(day)) {
			t.Fatalf("at %v: the record %+v, %v; want the batch's job with 2 hits", now, l, err)
		}
	}
}

func testHitsCounted(t *testing.T, s store.Store) {
	enqueueOne(t, s, t0, job("q", "k"))
	for range 3 {
		enqueueOne(t, s, t0, job("q", "k"))
	}
	enqueue(t, s, t0, job("q", "k"), job("q", "k"))
	l, err := lookup(t, s, t0, "q", "k")
	if err != nil || l.Record.Hits != 5 {
		t.Fatalf("hits = %+v, %v; want 5", l, err)
	}
}

func testJobFieldsRoundTrip(t *testing.T, s store.Store) {
	j := job("q", "k")
	j.Payload = bytes.Repeat([]byte{0, 1, 2, 255}, 64)
	j.Priority = -7
	j.MaxAttempts = 3
	j.Headers = map[string]string{"trace": "abc", "tenant": "9"}
	r := enqueueOne(t, s, t0, j)
	got, err := s.GetJob(context.Background(), &store.GetJobParams{ID: r.JobID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Queue != "q" || got.JobType != "receipt" || !bytes.Equal(got.Payload, j.Payload) || got.Priority != -7 ||
		got.MaxAttempts != 3 || got.Headers["trace"] != "abc" || got.Headers["tenant"] != "9" || len(got.Headers) != 2 ||
		!got.CreatedAt.Equal(t0) || !got.RunAt.Equal(t0) || got.Attempts != 0 || !got.FinalizedAt.IsZero() {
		t.Fatalf("round trip: %+v", got)
	}
	var zero store.JobID
	if _, err := s.GetJob(context.Background(), &store.GetJobParams{ID: zero}); !errors.Is(err, store.ErrJobNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

func testScheduledRunAt(t *testing.T, s store.Store) {
	j := job("q", "")
	j.RunAt = t0.Add(time.Hour)
	r := enqueueOne(t, s, t0, j)
	got, err := s.GetJob(context.Background(), &store.GetJobParams{ID: r.JobID})
	if err != nil || got.State != store.JobStateScheduled || !got.RunAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("future run_at: %+v %v", got, err)
	}
	j.RunAt = t0.Add(-time.Hour) // in the past: runs now
	r = enqueueOne(t, s, t0, j)
	got, err = s.GetJob(context.Background(), &store.GetJobParams{ID: r.JobID})
	if err != nil || got.State != store.JobStateAvailable || !got.RunAt.Equal(t0) {
		t.Fatalf("past run_at: %+v %v", got, err)
	}
}

func testCancelJob(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := enqueueOne(t, s, t0, job("q", "k"))
	j, err := s.CancelJob(ctx, &store.CancelJobParams{ID: r.JobID, Now: t0.Add(time.Second)})
	if err != nil || j.State != store.JobStateCancelled || !j.FinalizedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	again, err := s.CancelJob(ctx, &store.CancelJobParams{ID: r.JobID, Now: t0.Add(time.Hour)})
	if err != nil || again.State != store.JobStateCancelled || !again.FinalizedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("cancel of a cancelled job must change nothing: %+v %v", again, err)
	}
	// The dedup record outlives the cancellation.
	if hit := enqueueOne(t, s, t0, job("q", "k")); !hit.Deduplicated || hit.JobID != r.JobID {
		t.Fatalf("enqueue after cancel: %+v", hit)
	}
	l, err := lookup(t, s, t0, "q", "k")
	if err != nil || l.JobState != store.JobStateCancelled {
		t.Fatalf("lookup after cancel: %+v %v", l, err)
	}
	var unknown store.JobID
	unknown[0] = 1
	if _, err := s.CancelJob(ctx, &store.CancelJobParams{ID: unknown, Now: t0}); !errors.Is(err, store.ErrJobNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
}

func testLookupAfterJobDeleted(t *testing.T, s store.Store) {
	ctx := context.Background()
	j := job("q", "k")
	j.DedupWindow = 7 * day
	r := enqueueOne(t, s, t0, j)
	if _, err := s.CancelJob(ctx, &store.CancelJobParams{ID: r.JobID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Sweep(ctx, &store.SweepParams{Now: t0.Add(2 * day), Limit: 100, CompletedRetention: day, DeadRetention: 7 * day})
	if err != nil || res.Jobs != 1 || res.DedupRecords != 0 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	if _, err := s.GetJob(ctx, &store.GetJobParams{ID: r.JobID}); !errors.Is(err, store.ErrJobNotFound) {
		t.Fatalf("job survived retention: %v", err)
	}
	l, err := lookup(t, s, t0.Add(2*day), "q", "k")
	if err != nil || l.JobState != store.JobStateDeleted || l.Record.JobID != r.JobID {
		t.Fatalf("lookup after purge: %+v %v", l, err)
	}
	if hit := enqueueOne(t, s, t0.Add(2*day), j); !hit.Deduplicated || hit.JobID != r.JobID {
		t.Fatalf("enqueue after purge inside window: %+v", hit)
	}
}

func testReleaseFreesKey(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := enqueueOne(t, s, t0, job("q", "k"))
	rec, err := s.ReleaseDedup(ctx, &store.ReleaseDedupParams{Queue: "q", Key: "k", Now: t0})
	if err != nil || rec.JobID != r.JobID {
		t.Fatalf("release: %+v %v", rec, err)
	}
	if _, err := s.ReleaseDedup(ctx, &store.ReleaseDedupParams{Queue: "q", Key: "k", Now: t0}); !errors.Is(err, store.ErrDedupNotFound) {
		t.Fatalf("second release: %v", err)
	}
	// The job is untouched.
	if got, err := s.GetJob(ctx, &store.GetJobParams{ID: r.JobID}); err != nil || got.State != store.JobStateAvailable {
		t.Fatalf("release touched the job: %+v %v", got, err)
	}
	next := enqueueOne(t, s, t0, job("q", "k"))
	if next.Deduplicated || next.JobID == r.JobID {
		t.Fatalf("enqueue after release: %+v", next)
	}
}

func testSweepBoundedBatches(t *testing.T, s store.Store) {
	ctx := context.Background()
	short := job("q", "")
	short.DedupWindow = time.Hour
	var batch []store.EnqueueJob
	for i := range 25 {
		j := short
		j.IdempotencyKey = key(fmt.Sprintf("expiring-%d", i))
		batch = append(batch, j)
	}
	live := job("q", "live")
	live.DedupWindow = 7 * day
	batch = append(batch, live)
	enqueue(t, s, t0, batch...)

	later := t0.Add(2 * time.Hour)
	var got []int
	for {
		res, err := s.Sweep(ctx, &store.SweepParams{Now: later, Limit: 10, CompletedRetention: day, DeadRetention: 7 * day})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.DedupRecords)
		if res.DedupRecords < 10 {
			break
		}
	}
	if fmt.Sprint(got) != "[10 10 5]" {
		t.Fatalf("sweep batches = %v, want [10 10 5]", got)
	}
	if _, err := lookup(t, s, later, "q", "live"); err != nil {
		t.Fatalf("sweep removed a live record: %v", err)
	}
	// Jobs are not touched by dedup expiry.
	if r := enqueueOne(t, s, later, short); r.Deduplicated {
		t.Fatal("unkeyed job deduplicated")
	}
}

func testConcurrentSameKey(t *testing.T, s store.Store) {
	const keys, callers = 200, 64
	ctx := context.Background()
	ids := make([][]store.JobID, keys)
	for k := range ids {
		ids[k] = make([]store.JobID, callers)
	}
	var wg sync.WaitGroup
	errs := make(chan error, keys*callers)
	start := make(chan struct{})
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for k := range keys {
				j := job("q", fmt.Sprintf("key-%d", k))
				res, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Jobs: []store.EnqueueJob{j}, Now: t0})
				if err == nil {
					err = res[0].Err
				}
				if err != nil {
					errs <- err
					return
				}
				ids[k][c] = res[0].JobID
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("enqueue: %v", err)
	}
	distinct := map[store.JobID]bool{}
	for k := range keys {
		for c := range callers {
			if ids[k][c] != ids[k][0] {
				t.Fatalf("key %d: caller %d got %x, caller 0 got %x", k, c, ids[k][c], ids[k][0])
			}
		}
		distinct[ids[k][0]] = true
		l, err := lookup(t, s, t0, "q", fmt.Sprintf("key-%d", k))
		if err != nil || l.Record.JobID != ids[k][0] || l.Record.Hits != callers-1 {
			t.Fatalf("key %d: record %+v, %v; want job %x with %d hits", k, l, err, ids[k][0], callers-1)
		}
	}
	if len(distinct) != keys {
		t.Fatalf("%d distinct jobs for %d keys", len(distinct), keys)
	}
}

// testConcurrentAtomicFailuresLeaveNoTrace runs failing atomic batches
// concurrently with successful enqueues of the same keys: a backend that
// commits concurrent calls together must still drop every write of a failed
// atomic batch, hits included.
func testConcurrentAtomicFailuresLeaveNoTrace(t *testing.T, s store.Store) {
	ctx := context.Background()
	conflict := job("q", "conflict")
	conflict.RejectMismatch = true
	enqueueOne(t, s, t0, conflict)
	mismatched := conflict
	mismatched.Payload = []byte("different")

	const goroutines, rounds = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*goroutines)
	for g := range goroutines {
		wg.Add(2)
		go func() { // atomic batches that always fail on their last job
			defer wg.Done()
			for r := range rounds {
				_, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Atomic: true, Now: t0, Jobs: []store.EnqueueJob{
					job("q", fmt.Sprintf("atomic-%d-%d", g, r)), job("q", "shared"), mismatched,
				}})
				var je *store.JobError
				if !errors.As(err, &je) || je.Index != 2 {
					errs <- fmt.Errorf("atomic batch: %v, want JobError at index 2", err)
					return
				}
			}
		}()
		go func() { // plain enqueues of the shared key
			defer wg.Done()
			for range rounds {
				res, err := s.EnqueueBatch(ctx, &store.EnqueueBatchParams{Now: t0, Jobs: []store.EnqueueJob{job("q", "shared")}})
				if err == nil {
					err = res[0].Err
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for g := range goroutines {
		for r := range rounds {
			if _, err := lookup(t, s, t0, "q", fmt.Sprintf("atomic-%d-%d", g, r)); !errors.Is(err, store.ErrDedupNotFound) {
				t.Fatalf("a failed atomic batch wrote its key: %v", err)
			}
		}
	}
	l, err := lookup(t, s, t0, "q", "shared")
	if want := int64(goroutines*rounds - 1); err != nil || l.Record.Hits != want {
		t.Fatalf("shared key: %+v %v; want %d hits (failed atomic batches must not count)", l, err, want)
	}
	if l, err := lookup(t, s, t0, "q", "conflict"); err != nil || l.Record.Hits != 0 {
		t.Fatalf("conflict key: %+v %v; want 0 hits", l, err)
	}
}
