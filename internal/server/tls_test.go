package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/gen/sepp/v1/seppv1connect"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// httpsClient is an HTTPS client that trusts roots and, with cert, presents
// it; http2 picks HTTP/2 (ALPN h2) instead of HTTP/1.1.
func httpsClient(t *testing.T, tc *tls.Config, http2 bool) *http.Client {
	t.Helper()
	p := new(http.Protocols)
	if http2 {
		p.SetHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	tr := &http.Transport{TLSClientConfig: tc, Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// connectEnqueue posts a Connect JSON Enqueue and returns the response's
// protocol and the job id.
func connectEnqueue(t *testing.T, hc *http.Client, url, key string) (proto string, jobID string) {
	t.Helper()
	resp, err := hc.Post(url+"/sepp.v1.JobService/Enqueue", "application/json",
		strings.NewReader(`{"queue":"tls","jobType":"t","idempotencyKey":"`+key+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("Enqueue over %s: %d %s", resp.Proto, resp.StatusCode, body)
	}
	if resp.TLS == nil {
		t.Fatalf("Enqueue over %s: not over TLS", resp.Proto)
	}
	var res struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.JobID == "" {
		t.Fatalf("Enqueue: %s (%v)", body, err)
	}
	return resp.Proto, res.JobID
}

// TestTLSOnePort: with tls_cert_file the one port serves, over TLS, gRPC
// (the Go client at https://), Connect JSON over HTTP/1.1 and HTTP/2, and
// gRPC-Web; a cleartext client gets nothing.
func TestTLSOnePort(t *testing.T) {
	ca := testserver.NewCA(t, "Sepp Test CA")
	cert := ca.Server(t, "sepp-test-server")
	srv := testserver.Start(t, testserver.Options{Config: "[server]\n" + testserver.TLSConfig(cert, nil)})
	if !strings.HasPrefix(srv.URL, "https://") {
		t.Fatalf("URL = %s", srv.URL)
	}
	if logs := srv.Logs.String(); !strings.Contains(logs, "TLS certificate loaded") || !strings.Contains(logs, "CN=sepp-test-server") {
		t.Errorf("no log line of the certificate loaded:\n%s", logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tc := &tls.Config{RootCAs: ca.Pool}

	// gRPC: the Go client.
	c, err := sepp.NewClient(ctx, srv.URL, sepp.Config{TLS: tc, FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ack, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "tls", JobType: "t", IdempotencyKey: sepp.Key("k-grpc")})
	if err != nil || ack.JobID == "" || ack.Deduplicated {
		t.Fatalf("Enqueue over gRPC: %+v, %v", ack, err)
	}

	// Connect JSON over HTTP/1.1 and HTTP/2; the second sees the first's key.
	proto, id1 := connectEnqueue(t, httpsClient(t, tc, false), srv.URL, "k-connect")
	if proto != "HTTP/1.1" {
		t.Errorf("proto = %s, want HTTP/1.1", proto)
	}
	h2 := httpsClient(t, tc, true)
	proto, id2 := connectEnqueue(t, h2, srv.URL, "k-connect")
	if proto != "HTTP/2.0" {
		t.Errorf("proto = %s, want HTTP/2.0", proto)
	}
	if id1 != id2 {
		t.Errorf("HTTP/2 enqueue got job %s, want the HTTP/1.1 one %s", id2, id1)
	}
	// A gRPC call on that HTTP/2 connection, which net/http serves since
	// its first request was Connect: it reaches the gRPC stack all the same.
	g, err := seppv1connect.NewJobServiceClient(h2, srv.URL, connect.WithGRPC()).GetJob(ctx, &seppv1.GetJobRequest{JobId: id1})
	if err != nil || g.GetJob().GetJobId() != id1 {
		t.Errorf("gRPC GetJob on the Connect connection: %v, %v", g, err)
	}
	// The gRPC key, seen over Connect: one store behind both stacks.
	if _, id := connectEnqueue(t, httpsClient(t, tc, true), srv.URL, "k-grpc"); id != ack.JobID {
		t.Errorf("Connect enqueue of k-grpc got job %s, want %s", id, ack.JobID)
	}

	// gRPC-Web, over HTTP/1.1 and HTTP/2.
	for _, h2 := range []bool{false, true} {
		web := seppv1connect.NewJobServiceClient(httpsClient(t, tc, h2), srv.URL, connect.WithGRPCWeb())
		res, err := web.Enqueue(ctx, &seppv1.EnqueueRequest{Queue: "tls", JobType: "t", IdempotencyKey: new("k-grpc")})
		if err != nil {
			t.Fatalf("gRPC-Web (HTTP/2 %v): %v", h2, err)
		}
		if res.GetJobId() != ack.JobID || !res.GetDeduplicated() {
			t.Errorf("gRPC-Web (HTTP/2 %v): %v, want the job %s deduplicated", h2, res, ack.JobID)
		}
	}

	// A cleartext HTTP/1.1 client is not served, and told why.
	plain := &http.Client{Timeout: 5 * time.Second}
	resp, err := plain.Post("http://"+srv.Addr+"/sepp.v1.JobService/Enqueue", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("cleartext request: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "use https://") {
		t.Errorf("cleartext request: %s %q, want 400 and a hint", resp.Status, body)
	}
	// A cleartext gRPC client gets nothing.
	if c2, err := sepp.NewClient(ctx, "http://"+srv.Addr, sepp.Config{FailFast: true}); err == nil {
		c2.Close()
		t.Error("a cleartext gRPC client connected to the TLS port")
	}
	// An untrusted server certificate fails the Go client.
	if c2, err := sepp.NewClient(ctx, srv.URL, sepp.Config{FailFast: true}); err == nil {
		c2.Close()
		t.Error("the client trusted a certificate the system roots did not sign")
	}
}

// TestMutualTLS: with tls_client_ca_file, a client without a certificate, or
// with one another CA signed, fails the handshake; one the CA signed works.
func TestMutualTLS(t *testing.T) {
	ca := testserver.NewCA(t, "Sepp Test CA")
	clientCA := testserver.NewCA(t, "Sepp Client CA")
	srv := testserver.Start(t, testserver.Options{Config: "[server]\n" + testserver.TLSConfig(ca.Server(t, "server"), clientCA)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	good := clientCA.Client(t, "worker-1")
	stranger := testserver.NewCA(t, "Other CA").Client(t, "stranger")
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		ok    bool
	}{
		{"no certificate", nil, false},
		{"certificate of another CA", []tls.Certificate{stranger.TLS}, false},
		{"certificate of the client CA", []tls.Certificate{good.TLS}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: ca.Pool, Certificates: tc.certs}
			// The handshake itself: with TLS 1.3 the client learns of the
			// refusal on its first read.
			conn, err := tls.Dial("tcp", srv.Addr, cfg.Clone())
			if err == nil {
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				conn.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("raw TLS: err = %v, want ok %v", err, tc.ok)
			}
			if !tc.ok {
				if err != nil && !strings.Contains(err.Error(), "certificate") {
					t.Logf("refused with: %v", err)
				}
			}
			c, err := sepp.NewClient(ctx, srv.URL, sepp.Config{TLS: cfg, FailFast: true})
			if err == nil {
				_, err = c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "mtls", JobType: "t", IdempotencyKey: sepp.Key(tc.name)})
				c.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("Go client: err = %v, want ok %v", err, tc.ok)
			}
			_, err = httpsClient(t, cfg, true).Get(srv.URL + "/metrics")
			if (err == nil) != tc.ok {
				t.Errorf("HTTP/2: err = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestTLSHandshakeOffTheAcceptLoop: a connection that never starts its handshake
// does not hold up other clients (the handshake runs in its own goroutine).
func TestTLSHandshakeOffTheAcceptLoop(t *testing.T) {
	ca := testserver.NewCA(t, "Sepp Test CA")
	srv := testserver.Start(t, testserver.Options{Config: "[server]\n" + testserver.TLSConfig(ca.Server(t, "server"), nil)})
	idle, err := net.Dial("tcp", srv.Addr) // sends nothing
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	resp, err := httpsClient(t, &tls.Config{RootCAs: ca.Pool}, false).Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatalf("a silent connection held up another client: %v", err)
	}
	resp.Body.Close()
}
