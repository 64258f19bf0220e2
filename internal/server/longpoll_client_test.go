package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// dialGRPCFrom opens a gRPC connection to srv from the local address ip
// (Linux routes all of 127.0.0.0/8 to the loopback interface), sending
// secret as a bearer token when it is not empty.
func dialGRPCFrom(t *testing.T, srv *testserver.Server, ip, secret string) *grpc.ClientConn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}),
	}
	if secret != "" {
		opts = append(opts, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
			cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+secret), method, req, reply, cc, opts...)
		}))
	}
	conn, err := grpc.NewClient(srv.Addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// holdLongPolls starts n Reserve calls on an empty queue over w, each
// waiting a minute, until ctx ends; those over a limit are refused and end.
func holdLongPolls(ctx context.Context, wg *sync.WaitGroup, w seppv1.WorkerServiceClient, n int) {
	for range n {
		wg.Go(func() {
			w.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"idle"}, WaitMs: 60000})
		})
	}
}

// TestLimitLongPollsPerClient: one address with many connections, each
// with as many waiting calls as a connection may hold, gets no more than
// limits.max_long_polls_per_client of the node's places, so another
// address's waiting Reserve is admitted and served (issue 22, point 4,
// at a smaller scale: 3 connections × 3 waiting calls against 5 per client
// and 8 in all).
func TestLimitLongPollsPerClient(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: `
[limits]
max_long_polls_per_connection = 3
max_long_polls_per_client = 5
max_long_polls = 8
`})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 3 {
		holdLongPolls(ctx, &wg, seppv1.NewWorkerServiceClient(dialGRPCFrom(t, srv, "127.0.0.1", "")), 3)
	}
	// A connection of the same address with no waiting call of its own is
	// refused once the address holds its 5.
	probe := seppv1.NewWorkerServiceClient(dialGRPCFrom(t, srv, "127.0.0.1", ""))
	awaitHeld(t, srv, 5, 0)
	_, err := probe.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"idle"}, WaitMs: 20})
	wantLimit(t, err, "limits.max_long_polls_per_client", 5)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "address 127.0.0.1") || !strings.Contains(msg, "wait_ms = 0") {
		t.Errorf("message %q does not name the client and what to do", msg)
	}

	// Another address waits, and gets the job enqueued meanwhile.
	other := dialGRPCFrom(t, srv, "127.0.0.2", "")
	got := make(chan error, 1)
	go func() {
		res, err := seppv1.NewWorkerServiceClient(other).Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"work"}, WaitMs: 60000})
		if err == nil && len(res.GetJobs()) != 1 {
			err = fmt.Errorf("Reserve returned %d jobs, want 1", len(res.GetJobs()))
		}
		got <- err
	}()
	if _, err := seppv1.NewJobServiceClient(other).Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "work", JobType: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the other address's waiting Reserve: %v", err)
	}
}

// TestLimitLongPollsPerToken: with [auth] tokens, a token is one client
// wherever its calls come from, and another token behind the same address
// is a client of its own.
func TestLimitLongPollsPerToken(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: authConfig("") + `
[limits]
max_long_polls_per_client = 2
`})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	holdLongPolls(ctx, &wg, seppv1.NewWorkerServiceClient(dialGRPCFrom(t, srv, "127.0.0.1", workerSecret)), 1)
	holdLongPolls(ctx, &wg, seppv1.NewWorkerServiceClient(dialGRPCFrom(t, srv, "127.0.0.2", workerSecret)), 1)
	probe := seppv1.NewWorkerServiceClient(dialGRPCFrom(t, srv, "127.0.0.3", workerSecret))
	awaitHeld(t, srv, 2, 0)
	_, err := probe.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"idle"}, WaitMs: 20})
	wantLimit(t, err, "limits.max_long_polls_per_client", 2)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, `token "work"`) {
		t.Errorf("message %q does not name the token", msg)
	}
	// The token "pay", from the first address, waits as it likes.
	pay := seppv1.NewWorkerServiceClient(dialGRPCFrom(t, srv, "127.0.0.1", paymentsSecret))
	if _, err := pay.Reserve(ctx, &seppv1.ReserveRequest{Queues: []string{"payments"}, WaitMs: 20}); err != nil {
		t.Fatalf("another token's waiting Reserve: %v", err)
	}
}
