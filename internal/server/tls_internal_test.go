package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/sepp-dev/sepp/internal/clock/clocktest"
	"github.com/sepp-dev/sepp/internal/config"
)

// testCert is a certificate for TLS tests: a CA when parent is nil,
// otherwise one parent signs (for 127.0.0.1).
type testCert struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func newTestCert(t *testing.T, cn string, parent *testCert) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: n, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	signer, signKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	} else {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		signer, signKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCert{cert: c, key: key, der: der}
}

func (c *testCert) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

func (c *testCert) tls() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.der}, PrivateKey: c.key, Leaf: c.cert}
}

// write writes the certificate (and, with keyPath, its key) as PEM.
func (c *testCert) write(t *testing.T, certPath, keyPath string) {
	t.Helper()
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if keyPath != "" {
		k, _ := x509.MarshalPKCS8PrivateKey(c.key)
		if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTLSStateReachesBothServers: behind the splitter's handshake, net/http
// handlers see r.TLS (HTTP/1.1 and HTTP/2) and gRPC handlers see the peer's
// credentials.TLSInfo, with the client certificate of mutual TLS.
func TestTLSStateReachesBothServers(t *testing.T) {
	ca := newTestCert(t, "ca", nil)
	srvCert, cliCert := newTestCert(t, "server", ca), newTestCert(t, "client", ca)
	dir := t.TempDir()
	sc := config.ServerConfig{TLSCertFile: filepath.Join(dir, "c.pem"), TLSKeyFile: filepath.Join(dir, "k.pem"), TLSClientCAFile: filepath.Join(dir, "ca.pem")}
	srvCert.write(t, sc.TLSCertFile, sc.TLSKeyFile)
	ca.write(t, sc.TLSClientCAFile, "")
	rl, err := newTLSReloader(&config.Config{Server: sc}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp := NewPrefaceSplitter(ln, 5*time.Second)
	sp.SetTLS(rl.config(), nil)

	var mu sync.Mutex
	seen := map[string]string{} // protocol → client certificate CN
	record := func(proto string, st *tls.ConnectionState) {
		mu.Lock()
		defer mu.Unlock()
		cn := "(no TLS)"
		if st != nil {
			cn = "(no client certificate)"
			if len(st.PeerCertificates) > 0 {
				cn = st.PeerCertificates[0].Subject.CommonName
			}
		}
		seen[proto] = cn
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	hs := &http.Server{Protocols: protocols, ConnContext: httpConnContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			withTLSState(r)
			record(r.Proto, r.TLS)
		})}
	gs := grpc.NewServer(grpc.Creds(splitCreds{}), grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		var st *tls.ConnectionState
		if p, ok := peer.FromContext(ctx); ok {
			if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
				st = &ti.State
			}
		}
		record("grpc", st)
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); sp.Serve() }()
	go func() { defer wg.Done(); hs.Serve(sp.Other()) }()
	go func() { defer wg.Done(); gs.Serve(sp.HTTP2()) }()
	defer func() { sp.Close(); hs.Close(); gs.Stop(); wg.Wait() }()

	tc := &tls.Config{RootCAs: ca.pool(), Certificates: []tls.Certificate{cliCert.tls()}}
	for _, h2 := range []bool{false, true} {
		p := new(http.Protocols)
		p.SetHTTP1(!h2)
		p.SetHTTP2(h2)
		tr := &http.Transport{TLSClientConfig: tc, Protocols: p}
		resp, err := (&http.Client{Transport: tr}).Get("https://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
	}
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0", "grpc"} {
		if seen[proto] != "client" {
			t.Errorf("%s: the handler saw %q, want the client certificate", proto, seen[proto])
		}
	}
}

// TestTLSReloadSwapsClientCA: a reload takes a new client CA file as well:
// clients of the new CA get in, those of the old one no longer do; a reload
// that fails keeps both the certificate and the CA pool.
func TestTLSReloadSwapsClientCA(t *testing.T) {
	oldCA, newCA := newTestCert(t, "old-ca", nil), newTestCert(t, "new-ca", nil)
	srvCert := newTestCert(t, "server", oldCA)
	dir := t.TempDir()
	sc := config.ServerConfig{TLSCertFile: filepath.Join(dir, "c.pem"), TLSKeyFile: filepath.Join(dir, "k.pem"), TLSClientCAFile: filepath.Join(dir, "ca.pem")}
	srvCert.write(t, sc.TLSCertFile, sc.TLSKeyFile)
	oldCA.write(t, sc.TLSClientCAFile, "")
	rl, err := newTLSReloader(&config.Config{Server: sc}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	handshake := func(client *testCert) error {
		errc := make(chan error, 1)
		go func() {
			sc, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			defer sc.Close()
			sc.SetDeadline(time.Now().Add(5 * time.Second))
			errc <- tls.Server(sc, rl.config()).Handshake()
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		tc := tls.Client(c, &tls.Config{RootCAs: oldCA.pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{client.tls()}})
		tc.Handshake()
		err = <-errc
		c.Close()
		return err
	}
	oldClient, newClient := newTestCert(t, "old-client", oldCA), newTestCert(t, "new-client", newCA)
	if err := handshake(oldClient); err != nil {
		t.Fatalf("old CA's client before the reload: %v", err)
	}
	if err := handshake(newClient); err == nil {
		t.Fatal("new CA's client accepted before the reload")
	}
	os.WriteFile(sc.TLSClientCAFile, []byte("no certificates here"), 0o600)
	if err := rl.reload(); err == nil {
		t.Fatal("reload of a CA file without certificates: no error")
	}
	if err := handshake(oldClient); err != nil {
		t.Fatalf("old CA's client after a failed reload: %v", err)
	}
	newCA.write(t, sc.TLSClientCAFile, "")
	if err := rl.reload(); err != nil {
		t.Fatal(err)
	}
	if err := handshake(newClient); err != nil {
		t.Fatalf("new CA's client after the reload: %v", err)
	}
	if err := handshake(oldClient); err == nil {
		t.Fatal("old CA's client accepted after the reload")
	}
}

// TestSplitterTLSHandshakeTimeout: a connection that does not complete its
// TLS handshake within the sniff timeout is closed, and the failure is
// reported.
func TestSplitterTLSHandshakeTimeout(t *testing.T) {
	ca := newTestCert(t, "ca", nil)
	srvCert := newTestCert(t, "server", ca)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp := NewPrefaceSplitter(ln, 200*time.Millisecond)
	failed := make(chan error, 1)
	sp.SetTLS(&tls.Config{Certificates: []tls.Certificate{srvCert.tls()}}, func(_ net.Addr, err error) { failed <- err })
	done := make(chan error, 1)
	go func() { done <- sp.Serve() }()
	defer func() { sp.Close(); <-done }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0x16, 0x03}) // the start of a ClientHello, never finished
	// Only the splitter's timeout closes it: the client never sends more.
	c.SetReadDeadline(time.Now().Add(clocktest.HangGuard))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read data from a connection whose handshake never finished")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the splitter kept the connection open past its timeout")
	}
	select {
	case err := <-failed:
		if err == nil {
			t.Error("handshake failure reported as nil")
		}
	case <-time.After(clocktest.HangGuard):
		t.Error("handshake failure not reported")
	}
}
