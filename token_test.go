package sepp_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// authRecorder is a gRPC server that records the authorization metadata of
// every call, and answers the health check.
type authRecorder struct {
	mu    sync.Mutex
	calls map[string][]string // method → authorization values
}

func (a *authRecorder) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	a.mu.Lock()
	a.calls[info.FullMethod] = append(a.calls[info.FullMethod], md.Get("authorization")...)
	a.mu.Unlock()
	return handler(ctx, req)
}

func (a *authRecorder) get(method string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[method]
}

func startRecorder(t *testing.T, creds credentials.TransportCredentials) (*authRecorder, string) {
	t.Helper()
	rec := &authRecorder{calls: map[string][]string{}}
	opts := []grpc.ServerOption{grpc.UnaryInterceptor(rec.intercept)}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	seppv1.RegisterJobServiceServer(gs, seppv1.UnimplementedJobServiceServer{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); gs.Serve(ln) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return rec, ln.Addr().String()
}

// TestTokenSentOnEveryRPC: Config.Token goes out as "authorization: Bearer
// <token>" on the health check and on every call, over cleartext http://
// and over https://.
func TestTokenSentOnEveryRPC(t *testing.T) {
	ca := testserver.NewCA(t, "Sepp Test CA")
	cert := ca.Server(t, "recorder")
	for _, tc := range []struct {
		name   string
		scheme string
		creds  credentials.TransportCredentials
		tls    *tls.Config
	}{
		{"http", "http://", nil, nil},
		{"https", "https://", credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert.TLS}}), &tls.Config{RootCAs: ca.Pool}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, addr := startRecorder(t, tc.creds)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := sepp.NewClient(ctx, tc.scheme+addr, sepp.Config{Token: "s3cret-token", TLS: tc.tls, FailFast: true, DisableBatching: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The recorder does not implement Enqueue: the call fails, but
			// its metadata went out.
			c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "q", JobType: "t", IdempotencyKey: sepp.Key("k")})
			for _, m := range []string{"/grpc.health.v1.Health/Check", "/sepp.v1.JobService/Enqueue"} {
				got := rec.get(m)
				if len(got) == 0 {
					t.Errorf("%s: no authorization metadata", m)
				}
				for _, v := range got {
					if v != "Bearer s3cret-token" {
						t.Errorf("%s: authorization %q, want Bearer s3cret-token on each call", m, got)
					}
				}
			}
		})
	}
	t.Run("no token", func(t *testing.T) {
		rec, addr := startRecorder(t, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := sepp.NewClient(ctx, "http://"+addr, sepp.Config{FailFast: true})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if got := rec.get("/grpc.health.v1.Health/Check"); len(got) != 0 {
			t.Errorf("authorization %q sent without Config.Token", got)
		}
	})
	t.Run("TLS config for http://", func(t *testing.T) {
		_, err := sepp.NewClient(context.Background(), "http://127.0.0.1:1", sepp.Config{TLS: &tls.Config{}, FailFast: true})
		if err == nil || !strings.Contains(err.Error(), "https://") {
			t.Errorf("err = %v, want one that asks for https://", err)
		}
	})
}
