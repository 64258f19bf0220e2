package server_test

import (
	"context"
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
