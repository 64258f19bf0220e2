package sepp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/store/storerule"
	"github.com/sepp-dev/sepp/internal/testserver"
)

func connect(t *testing.T, srv *testserver.Server, cfg sepp.Config) *sepp.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sepp.NewClient(ctx, srv.URL, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// serverSide disables the client's own key check, so the server decides.
var serverSide = sepp.Config{MaxIdempotencyKeyBytes: -1}

func enqueue(t *testing.T, c *sepp.Client, queue, jobType, key string) *sepp.Ack {
	t.Helper()
	ack, err := c.Enqueue(context.Background(), sepp.EnqueueRequest{Queue: queue, JobType: jobType, IdempotencyKey: optKey(key)})
	if err != nil {
		t.Fatalf("enqueue %s/%q: %v", queue, key, err)
	}
	return ack
}

// TestSeedScenario is the README's one-minute tour through the Go client,
// with batching on and off: a retried enqueue is a hit on the first job, and
// the same key on another queue is a new job.
func TestSeedScenario(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	for _, cfg := range []sepp.Config{{}, {DisableBatching: true}} {
		c := connect(t, srv, cfg)
		key := fmt.Sprintf("receipt-order-8a3f-batching-%v", !cfg.DisableBatching)
		first := enqueue(t, c, "emails", "receipt", key)
		if first.Deduplicated || first.JobID == "" {
			t.Fatalf("first enqueue: %+v", first)
		}
		second := enqueue(t, c, "emails", "receipt", key)
		if !second.Deduplicated || second.JobID != first.JobID {
			t.Fatalf("second enqueue: %+v, want deduplicated with id %s", second, first.JobID)
		}
		other := enqueue(t, c, "sms", "receipt", key)
		if other.Deduplicated || other.JobID == first.JobID {
			t.Fatalf("same key on another queue: %+v", other)
		}
	}
}

func TestKeyLength(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	for _, cfg := range []sepp.Config{serverSide, {}} { // the server's check, then the client's
		c := connect(t, srv, cfg)
		side := fmt.Sprintf("local check %d", cfg.MaxIdempotencyKeyBytes)
		ok := strings.Repeat("k", 255) + fmt.Sprint(cfg.MaxIdempotencyKeyBytes)[0:1]
		if a := enqueue(t, c, "q", "t", ok); a.Deduplicated {
			t.Fatalf("%s: 256-byte key: %+v", side, a)
		}
		for _, long := range []string{
			strings.Repeat("k", 257),
			strings.Repeat("😀", 65), // 65 characters, 260 bytes
		} {
			_, err := c.Enqueue(context.Background(), sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(long)})
			if !errors.Is(err, sepp.ErrIdempotencyKeyTooLong) {
				t.Fatalf("%s: %d-byte key: err = %v, want ErrIdempotencyKeyTooLong", side, len(long), err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%d bytes; the limit is 256 (max_idempotency_key_bytes)", len(long))) {
				t.Fatalf("%s: message does not say what to do: %v", side, err)
			}
		}
		emoji := strings.Repeat("😀", 63) + "abc" + fmt.Sprint(cfg.MaxIdempotencyKeyBytes)[0:1] // 64 characters, 256 bytes
		if a := enqueue(t, c, "q", "t", emoji); a.Deduplicated {
			t.Fatalf("%s: 256-byte emoji key: %+v", side, a)
		}
	}
}

func TestKeyLimitConfigurable(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: "[storage]\nmax_idempotency_key_bytes = 16\n"})
	c := connect(t, srv, serverSide)
	enqueue(t, c, "q", "t", strings.Repeat("k", 16))
	_, err := c.Enqueue(context.Background(), sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(strings.Repeat("k", 17))})
	if !errors.Is(err, sepp.ErrIdempotencyKeyTooLong) || !strings.Contains(err.Error(), "the limit is 16") {
		t.Fatalf("17-byte key with a 16-byte limit: %v", err)
	}

	big := testserver.Start(t, testserver.Options{Config: "[storage]\nmax_idempotency_key_bytes = 1024\n"})
	c = connect(t, big, sepp.Config{MaxIdempotencyKeyBytes: 1024})
	enqueue(t, c, "q", "t", strings.Repeat("k", 1024))
}

func TestKeysWithAnyCharacter(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	c := connect(t, srv, sepp.Config{})
	keys := []string{"order:9/invoice", "with space", "nul\x00inside", "😀", "😀😁", "a", "a\x00", " "}
	ids := map[string]string{}
	for _, k := range keys {
		a := enqueue(t, c, "q", "t", k)
		if a.Deduplicated {
			t.Fatalf("key %q collided with another key", k)
		}
		ids[a.JobID] = k
	}
	for _, k := range keys {
		a := enqueue(t, c, "q", "t", k)
		if !a.Deduplicated || ids[a.JobID] != k {
			t.Fatalf("repeat of %q: %+v (matched %q)", k, a, ids[a.JobID])
		}
		l, err := c.LookupIdempotencyKey(context.Background(), "q", k)
		if err != nil || !l.Found || l.JobID != a.JobID {
			t.Fatalf("lookup %q: %+v %v", k, l, err)
		}
	}
}

func TestDedupWindow(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: `
[storage]
dedup_window_ms = 3600000 # 1 h

[[queues]]
name = "payments"
dedup_window_ms = 604800000 # 7 days
`})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()

	first := enqueue(t, c, "emails", "t", "k")
	if want := srv.Clock.Now().Add(time.Hour); !first.DedupExpiresAt.Equal(want) {
		t.Fatalf("expires at %v, want %v (the global window)", first.DedupExpiresAt, want)
	}
	pay := enqueue(t, c, "payments", "t", "k")
	if want := srv.Clock.Now().Add(7 * 24 * time.Hour); !pay.DedupExpiresAt.Equal(want) {
		t.Fatalf("payments expires at %v, want %v (the queue's window)", pay.DedupExpiresAt, want)
	}

	srv.Clock.Advance(time.Hour - time.Millisecond)
	if a := enqueue(t, c, "emails", "t", "k"); !a.Deduplicated || a.JobID != first.JobID {
		t.Fatalf("repeat inside the window: %+v", a)
	}
	srv.Clock.Advance(time.Millisecond) // exactly expires_at; the sweeper has not run
	l, err := c.LookupIdempotencyKey(ctx, "emails", "k")
	if err != nil || l.Found {
		t.Fatalf("lookup at expires_at: %+v %v; want not found", l, err)
	}
	fresh := enqueue(t, c, "emails", "t", "k")
	if fresh.Deduplicated || fresh.JobID == first.JobID {
		t.Fatalf("repeat at expires_at: %+v; want a new job", fresh)
	}
	// The per-queue window still holds after the global one has passed.
	srv.Clock.Advance(6 * 24 * time.Hour)
	if a := enqueue(t, c, "payments", "t", "k"); !a.Deduplicated || a.JobID != pay.JobID {
		t.Fatalf("payments after 6 days: %+v", a)
	}
	srv.Clock.Advance(24 * time.Hour)
	if a := enqueue(t, c, "payments", "t", "k"); a.Deduplicated {
		t.Fatalf("payments after 7 days: %+v", a)
	}
}

func TestSweeperRemovesExpiredRecords(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: "[storage]\ndedup_window_ms = 60000\n"})
	c := connect(t, srv, sepp.Config{})
	var reqs []sepp.EnqueueRequest
	for i := range 2500 {
		reqs = append(reqs, sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(fmt.Sprint("k", i))})
	}
	for i := 0; i < len(reqs); i += 500 {
		if _, err := c.EnqueueBatch(context.Background(), reqs[i:i+500], sepp.BatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A record is deleted DedupSweepGrace after its expiry.
	srv.Clock.Advance(time.Minute + storerule.DedupSweepGrace)
	res, err := srv.Sweep(context.Background())
	if err != nil || res.DedupRecords != 2500 {
		t.Fatalf("sweep: %+v %v; want 2500 records deleted (in batches of 1000)", res, err)
	}
	res, err = srv.Sweep(context.Background())
	if err != nil || res.DedupRecords != 0 {
		t.Fatalf("second sweep: %+v %v", res, err)
	}
}

// One tick of the sweeper clears a backlog of expired effect records larger
// than its batch, as it does for dedup records and jobs.
func TestSweeperRemovesExpiredEffects(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{SweepBatch: 10})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	const effects = 35
	for i := range effects {
		cl, err := c.ClaimEffect(ctx, sepp.ClaimEffectRequest{Scope: "mail", Key: fmt.Sprint("order-", i), TTL: time.Minute})
		if err != nil || cl.State != sepp.EffectAcquired {
			t.Fatalf("claim %d: %+v %v", i, cl, err)
		}
		if _, err := c.CompleteEffect(ctx, cl.Token, []byte("sent")); err != nil {
			t.Fatal(err)
		}
	}
	srv.Clock.Advance(time.Minute)
	res, err := srv.Sweep(ctx)
	if err != nil || res.Effects != effects {
		t.Fatalf("sweep: %+v %v; want all %d effect records deleted in one tick (batches of 10)", res, err, effects)
	}
	for i := range effects {
		if r, err := c.GetEffect(ctx, "mail", fmt.Sprint("order-", i)); err != nil || r.Found {
			t.Fatalf("effect %d after the sweep: %+v %v", i, r, err)
		}
	}
	if res, err := srv.Sweep(ctx); err != nil || res.Effects != 0 {
		t.Fatalf("second sweep: %+v %v", res, err)
	}
}

func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	c := connect(t, srv, sepp.Config{})
	const keys, callers = 200, 64
	ids := make([][callers]string, keys)
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	start := make(chan struct{})
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for k := range keys {
				ack, err := c.Enqueue(context.Background(), sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(fmt.Sprint("key-", k))})
				if err != nil {
					errs <- err
					return
				}
				ids[k][g] = ack.JobID
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for k := range keys {
		for g := range callers {
			if ids[k][g] != ids[k][0] {
				t.Fatalf("key %d: caller %d got %s, caller 0 got %s", k, g, ids[k][g], ids[k][0])
			}
		}
		seen[ids[k][0]] = true
		l, err := c.LookupIdempotencyKey(context.Background(), "q", fmt.Sprint("key-", k))
		if err != nil || l.JobID != ids[k][0] || l.Hits != callers-1 {
			t.Fatalf("key %d: %+v %v; want one job with %d hits", k, l, err, callers-1)
		}
	}
	if len(seen) != keys {
		t.Fatalf("%d jobs for %d keys", len(seen), keys)
	}
}

func TestBatches(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	c := connect(t, srv, serverSide)
	ctx := context.Background()
	existing := enqueue(t, c, "q", "t", "existing")
	batch := []sepp.EnqueueRequest{
		{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("new-1")},
		{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(strings.Repeat("k", 257))},
		{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("existing")},
		{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("pair")},
		{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("pair")},
	}

	// Atomic: fails as a whole, names index 1, writes nothing.
	_, err := c.EnqueueBatch(ctx, batch, sepp.BatchOptions{Atomic: true})
	var se *sepp.Error
	if !errors.As(err, &se) || !errors.Is(err, sepp.ErrIdempotencyKeyTooLong) || se.Index != 1 || !strings.Contains(se.Message, "jobs[1]") {
		t.Fatalf("atomic batch: %v (%+v); want IDEMPOTENCY_KEY_TOO_LONG at index 1", err, se)
	}
	for _, k := range []string{"new-1", "pair"} {
		if l, err := c.LookupIdempotencyKey(ctx, "q", k); err != nil || l.Found {
			t.Fatalf("atomic batch wrote %q: %+v %v", k, l, err)
		}
	}
	if l, _ := c.LookupIdempotencyKey(ctx, "q", "existing"); l.Hits != 0 {
		t.Fatalf("failed atomic batch counted a hit: %+v", l)
	}

	// Non-atomic: per-item results, in order.
	res, err := c.EnqueueBatch(ctx, batch, sepp.BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Ack.Deduplicated {
		t.Fatalf("result 0: %+v", res[0])
	}
	if !errors.Is(res[1].Err, sepp.ErrIdempotencyKeyTooLong) {
		t.Fatalf("result 1: %+v", res[1])
	}
	if res[2].Err != nil || !res[2].Ack.Deduplicated || res[2].Ack.JobID != existing.JobID {
		t.Fatalf("result 2: %+v", res[2])
	}
	if res[3].Err != nil || res[3].Ack.Deduplicated {
		t.Fatalf("result 3: %+v", res[3])
	}
	if res[4].Err != nil || !res[4].Ack.Deduplicated || res[4].Ack.JobID != res[3].Ack.JobID {
		t.Fatalf("result 4: %+v; want a hit on result 3", res[4])
	}

	// Atomic with only valid jobs: new ones written, hits flagged.
	res, err = c.EnqueueBatch(ctx, []sepp.EnqueueRequest{
		{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("atomic-new")},
		{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("existing")},
	}, sepp.BatchOptions{Atomic: true})
	if err != nil || res[0].Ack.Deduplicated || !res[1].Ack.Deduplicated || res[1].Ack.JobID != existing.JobID {
		t.Fatalf("atomic batch with a hit: %+v %v", res, err)
	}
	if l, err := c.LookupIdempotencyKey(ctx, "q", "atomic-new"); err != nil || !l.Found || l.JobID != res[0].Ack.JobID {
		t.Fatalf("atomic batch did not write its new job: %+v %v", l, err)
	}
}

func TestBatchLimits(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: "[server]\nmax_batch_size = 3\nmax_payload_bytes = 10\n"})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	four := make([]sepp.EnqueueRequest, 4)
	for i := range four {
		four[i] = sepp.EnqueueRequest{Queue: "q", JobType: "t"}
	}
	if _, err := c.EnqueueBatch(ctx, four, sepp.BatchOptions{}); !errors.Is(err, sepp.ErrBatchTooLarge) {
		t.Fatalf("4 jobs with max_batch_size 3: %v", err)
	}
	_, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", Payload: make([]byte, 11)})
	if !errors.Is(err, sepp.ErrPayloadTooLarge) || !strings.Contains(err.Error(), "max_payload_bytes") {
		t.Fatalf("11-byte payload with a 10-byte limit: %v", err)
	}
	if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", Payload: make([]byte, 10)}); err != nil {
		t.Fatalf("10-byte payload: %v", err)
	}
	if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "", JobType: "t"}); !errors.Is(err, sepp.ErrInvalidField) || !strings.Contains(err.Error(), "queue") {
		t.Fatalf("empty queue: %v", err)
	}
}

func TestQueueSettings(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: `
[server]
strict = true

[[queues]]
name = "lenient"

[[queues]]
name = "strict-payload"
key_reuse = "reject_mismatch"

[[queues]]
name = "content"
dedup_by_content = true

[[queues]]
name = "mail"
job_types = ["receipt", "invoice"]
`})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	send := func(queue, jobType, key, payload string) (*sepp.Ack, error) {
		return c.Enqueue(ctx, sepp.EnqueueRequest{Queue: queue, JobType: jobType, IdempotencyKey: optKey(key), Payload: []byte(payload)})
	}

	// return_original (the default): the original, flagged.
	first, _ := send("lenient", "t", "k", "a")
	a, err := send("lenient", "t", "k", "b")
	if err != nil || !a.Deduplicated || !a.PayloadMismatch || a.JobID != first.JobID {
		t.Fatalf("return_original with another payload: %+v %v", a, err)
	}
	if a, _ := send("lenient", "t", "k", "a"); a.PayloadMismatch {
		t.Fatalf("same payload flagged: %+v", a)
	}

	// reject_mismatch.
	send("strict-payload", "t", "k", "a")
	if _, err := send("strict-payload", "t", "k", "b"); !errors.Is(err, sepp.ErrIdempotencyKeyConflict) {
		t.Fatalf("reject_mismatch with another payload: %v", err)
	}
	if a, err := send("strict-payload", "t", "k", "a"); err != nil || !a.Deduplicated {
		t.Fatalf("reject_mismatch with the same payload: %+v %v", a, err)
	}

	// dedup_by_content: identical keyless jobs deduplicate, different ones do not.
	x, _ := send("content", "t", "", "same")
	y, err := send("content", "t", "", "same")
	if err != nil || !y.Deduplicated || y.JobID != x.JobID {
		t.Fatalf("dedup_by_content, identical jobs: %+v %v", y, err)
	}
	if z, _ := send("content", "t", "", "other"); z.Deduplicated {
		t.Fatalf("dedup_by_content, different payload: %+v", z)
	}
	if z, _ := send("content", "t2", "", "same"); z.Deduplicated {
		t.Fatalf("dedup_by_content, different job type: %+v", z)
	}

	// strict: undeclared queues are refused.
	if _, err := send("undeclared", "t", "", ""); !errors.Is(err, sepp.ErrUnknownQueue) || !strings.Contains(err.Error(), "[[queues]]") {
		t.Fatalf("strict, undeclared queue: %v", err)
	}

	// job_types.
	if _, err := send("mail", "receipt", "", ""); err != nil {
		t.Fatalf("allowed job type: %v", err)
	}
	if _, err := send("mail", "sms", "", ""); !errors.Is(err, sepp.ErrUnknownJobType) {
		t.Fatalf("job type outside job_types: %v", err)
	}
}

func TestLookupAfterPurgeAndRelease(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: `
[storage]
dedup_window_ms = 604800000      # 7 days
completed_retention_ms = 3600000 # cancelled and completed jobs kept 1 h
`})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	ack := enqueue(t, c, "q", "t", "order-9")
	j, err := c.CancelJob(ctx, ack.JobID)
	if err != nil || j.State != sepp.JobStateCancelled {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	srv.Clock.Advance(2 * time.Hour)
	if _, err := srv.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(ctx, ack.JobID); !errors.Is(err, sepp.ErrJobNotFound) {
		t.Fatalf("job after retention: %v", err)
	}
	l, err := c.LookupIdempotencyKey(ctx, "q", "order-9")
	if err != nil || !l.Found || l.JobID != ack.JobID || l.State != sepp.JobStateDeleted {
		t.Fatalf("lookup after purge: %+v %v; want the original id, state deleted", l, err)
	}
	if a := enqueue(t, c, "q", "t", "order-9"); !a.Deduplicated || a.JobID != ack.JobID {
		t.Fatalf("enqueue after purge, inside the window: %+v", a)
	}

	released, id, err := c.ReleaseIdempotencyKey(ctx, "q", "order-9")
	if err != nil || !released || id != ack.JobID {
		t.Fatalf("release: %v %s %v", released, id, err)
	}
	if l, _ := c.LookupIdempotencyKey(ctx, "q", "order-9"); l.Found {
		t.Fatalf("lookup after release: %+v", l)
	}
	if a := enqueue(t, c, "q", "t", "order-9"); a.Deduplicated || a.JobID == ack.JobID {
		t.Fatalf("enqueue after release: %+v; want a new job", a)
	}
	released, _, err = c.ReleaseIdempotencyKey(ctx, "q", "never-used")
	if err != nil || released {
		t.Fatalf("release of an unknown key: %v %v", released, err)
	}
}

func TestGetJob(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	runAt := srv.Clock.Now().Add(time.Hour)
	ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{
		Queue: "q", JobType: "t", Payload: []byte("hello"), IdempotencyKey: sepp.Key("k"), Priority: 5, RunAt: runAt,
		MaxAttempts: 3, Headers: map[string]string{"trace": "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.GetJob(ctx, ack.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != ack.JobID || j.Queue != "q" || j.JobType != "t" || string(j.Payload) != "hello" || j.IdempotencyKey != "k" ||
		j.Priority != 5 || !j.RunAt.Equal(runAt) || j.MaxAttempts != 3 || j.Headers["trace"] != "x" || j.State != sepp.JobStateScheduled {
		t.Fatalf("job: %+v", j)
	}
	if _, err := c.GetJob(ctx, "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d"); !errors.Is(err, sepp.ErrJobNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := c.GetJob(ctx, "not-an-id"); !errors.Is(err, sepp.ErrInvalidField) {
		t.Fatalf("malformed id: %v", err)
	}
	d, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if j, _ := c.GetJob(ctx, d.JobID); j.MaxAttempts != 25 || j.State != sepp.JobStateAvailable {
		t.Fatalf("defaults: %+v", j)
	}
}

func TestHitsAreLogged(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	c := connect(t, srv, sepp.Config{})
	first := enqueue(t, c, "emails", "receipt", "receipt-order-8a3f")
	enqueue(t, c, "emails", "receipt", "receipt-order-8a3f")
	enqueue(t, c, "emails", "receipt", "receipt-order-8a3f")
	logs := srv.Logs.String()
	if n := strings.Count(logs, "dedup hit"); n != 2 {
		t.Fatalf("%d hit log lines for 2 hits:\n%s", n, logs)
	}
	want := fmt.Sprintf("queue=emails idempotency_key=receipt-order-8a3f job_id=%s", first.JobID)
	if !strings.Contains(logs, want) {
		t.Fatalf("hit log line lacks %q:\n%s", want, logs)
	}
}

func TestBatcherLearnsServerBatchLimit(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: "[server]\nmax_batch_size = 10\n"})
	c := connect(t, srv, sepp.Config{})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Enqueue(context.Background(), sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key(fmt.Sprint(i))}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("enqueue with a server limit below the client's batch size: %v", err)
	}
}

func TestContextErrors(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	for _, cfg := range []sepp.Config{{}, {DisableBatching: true}} {
		c := connect(t, srv, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("k")}); !errors.Is(err, context.Canceled) {
			t.Fatalf("batching %v: cancelled context: %v", !cfg.DisableBatching, err)
		}
		if _, err := c.GetJob(ctx, "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d"); !errors.Is(err, context.Canceled) {
			t.Fatalf("GetJob with a cancelled context: %v", err)
		}
	}
}

func TestStrictLookup(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{Config: "[server]\nstrict = true\n\n[[queues]]\nname = \"emails\"\n"})
	c := connect(t, srv, sepp.Config{})
	if _, err := c.LookupIdempotencyKey(context.Background(), "emials", "k"); !errors.Is(err, sepp.ErrUnknownQueue) {
		t.Fatalf("lookup on an undeclared queue in strict mode: %v", err)
	}
	if l, err := c.LookupIdempotencyKey(context.Background(), "emails", "k"); err != nil || l.Found {
		t.Fatalf("lookup on a declared queue: %+v %v", l, err)
	}
}

// optKey is the key k, or no key for "", for helpers that take keys as
// strings.
func optKey(k string) *string {
	if k == "" {
		return nil
	}
	return &k
}

// A Complete, Fail or CompleteEffect sent again with the token whose first
// call was committed (its answer lost) succeeds and changes nothing; another
// token is refused with ErrLeaseLost. The store conformance suite checks the
// same on every backend; this checks the API answers.
func TestRepeatedCompletionsSucceed(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, testserver.Options{})
	c := connect(t, srv, sepp.Config{})
	ctx := context.Background()
	enqueue(t, c, "q", "t", "done")
	enqueue(t, c, "q", "t", "failed")
	r, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"q"}, MaxJobs: 2})
	if err != nil || len(r) != 2 {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	for range 2 {
		if err := c.Complete(ctx, r[0].Job.ID, r[0].LeaseToken, []byte("ok")); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	}
	if err := c.Complete(ctx, r[0].Job.ID, "0123456789abcdef0123456789abcdef", nil); !errors.Is(err, sepp.ErrLeaseLost) {
		t.Fatalf("Complete with another token: %v", err)
	}
	first, err := c.Fail(ctx, r[1].Job.ID, r[1].LeaseToken, "boom", sepp.FailOptions{Permanent: true})
	if err != nil || first.AlreadyFailed || first.State != sepp.JobStateDead {
		t.Fatalf("Fail: %+v %v", first, err)
	}
	again, err := c.Fail(ctx, r[1].Job.ID, r[1].LeaseToken, "boom", sepp.FailOptions{Permanent: true})
	if err != nil || !again.AlreadyFailed || again.State != sepp.JobStateDead {
		t.Fatalf("repeated Fail: %+v %v", again, err)
	}
	if err := c.Complete(ctx, r[1].Job.ID, r[1].LeaseToken, nil); !errors.Is(err, sepp.ErrLeaseLost) {
		t.Fatalf("Complete after this token's Fail: %v", err)
	}
	if j, err := c.GetJob(ctx, r[0].Job.ID); err != nil || j.State != sepp.JobStateCompleted || string(j.Result) != "ok" {
		t.Fatalf("completed job: %+v %v", j, err)
	}

	cl, err := c.ClaimEffect(ctx, sepp.ClaimEffectRequest{Scope: "mail", Key: "order-9"})
	if err != nil || cl.State != sepp.EffectAcquired {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	if res, err := c.CompleteEffect(ctx, cl.Token, []byte("em_1")); err != nil || string(res) != "em_1" {
		t.Fatalf("CompleteEffect: %q %v", res, err)
	}
	// The repeat gets what the first call stored.
	if res, err := c.CompleteEffect(ctx, cl.Token, []byte("em_2")); err != nil || string(res) != "em_1" {
		t.Fatalf("repeated CompleteEffect: %q %v", res, err)
	}
	if _, err := c.CompleteEffect(ctx, "0123456789abcdef0123456789abcdef", nil); !errors.Is(err, sepp.ErrLeaseLost) {
		t.Fatalf("CompleteEffect with another token: %v", err)
	}
}
