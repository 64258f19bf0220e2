// Command invoicelab plays three cases of handler-side idempotency against a
// real Sepp server and prints, for each, how many mails went out: a worker
// that sends an invoice mail and dies before its ack, two workers running
// one job at once (effect.Wait and effect.Raise), and an effect key built
// three ways. docs/effects.md explains each case; effect/effect_test.go
// asserts the same figures.
//
//	go run ./examples/invoicelab               # starts a server in this process
//	go run ./examples/invoicelab -addr http://127.0.0.1:50051
//
// Every scenario uses the real API: jobs are enqueued and reserved under
// leases, a "crash" is a worker that stops before it acknowledges, and the
// mailer is a counter that returns receipts em_1, em_2, ...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/effect"
	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/server"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

// lease is the job lease of each case's queue: short, so redeliveries come fast.
const lease = 300 * time.Millisecond

func main() {
	addr := flag.String("addr", "", "a running Sepp server; empty: start one in this process on a temporary directory")
	flag.Parse()
	ctx := context.Background()
	target := *addr
	if target == "" {
		stop, started, err := startServer()
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
		target = started
	}
	c, err := sepp.Connect(ctx, target)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	lab := &lab{c: c, run: fmt.Sprint(time.Now().UnixNano())}

	fmt.Println("The crash before the ack")
	fmt.Println()
	for _, guarded := range []bool{false, true} {
		name := "plain handler"
		if guarded {
			name = "handler under an effect key = job id"
		}
		deliveries, mails := lab.crashBeforeAck(ctx, guarded)
		fmt.Printf("%-45s deliveries=%d  mails sent=%d\n", name, deliveries, mails)
	}

	fmt.Println()
	fmt.Println("Two workers, one job")
	fmt.Println()
	for _, mode := range []effect.Mode{effect.Wait, effect.Raise} {
		name := map[effect.Mode]string{effect.Wait: "in_flight='wait'", effect.Raise: "in_flight='raise'"}[mode]
		a, b, mails := lab.twoWorkers(ctx, mode)
		fmt.Printf("%-20s {'A': '%s', 'B': '%s'}   mails sent=%d\n", name, a, b, mails)
	}

	fmt.Println()
	fmt.Println("What the key is made of")
	fmt.Println()
	for _, k := range []struct{ label, key, note string }{
		{"key = job id: two jobs for order-9", "", "(the key must be the effect's identity, not the delivery's)"},
		{"key = 'order-9:invoice': the same two jobs", "order-9:invoice", "(a colon is an ordinary character in Sepp)"},
		{"key = 'order-9.invoice': the same two jobs", "order-9.invoice", ""},
	} {
		mails := lab.keyMadeOf(ctx, k.key)
		fmt.Printf("%-45s -> mails sent=%d   %s\n", k.label, mails, k.note)
	}
}

type lab struct {
	c   *sepp.Client
	run string
	n   int
}

// fresh names a queue and an effect scope for one scenario.
func (l *lab) fresh() (queue, scope string) {
	l.n++
	return fmt.Sprintf("lab-%s-%d", l.run, l.n), fmt.Sprintf("mail.invoice.%s.%d", l.run, l.n)
}

// mailer counts mails and returns receipts.
type mailer struct{ sent atomic.Int32 }

func (m *mailer) send(took time.Duration) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		n := m.sent.Add(1)
		time.Sleep(took)
		return []byte(fmt.Sprint("em_", n)), nil
	}
}

func (l *lab) reserve(ctx context.Context, queue string) sepp.Reservation {
	r, err := l.c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{queue}, Lease: lease, Wait: 10 * time.Second})
	if err != nil || len(r) != 1 {
		log.Fatalf("reserve from %s: %v %v", queue, r, err)
	}
	return r[0]
}

// crashBeforeAck: the worker sends the mail and dies before Complete; the
// lease ends and the job is delivered again.
func (l *lab) crashBeforeAck(ctx context.Context, guarded bool) (deliveries int32, mails int32) {
	queue, scope := l.fresh()
	if _, err := l.c.Enqueue(ctx, sepp.EnqueueRequest{Queue: queue, JobType: "invoice", Payload: []byte("order-9")}); err != nil {
		log.Fatal(err)
	}
	var m mailer
	handle := func(r sepp.Reservation) []byte {
		if !guarded {
			v, _ := m.send(0)(ctx)
			return v
		}
		res, err := effect.Do(ctx, l.c, scope, r.Job.ID, effect.Options{TTL: time.Hour}, m.send(0))
		if err != nil {
			log.Fatal(err)
		}
		return res.Value
	}
	handle(l.reserve(ctx, queue)) // then the worker dies: no Complete
	second := l.reserve(ctx, queue)
	receipt := handle(second)
	if err := l.c.Complete(ctx, second.Job.ID, second.LeaseToken, receipt); err != nil {
		log.Fatal(err)
	}
	return second.Attempt, m.sent.Load()
}

// twoWorkers: worker A is slow, the job's lease ends, worker B gets the same
// job while A still runs the effect.
func (l *lab) twoWorkers(ctx context.Context, mode effect.Mode) (a, b string, mails int32) {
	queue, scope := l.fresh()
	if _, err := l.c.Enqueue(ctx, sepp.EnqueueRequest{Queue: queue, JobType: "invoice"}); err != nil {
		log.Fatal(err)
	}
	var m mailer
	opts := effect.Options{TTL: time.Hour, InFlight: mode}
	l.reserve(ctx, queue) // A's delivery
	aDone := make(chan string)
	go func() {
		res, err := effect.Do(ctx, l.c, scope, "order-9.invoice", opts, m.send(3*lease))
		if err != nil {
			log.Fatal(err)
		}
		aDone <- string(res.Value)
	}()
	bJob := l.reserve(ctx, queue) // after A's job lease ended
	res, err := effect.Do(ctx, l.c, scope, "order-9.invoice", opts, m.send(0))
	switch {
	case err == nil:
		b = string(res.Value)
		a = <-aDone
	case errors.Is(err, effect.ErrInProgress):
		b = "in progress, requeue"
		if _, err := l.c.Fail(ctx, bJob.Job.ID, bJob.LeaseToken, err.Error(), sepp.FailOptions{}); err != nil {
			log.Fatal(err)
		}
		a = <-aDone
		// The next delivery replays A's receipt.
		next := l.reserve(ctx, queue)
		res, err := effect.Do(ctx, l.c, scope, "order-9.invoice", opts, m.send(0))
		if err != nil || string(res.Value) != a {
			log.Fatalf("the delivery after the requeue: %+v %v", res, err)
		}
		l.c.Complete(ctx, next.Job.ID, next.LeaseToken, res.Value)
	default:
		log.Fatal(err)
	}
	return a, b, m.sent.Load()
}

// keyMadeOf: two jobs for order 9, handled under key (or, when key is
// empty, under each job's id).
func (l *lab) keyMadeOf(ctx context.Context, key string) int32 {
	queue, scope := l.fresh()
	var m mailer
	for i := range 2 {
		if _, err := l.c.Enqueue(ctx, sepp.EnqueueRequest{Queue: queue, JobType: "invoice", Payload: []byte(fmt.Sprint("order-9 #", i))}); err != nil {
			log.Fatal(err)
		}
	}
	for range 2 {
		r := l.reserve(ctx, queue)
		k := key
		if k == "" {
			k = r.Job.ID
		}
		res, err := effect.Do(ctx, l.c, scope, k, effect.Options{TTL: time.Hour}, m.send(0))
		if err != nil {
			log.Fatal(err)
		}
		if err := l.c.Complete(ctx, r.Job.ID, r.LeaseToken, res.Value); err != nil {
			log.Fatal(err)
		}
	}
	return m.sent.Load()
}

// startServer runs a real Sepp server in this process on a temporary data
// directory and a random loopback port.
func startServer() (stop func(), addr string, err error) {
	dir, err := os.MkdirTemp("", "invoicelab-")
	if err != nil {
		return nil, "", err
	}
	st, err := pebble.Open(context.Background(), pebble.Options{Path: dir})
	if err != nil {
		return nil, "", err
	}
	cfg := config.Default()
	srv, err := server.New(server.Options{Config: &cfg, Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
		st.Close()
		os.RemoveAll(dir)
	}, "http://" + ln.Addr().String(), nil
}
