package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// attacks are the attacks of the limit tests (limits_test.go,
// TestIdleConnectionsClosed), for BenchmarkEnqueueUnderAttack. config is
// added to the server's; start prepares the attack on srv and returns one
// call of it, which two goroutines repeat, or nil when the attack is what
// start left in place.
var attacks = []struct {
	name   string
	config string
	start  func(b *testing.B, srv *testserver.Server) func(ctx context.Context)
}{
	{name: "none", start: func(*testing.B, *testserver.Server) func(context.Context) { return nil }},
	{name: "reserve-20000-queues", start: func(b *testing.B, srv *testserver.Server) func(context.Context) {
		workers := seppv1.NewWorkerServiceClient(dialGRPC(b, srv))
		queues := make([]string, 20000)
		for i := range queues {
			queues[i] = fmt.Sprintf("queue-%05d", i)
		}
		return func(ctx context.Context) {
			workers.Reserve(ctx, &seppv1.ReserveRequest{Queues: queues, WaitMs: 15000})
		}
	}},
	{name: "unknown-queues", config: "[server]\nstrict = true\n", start: func(b *testing.B, srv *testserver.Server) func(context.Context) {
		jobs := seppv1.NewJobServiceClient(dialGRPC(b, srv))
		var n atomic.Int64
		return func(ctx context.Context) {
			jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: fmt.Sprintf("made-up-%d", n.Add(1)), JobType: "t"})
		}
	}},
	{name: "malformed-protobuf", start: func(b *testing.B, srv *testserver.Server) func(context.Context) {
		conn := dialGRPC(b, srv)
		return func(ctx context.Context) {
			for _, msg := range malformed {
				var out []byte
				conn.Invoke(ctx, "/sepp.v1.JobService/Enqueue", &msg, &out, grpc.ForceCodecV2(rawCodec{}))
			}
		}
	}},
	{name: "100MB-bodies", start: func(b *testing.B, srv *testserver.Server) func(context.Context) {
		return func(context.Context) { postBig(b, srv.URL+"/sepp.v1.JobService/Enqueue", 100<<20, false) }
	}},
	{name: "990-idle-connections", start: func(b *testing.B, srv *testserver.Server) func(context.Context) {
		for range 990 { // of the 1,000 one address may hold, the victim's among them
			c, err := net.Dial("tcp", srv.Addr)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
				b.Fatal(err)
			}
		}
		return nil
	}},
}

// BenchmarkEnqueueUnderAttack measures one client's enqueue (its own
// connection, one call at a time) while another attacks the server, with
// each attack of the limit tests, against none. The tests check that the
// attacks fail cleanly and that the victim is served; this says how fast.
// docs/benchmarks.md records the results.
func BenchmarkEnqueueUnderAttack(b *testing.B) {
	for _, a := range attacks {
		b.Run(a.name, func(b *testing.B) {
			srv := testserver.Start(b, testserver.Options{Config: victimConfig + a.config, RealTime: true})
			v := newVictim(b, srv)
			for range 10 { // warm up, and hold its connection before an attack takes the others
				v.enqueue()
			}
			call := a.start(b, srv)
			if call != nil {
				stop := startAttack(b, 2, call)
				defer stop()
			}
			for b.Loop() {
				v.enqueue()
			}
		})
	}
}
