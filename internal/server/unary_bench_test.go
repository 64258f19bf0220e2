package server_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// BenchmarkGRPCUnary is the round trip of a unary gRPC call over a real
// listener, client and server in this process: an Enqueue with a payload
// of the named size and no job type, which the handler refuses
// (INVALID_FIELD) before the store, so what it measures is the RPC path:
// reading the frames (frames.go), decoding, the interceptor and the
// answer. bench/fairlimits -run refusal measures the server's share alone.
func BenchmarkGRPCUnary(b *testing.B) {
	srv := testserver.Start(b, testserver.Options{})
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	jobs := seppv1.NewJobServiceClient(conn)
	for _, size := range []struct {
		name  string
		bytes int
	}{{"256B", 256}, {"260KB", 260 << 10}} {
		req := &seppv1.EnqueueRequest{Queue: "q", Payload: make([]byte, size.bytes)}
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(size.bytes))
			b.ReportAllocs()
			for b.Loop() {
				_, err := jobs.Enqueue(context.Background(), req)
				if status.Code(err) != codes.InvalidArgument {
					b.Fatalf("Enqueue without a job type: %v", err)
				}
			}
		})
	}
}

// BenchmarkReserveRefusalRoundTrip is the round trip of a Reserve naming
// 20,000 queues (260 KB), refused from its length before it is read
// (counts.go, frames.go), client and server in this process. With
// -cpuprofile it shows where a refusal's time goes: mostly the HTTP/2
// transport moving the bytes the client sent before the stream's reset
// reached it, on both sides.
func BenchmarkReserveRefusalRoundTrip(b *testing.B) {
	srv := testserver.Start(b, testserver.Options{})
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	workers := seppv1.NewWorkerServiceClient(conn)
	req := &seppv1.ReserveRequest{WorkerId: "w", MaxJobs: 1}
	for i := range 20000 {
		req.Queues = append(req.Queues, fmt.Sprintf("queue-%05d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		_, err := workers.Reserve(context.Background(), req)
		if status.Code(err) != codes.ResourceExhausted {
			b.Fatalf("Reserve naming 20,000 queues: %v", err)
		}
	}
}
