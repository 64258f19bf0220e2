package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sort"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/clock/clocktest"
	"github.com/sepp-dev/sepp/internal/server"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// fuzzMethod is one unary method of the API, for FuzzRequests.
type fuzzMethod struct {
	path     string // "/sepp.v1.JobService/Enqueue"
	req, res protoreflect.MessageType
}

// fuzzMethods lists every unary method of Sepp's services, sorted by path,
// so that an input's first byte names the same method from run to run.
func fuzzMethods(t testing.TB) []fuzzMethod {
	var out []fuzzMethod
	for _, fd := range []protoreflect.FileDescriptor{seppv1.File_sepp_v1_job_proto, seppv1.File_sepp_v1_worker_proto,
		seppv1.File_sepp_v1_effect_proto, seppv1.File_sepp_v1_admin_proto} {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				if md.IsStreamingClient() || md.IsStreamingServer() {
					continue
				}
				req, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
				if err != nil {
					t.Fatal(err)
				}
				res, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fuzzMethod{path: "/" + string(sd.FullName()) + "/" + string(md.Name()), req: req, res: res})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// fuzzMaxWaitMs bounds the wait_ms of fuzzed calls, so that one input cannot
// hold the fuzzer for minutes.
const fuzzMaxWaitMs = 20

// FuzzRequests sends arbitrary requests, each through a real client
// connection to a real server over a real Pebble store: the input's first
// byte picks the method, the rest is the request message (inputs that do not
// decode are skipped). No call may panic or answer Internal, and the server
// must still answer an enqueue after each.
func FuzzRequests(f *testing.F) {
	methods := fuzzMethods(f)
	// Seeds: the empty request of every method; more are in
	// testdata/fuzz/FuzzRequests.
	for i := range methods {
		f.Add([]byte{byte(i)})
	}
	srv := testserver.Start(f, testserver.Options{Config: "[[queues]]\nname = \"victim\"\n[limits]\nmax_long_polls = 64\n"})
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close() })
	jobs := seppv1.NewJobServiceClient(conn)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		m := methods[int(in[0])%len(methods)]
		req := m.req.New().Interface()
		if err := proto.Unmarshal(in[1:], req); err != nil {
			return
		}
		if fd := req.ProtoReflect().Descriptor().Fields().ByName("wait_ms"); fd != nil {
			if req.ProtoReflect().Get(fd).Int() > fuzzMaxWaitMs {
				req.ProtoReflect().Set(fd, protoreflect.ValueOfInt64(fuzzMaxWaitMs))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res := m.res.New().Interface()
		err := conn.Invoke(ctx, m.path, req, res)
		if code, reason := grpcReason(err); code == codes.Internal || code == codes.Unknown || reason == "INTERNAL" {
			t.Fatalf("%s %v: %v", m.path, req, err)
		}
		if _, err := jobs.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "victim", JobType: "t"}); err != nil {
			t.Fatalf("enqueue after %s %v: %v", m.path, req, err)
		}
	})
}

// fuzzSplitterTimeout is the sniff timeout of FuzzSplitter's splitter.
const fuzzSplitterTimeout = 100 * time.Millisecond

// FuzzSplitter sends arbitrary first bytes on a real loopback connection to
// a PrefaceSplitter: it must hand the connection to one of its listeners or
// close it, within its timeout, and never panic. Each connection handed on
// is closed at once, so the client sees its connection end either way.
func FuzzSplitter(f *testing.F) {
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	f.Add([]byte("POST /sepp.v1.JobService/Enqueue HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte("PRI * HTTP/2.0\r\n"))
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05})
	f.Add([]byte("GET"))
	f.Add([]byte{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	sp := server.NewPrefaceSplitter(ln, fuzzSplitterTimeout)
	served := make(chan error, 1)
	go func() { served <- sp.Serve() }()
	accepted := make(chan struct{}, 2)
	for _, l := range []net.Listener{sp.HTTP2(), sp.Other()} {
		go func() {
			defer func() { accepted <- struct{}{} }()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	f.Cleanup(func() {
		sp.Close()
		<-accepted
		<-accepted
		if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
			f.Errorf("Serve: %v", err)
		}
	})
	addr := sp.Addr().String()
	f.Fuzz(func(t *testing.T, first []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if len(first) > 0 {
			if _, err := c.Write(first); err != nil {
				return // closed already
			}
		}
		// The connection must end: handed on or closed by the sniff
		// timeout; nothing else ends it, so a read still waiting
		// clocktest.HangGuard past the timeout shows it never would. What
		// the splitter sends first (its SETTINGS frame) is read and
		// dropped.
		start := time.Now()
		c.SetReadDeadline(start.Add(fuzzSplitterTimeout + clocktest.HangGuard))
		_, err = io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("first bytes %q: the connection was neither handed on nor closed after %v", first, time.Since(start))
		}
	})
}
