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
	"github.com/sepp-dev/sepp/internal/clock/clocktest"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// mailer counts the mails it sends and answers each with a receipt.
type mailer struct{ sent atomic.Int32 }

func (m *mailer) send(ctx context.Context) ([]byte, error) {
	n := m.sent.Add(1)
	return []byte(fmt.Sprint("em_", n)), nil
}

// slowSend is a mail that takes until the test says: it closes started
// when it begins, and sends once release is closed.
func (m *mailer) slowSend(started chan<- struct{}, release <-chan struct{}) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		close(started)
		<-release
		return m.send(ctx)
	}
}

// await returns once ch is closed, failing the test if it is not within
// clocktest.HangGuard (a hang: the event takes milliseconds).
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(clocktest.HangGuard):
		t.Fatalf("no %s after %v", what, clocktest.HangGuard)
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
				v, _ := m.send(ctx)
				return v
			}
			res, err := Do(ctx, c, "mail.invoice", r.Job.ID, Options{TTL: time.Hour}, m.send)
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
		srv, c := connect(t, "[[queues]]\nname = \"q\"\nlease_ms = 200\n")
		ctx := context.Background()
		c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "invoice"})
		var m mailer
		opts := Options{TTL: time.Hour, InFlight: mode}
		a := deliver(t, c)
		aStarted, aRelease := make(chan struct{}), make(chan struct{})
		aDone := make(chan string, 1)
		go func() {
			res, err := Do(ctx, c, "mail.invoice", "order-9.invoice", opts, m.slowSend(aStarted, aRelease))
			if err != nil {
				t.Error(err)
				aDone <- ""
				return
			}
			aDone <- string(res.Value)
		}()
		await(t, aStarted, "start of A's mail")
		b := deliver(t, c) // A's job lease (200 ms) ends while its mail is being sent
		if b.Job.ID != a.Job.ID || b.Attempt != 2 {
			t.Fatalf("B got %+v", b)
		}
		type result struct {
			res *Result
			err error
		}
		bDone := make(chan result, 1)
		go func() {
			res, err := Do(ctx, c, "mail.invoice", "order-9.invoice", opts, m.send)
			bDone <- result{res, err}
		}()
		if mode == Wait {
			// A finishes once B waits for it.
			testserver.Await(t, "B waiting for A", func() bool { return srv.WaitingEffectClaims("mail.invoice", "order-9.invoice") == 1 })
			close(aRelease)
		}
		br := <-bDone
		res, err := br.res, br.err
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
			close(aRelease)
			receiptA := <-aDone
			next := deliver(t, c)
			res, err := Do(ctx, c, "mail.invoice", "order-9.invoice", opts, m.send)
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
			if _, err := Do(ctx, c, scope, tc.key(ack.JobID), Options{}, m.send); err != nil {
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
		_, err := Do(ctx, c, "mail.invoice", key, Options{}, m.send)
		if !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("key of %d bytes: %v", len(key), err)
		}
	}
	if _, err := Do(ctx, c, "mail.invoice", strings.Repeat("k", 256), Options{}, m.send); err != nil {
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
	if _, err := Do(ctx, c, "mail.invoice", "order-10.invoice", Options{}, m.send); !errors.Is(err, sepp.ErrUnavailable) {
		t.Fatalf("server down: %v", err)
	}
	if m.sent.Load() != 1 {
		t.Fatal("the mailer ran with the server down")
	}
	before := testutil.ToFloat64(UnprotectedRuns.WithLabelValues("mail.invoice"))
	res, err := Do(ctx, c, "mail.invoice", "order-10.invoice", Options{FailOpen: true}, m.send)
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
		return m.send(ctx)
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
	res, err = Do(ctx, c, "mail.invoice", "crash", Options{WaitTimeout: 5 * time.Second}, m.send)
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

// TestConcurrentClaimsRunOnce: 32 calls for one key while its holder runs
// the effect: it runs once, and every call gets its result.
func TestConcurrentClaimsRunOnce(t *testing.T) {
	t.Parallel()
	srv, c := connect(t, "")
	ctx := context.Background()
	var m mailer
	const n = 32
	started, release := make(chan struct{}), make(chan struct{})
	results := make([]string, n)
	var wg sync.WaitGroup
	do := func(i int, fn func(context.Context) ([]byte, error)) {
		wg.Go(func() {
			res, err := Do(ctx, c, "mail.invoice", "order-9.invoice", Options{}, fn)
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = string(res.Value)
		})
	}
	do(0, m.slowSend(started, release))
	await(t, started, "start of the holder's mail")
	for i := 1; i < n; i++ {
		do(i, m.send)
	}
	// The holder's mail goes once every other call waits for it.
	testserver.Await(t, "31 calls waiting for the holder", func() bool {
		return srv.WaitingEffectClaims("mail.invoice", "order-9.invoice") == n-1
	})
	close(release)
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

// extensions is the server's store, telling the test of each effect lease
// extension it makes: the server's time of it.
type extensions struct {
	store.Store
	made chan time.Time
}

func (e *extensions) ExtendEffectLease(ctx context.Context, p *store.ExtendEffectLeaseParams) (time.Time, error) {
	until, err := e.Store.ExtendEffectLease(ctx, p)
	if err == nil {
		select {
		case e.made <- p.Now:
		default: // the test reads only the latest; more come every third of a lease
		}
	}
	return until, err
}

// TestLeaseExtendedWhileTheEffectRuns: Do extends its claim's lease while
// the effect runs, so a claim made after two of the original leases finds
// it in progress. The server runs on its test clock, moved in steps shorter
// than a lease, each once Do has extended the lease at the new time.
func TestLeaseExtendedWhileTheEffectRuns(t *testing.T) {
	t.Parallel()
	ext := &extensions{made: make(chan time.Time, 64)}
	srv := testserver.Start(t, testserver.Options{WrapStore: func(s store.Store) store.Store { ext.Store = s; return ext }})
	c, err := sepp.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	var m mailer
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Do(ctx, c, "mail.invoice", "slow", Options{Lease: 150 * time.Millisecond}, m.slowSend(started, release))
		done <- err
	}()
	await(t, started, "start of the mail")
	for range 3 { // to 300 ms: past two original leases
		srv.Clock.Advance(100 * time.Millisecond)
		extendedAt(t, ext.made, srv.Clock.Now())
	}
	_, err = Do(ctx, c, "mail.invoice", "slow", Options{InFlight: Raise}, m.send)
	if !errors.Is(err, ErrInProgress) {
		t.Fatalf("a claim while the holder runs past its first lease: %v; want in progress (the lease is extended)", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m.sent.Load() != 1 {
		t.Fatalf("%d mails", m.sent.Load())
	}
}

// extendedAt waits for an extension made at now or later.
func extendedAt(t *testing.T, made <-chan time.Time, now time.Time) {
	t.Helper()
	guard := time.After(clocktest.HangGuard)
	for {
		select {
		case at := <-made:
			if !at.Before(now) {
				return
			}
		case <-guard:
			t.Fatalf("no extension of the effect's lease at %v within %v", now, clocktest.HangGuard)
		}
	}
}
