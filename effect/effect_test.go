package effect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// mailer counts the mails it sends and answers each with a receipt.
type mailer struct{ sent atomic.Int32 }

func (m *mailer) send(delay time.Duration) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		n := m.sent.Add(1)
		time.Sleep(delay)
		return []byte(fmt.Sprint("em_", n)), nil
	}
}

func connect(t *testing.T, config string) (*testserver.Server, *sepp.Client) {
	t.Helper()
	srv := testserver.Start(t, testserver.Options{Config: config, RealTime: true})
	c, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// deliver reserves the next job of queue q, failing the test if none comes.
func deliver(t *testing.T, c *sepp.Client) sepp.Reservation {
	t.Helper()
	r, err := c.Reserve(context.Background(), sepp.ReserveRequest{Queues: []string{"q"}, Wait: 5 * time.Second})
	if err != nil || len(r) != 1 {
		t.Fatalf("reserve: %v %v", r, err)
	}
	return r[0]
}

// TestCrashBeforeAck: the first delivery sends the mail and dies before it
// acknowledges; the lease ends and the job is delivered again.
func TestCrashBeforeAck(t *testing.T) {
	t.Parallel()
	for _, guarded := range []bool{false, true} {
		_, c := connect(t, "[[queues]]\nname = \"q\"\nlease_ms = 200\n")
		ctx := context.Background()
		c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "invoice", Payload: []byte("order-9")})
		var m mailer
		handle := func(r sepp.Reservation) []byte {
			if !guarded {
				v, _ := m.send(0)(ctx)
				return v
			}
			res, err := Do(ctx, c, "mail.invoice", r.Job.ID, Options{TTL: time.Hour}, m.send(0))
			if err != nil {
				t.Fatal(err)
			}
			return res.Value
		}
		first := deliver(t, c)
		receipt1 := handle(first) // ... and the worker dies here, before Complete
		second := deliver(t, c)   // after the lease
		receipt2 := handle(second)
		if err := c.Complete(ctx, second.Job.ID, second.LeaseToken, receipt2); err != nil {
			t.Fatal(err)
		}
		deliveries, mails := second.Attempt, m.sent.Load()
		if !guarded && (deliveries != 2 || mails != 2) {
			t.Fatalf("plain handler: deliveries=%d mails=%d, want 2 and 2", deliveries, mails)
		}
		if guarded && (deliveries != 2 || mails != 1 || string(receipt2) != string(receipt1)) {
			t.Fatalf("under an effect key: deliveries=%d mails=%d receipts %s/%s, want 2, 1 and the first receipt replayed",
				deliveries, mails, receipt1, receipt2)
		}
	}
}

// TestTwoWorkersOneJob: A is slow, its lease ends, B gets the same job
// while A still runs the effect.
func TestTwoWorkersOneJob(t *testing.T) {
	t.Parallel()
	for _, mode := range []Mode{Wait, Raise} {
		_, c := connect(t, "[[queues]]\nname = \"q\"\nlease_ms = 200\n")
		ctx := context.Background()
		c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "invoice"})
		var m mailer
		opts := Options{TTL: time.Hour, InFlight: mode}
		a := deliver(t, c)
		aDone := make(chan string)
		go func() {
			res, err := Do(ctx, c, "mail.invoice", "order-9.invoice", opts, m.send(600*time.Millisecond))
			if err != nil {
				t.Error(err)
			}
			aDone <- string(res.Value)
		}()
		b := deliver(t, c) // A's job lease (200 ms) ends while its mail takes 600 ms
		if b.Job.ID != a.Job.ID || b.Attempt != 2 {
			t.Fatalf("B got %+v", b)
		}
		res, err := Do(ctx, c, "mail.invoice", "order-9.invoice", opts, m.send(0))
		switch mode {
		case Wait:
			receiptA := <-aDone
			if err != nil || string(res.Value) != receiptA || !res.Replayed {
				t.Fatalf("wait: B got %+v %v; want A's receipt %s", res, err, receiptA)
			}
		case Raise:
			if !errors.Is(err, ErrInProgress) || !errors.Is(err, sepp.ErrEffectInProgress) {
				t.Fatalf("raise: B got %+v %v; want EFFECT_IN_PROGRESS", res, err)
			}
			// The job is retried; once A is done, the next delivery replays
			// A's receipt.
			if _, err := c.Fail(ctx, b.Job.ID, b.LeaseToken, err.Error(), sepp.FailOptions{RetryAfter: ptr(10 * time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
			receiptA := <-aDone
			next := deliver(t, c)
			res, err := Do(ctx, c, "mail.invoice", "order-9.invoice", opts, m.send(0))
			if err != nil || string(res.Value) != receiptA || next.Attempt != 3 {
				t.Fatalf("raise: the next delivery got %+v %v (attempt %d); want A's receipt %s", res, err, next.Attempt, receiptA)
			}
		}
		if m.sent.Load() != 1 {
			t.Fatalf("%v: %d mails, want 1", mode, m.sent.Load())
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestWhatTheKeyIsMadeOf: two jobs for order 9, keyed three ways.
func TestWhatTheKeyIsMadeOf(t *testing.T) {
	t.Parallel()
	_, c := connect(t, "")
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		key   func(jobID string) string
		mails int32
	}{
		{"job id", func(id string) string { return id }, 2},
		{"order-9:invoice", func(string) string { return "order-9:invoice" }, 1},
		{"order-9.invoice", func(string) string { return "order-9.invoice" }, 1},
	} {
		var m mailer
		scope := "mail.invoice." + tc.name
		for i := range 2 {
			ack, _ := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "orders", JobType: "invoice", Payload: []byte(fmt.Sprint("order-9 #", i))})
			if _, err := Do(ctx, c, scope, tc.key(ack.JobID), Options{}, m.send(0)); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if m.sent.Load() != tc.mails {
			t.Fatalf("key = %s: %d mails, want %d", tc.name, m.sent.Load(), tc.mails)
		}
	}
}

func TestFailClosed(t *testing.T) {
	t.Parallel()
	srv, c := connect(t, "")
	ctx := context.Background()
	var m mailer
	for _, key := range []string{"", strings.Repeat("k", 257)} {
		_, err := Do(ctx, c, "mail.invoice", key, Options{}, m.send(0))
		if !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("key of %d bytes: %v", len(key), err)
		}
	}
	if _, err := Do(ctx, c, "mail.invoice", strings.Repeat("k", 256), Options{}, m.send(0)); err != nil {
		t.Fatalf("256-byte key: %v", err)
	}
	if m.sent.Load() != 1 {
		t.Fatalf("the mailer ran %d times; invalid keys must not run it", m.sent.Load())
	}

	// The server goes away.
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		t.Fatal(err)
	}
	if _, err := Do(ctx, c, "mail.invoice", "order-10.invoice", Options{}, m.send(0)); !errors.Is(err, sepp.ErrUnavailable) {
		t.Fatalf("server down: %v", err)
	}
	if m.sent.Load() != 1 {
		t.Fatal("the mailer ran with the server down")
	}
	before := testutil.ToFloat64(UnprotectedRuns.WithLabelValues("mail.invoice"))
	res, err := Do(ctx, c, "mail.invoice", "order-10.invoice", Options{FailOpen: true}, m.send(0))
	if err != nil || !res.Unprotected || m.sent.Load() != 2 {
		t.Fatalf("FailOpen: %+v %v, mails %d", res, err, m.sent.Load())
	}
	if after := testutil.ToFloat64(UnprotectedRuns.WithLabelValues("mail.invoice")); after != before+1 {
		t.Fatalf("sepp_effect_unprotected_total went from %v to %v", before, after)
	}
}

func TestReleaseAndCrashedHolder(t *testing.T) {
	t.Parallel()
	_, c := connect(t, "")
	ctx := context.Background()
	var m mailer
	calls := 0
	flaky := func(ctx context.Context) ([]byte, error) {
		calls++
		if calls == 1 {
			return nil, errors.New("smtp timeout")
		}
		return m.send(0)(ctx)
	}
	if _, err := Do(ctx, c, "mail.invoice", "k", Options{}, flaky); err == nil || err.Error() != "smtp timeout" {
		t.Fatalf("failed effect: %v", err)
	}
	res, err := Do(ctx, c, "mail.invoice", "k", Options{}, flaky)
	if err != nil || res.Replayed || m.sent.Load() != 1 {
		t.Fatalf("retry after a released claim: %+v %v", res, err)
	}

	// A holder that crashes: its lease ends, the next claim acquires, and
	// the old token is refused.
	old, err := c.ClaimEffect(ctx, sepp.ClaimEffectRequest{Scope: "mail.invoice", Key: "crash", Lease: 200 * time.Millisecond})
	if err != nil || old.State != sepp.EffectAcquired {
		t.Fatalf("claim: %+v %v", old, err)
	}
	res, err = Do(ctx, c, "mail.invoice", "crash", Options{WaitTimeout: 5 * time.Second}, m.send(0))
	if err != nil || res.Replayed {
		t.Fatalf("claim after the crashed holder's lease: %+v %v", res, err)
	}
	if _, err := c.CompleteEffect(ctx, old.Token, []byte("late")); !errors.Is(err, sepp.ErrLeaseLost) {
		t.Fatalf("the crashed holder's late complete: %v", err)
	}
	if r, _ := c.GetEffect(ctx, "mail.invoice", "crash"); string(r.Result) != "em_2" {
		t.Fatalf("record after a late complete: %+v", r)
	}
}

func TestConcurrentClaimsRunOnce(t *testing.T) {
	t.Parallel()
	_, c := connect(t, "")
	ctx := context.Background()
	var m mailer
	const n = 32
	results := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := Do(ctx, c, "mail.invoice", "order-9.invoice", Options{}, m.send(50*time.Millisecond))
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = string(res.Value)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r != "em_1" {
			t.Fatalf("goroutine %d got %q, want em_1", i, r)
		}
	}
	if m.sent.Load() != 1 {
		t.Fatalf("the action ran %d times, want 1", m.sent.Load())
	}
}

func TestDoJSON(t *testing.T) {
	t.Parallel()
	_, c := connect(t, "")
	type receipt struct {
		ID    string `json:"id"`
		Cents int    `json:"cents"`
	}
	runs := 0
	charge := func(ctx context.Context) (receipt, error) { runs++; return receipt{"ch_1", 1999}, nil }
	for range 2 {
		r, err := DoJSON(context.Background(), c, "payments.charge", "order-9.charge", Options{}, charge)
		if err != nil || r != (receipt{"ch_1", 1999}) {
			t.Fatalf("DoJSON: %+v %v", r, err)
		}
	}
	if runs != 1 {
		t.Fatalf("charged %d times", runs)
	}
}

func TestLeaseExtendedWhileTheEffectRuns(t *testing.T) {
	t.Parallel()
	_, c := connect(t, "")
	ctx := context.Background()
	var m mailer
	done := make(chan error, 1)
	go func() {
		_, err := Do(ctx, c, "mail.invoice", "slow", Options{Lease: 150 * time.Millisecond}, m.send(600*time.Millisecond))
		done <- err
	}()
	time.Sleep(400 * time.Millisecond) // past two original leases
	_, err := Do(ctx, c, "mail.invoice", "slow", Options{InFlight: Raise}, m.send(0))
	if !errors.Is(err, ErrInProgress) {
		t.Fatalf("a claim while the holder runs past its first lease: %v; want in progress (the lease is extended)", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m.sent.Load() != 1 {
		t.Fatalf("%d mails", m.sent.Load())
	}
}
