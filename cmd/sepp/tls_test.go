package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/testserver"
)

// TestCLITLSFlags: client commands reach an https:// server with --ca-file,
// and a mutual-TLS one with --cert-file and --key-file (or their SEPP_*
// variables); without the client certificate the call fails.
func TestCLITLSFlags(t *testing.T) {
	ca := testserver.NewCA(t, "Sepp Test CA")
	clientCA := testserver.NewCA(t, "Sepp Client CA")
	srv := testserver.Start(t, testserver.Options{Config: "[server]\n" + testserver.TLSConfig(ca.Server(t, "server"), clientCA) +
		"\n[[webhooks]]\npath = \"/hooks/plain\"\nqueue = \"events\"\njob_type = \"plain.event\"\n"})
	client := clientCA.Client(t, "cli")

	out, _, err := cli(t, "queues", "--addr", srv.URL, "--token", "t0ken", "--ca-file", ca.File, "--cert-file", client.CertFile, "--key-file", client.KeyFile)
	if err != nil {
		t.Fatalf("queues with --ca-file, --cert-file, --key-file: %v\n%s", err, out)
	}
	if _, _, err := cli(t, "queues", "--addr", srv.URL, "--ca-file", ca.File, "--timeout", "3s"); err == nil {
		t.Error("queues without a client certificate: no error")
	}
	if _, _, err := cli(t, "queues", "--addr", srv.URL, "--ca-file", ca.File, "--cert-file", client.CertFile); err == nil || !strings.Contains(err.Error(), "--key-file") {
		t.Errorf("--cert-file without --key-file: %v", err)
	}
	if _, _, err := cli(t, "queues", "--addr", "http://"+srv.Addr, "--ca-file", ca.File); err == nil || !strings.Contains(err.Error(), "https://") {
		t.Errorf("--ca-file with an http:// address: %v", err)
	}

	// sepp webhook test takes the TLS flags too.
	out, _, err = cli(t, "webhook", "test", "--addr", srv.URL, "--ca-file", ca.File, "--cert-file", client.CertFile, "--key-file", client.KeyFile,
		"--path", "/hooks/plain", "--key", "tls-1", "--body", `{"n":1}`)
	if err != nil || !strings.Contains(out, "202 Accepted") {
		t.Fatalf("webhook test over mutual TLS: %v\n%s", err, out)
	}

	t.Setenv("SEPP_ADDR", srv.URL)
	t.Setenv("SEPP_CA_FILE", ca.File)
	t.Setenv("SEPP_CERT_FILE", client.CertFile)
	t.Setenv("SEPP_KEY_FILE", client.KeyFile)
	t.Setenv("SEPP_TOKEN", "t0ken")
	if out, _, err := cli(t, "jobs", "list"); err != nil {
		t.Fatalf("jobs list with SEPP_CA_FILE, SEPP_CERT_FILE, SEPP_KEY_FILE: %v\n%s", err, out)
	}
}

// TestServeCheckConfigTLS: --check-config loads the TLS files.
func TestServeCheckConfigTLS(t *testing.T) {
	ca := testserver.NewCA(t, "Sepp Test CA")
	cert := ca.Server(t, "server")
	other := ca.Server(t, "other")
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "sepp.toml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("[server]\n" + testserver.TLSConfig(cert, ca))
	if out, _, err := cli(t, "serve", "--check-config", "--config", good); err != nil || !strings.HasSuffix(out, ": OK\n") {
		t.Fatalf("good TLS config: %q %v", out, err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"missing cert", "[server]\ntls_cert_file = \"" + filepath.Join(dir, "nope.pem") + "\"\ntls_key_file = \"" + cert.KeyFile + "\"\n", "sepp.toml:2: server.tls_cert_file: cannot read " + filepath.Join(dir, "nope.pem") + ": no such file"},
		{"key of another cert", "[server]\ntls_cert_file = \"" + cert.CertFile + "\"\ntls_key_file = \"" + other.KeyFile + "\"\n", "sepp.toml:2: server.tls_cert_file: " + cert.CertFile + " with the key in " + other.KeyFile + ": tls: private key does not match public key"},
		{"CA file without certificates", "[server]\n" + testserver.TLSConfig(cert, nil) + "tls_client_ca_file = \"" + cert.KeyFile + "\"\n", "sepp.toml:4: server.tls_client_ca_file: " + cert.KeyFile + " holds no PEM certificate"},
		{"cert without key", "[server]\n\ntls_cert_file = \"" + cert.CertFile + "\"\n", "sepp.toml:3: server.tls_cert_file: is set but tls_key_file is not"},
	} {
		p := write(tc.body)
		_, _, err := cli(t, "serve", "--check-config", "--config", p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// servedCN returns the common name of the certificate the server at addr
// serves, verified against ca.
func servedCN(t *testing.T, addr string, ca *testserver.CA) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool})
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestTLSReloadOnSIGHUP: the real binary serves the certificate files it was
// started with; after they change, SIGHUP makes it serve the new ones. A
// reload of files that do not load keeps the old certificate and logs why.
func TestTLSReloadOnSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary; skipped with -short")
	}
	ca := testserver.NewCA(t, "Sepp Test CA")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	install := func(certPEM, keyPEM []byte) {
		t.Helper()
		// Each file is replaced whole (rename), as a certificate manager does.
		for _, f := range []struct {
			path string
			data []byte
		}{{keyFile, keyPEM}, {certFile, certPEM}} {
			if err := os.WriteFile(f.path+".tmp", f.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(f.path+".tmp", f.path); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	install(read(first.CertFile), read(first.KeyFile))
	cfgFile := filepath.Join(dir, "sepp.toml")
	os.WriteFile(cfgFile, []byte("[server]\ntls_cert_file = \""+certFile+"\"\ntls_key_file = \""+keyFile+"\"\n"), 0o644)
	logf, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p := &serverProcess{t: t, bin: buildSepp(t), addr: freePort(t), data: t.TempDir(), log: logf,
		args: []string{"--config", cfgFile, "--log-level", "info"}}
	p.start()
	defer p.signal(syscall.SIGTERM)
	logs := func() string { return string(read(logf.Name())) }

	if cn := servedCN(t, p.addr, ca); cn != "first" {
		t.Fatalf("served %q, want first", cn)
	}
	waitLog := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(logs(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log:\n%s", what, logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitLog("TLS certificate loaded")
	if !strings.Contains(logs(), `subject="CN=first"`) || !strings.Contains(logs(), "not_after=") {
		t.Errorf("the start's log line lacks the subject or the expiry:\n%s", logs())
	}

	// A broken certificate file: the reload fails, the old one stays.
	install([]byte("not a certificate"), read(second.KeyFile))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("TLS reload failed")
	if cn := servedCN(t, p.addr, ca); cn != "first" {
		t.Fatalf("after a failed reload: served %q, want first", cn)
	}

	// The new pair: SIGHUP swaps it in.
	install(read(second.CertFile), read(second.KeyFile))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("TLS certificate reloaded")
	if cn := servedCN(t, p.addr, ca); cn != "second" {
		t.Fatalf("after SIGHUP: served %q, want second", cn)
	}
	if !strings.Contains(logs(), `subject="CN=second"`) {
		t.Errorf("the reload's log line lacks the new subject:\n%s", logs())
	}
	if p.cmd.ProcessState != nil {
		t.Fatal("the server exited")
	}
}

// TestCLITransportErrors: the real binary says what is wrong with the
// address or the CA when a TLS handshake can tell (exit 1: a mistake to fix,
// not an outage), and keeps the hint to start a server for a refused
// connection (exit 4).
func TestCLITransportErrors(t *testing.T) {
	skipShort(t)
	ca := testserver.NewCA(t, "Sepp Test CA")
	other := testserver.NewCA(t, "Some Other CA")
	tlsSrv := testserver.Start(t, testserver.Options{Config: "[server]\n" + testserver.TLSConfig(ca.Server(t, "server"), nil)})
	plain := testserver.Start(t, testserver.Options{})
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"http:// to a TLS server", []string{"--addr", "http://" + tlsSrv.Addr}, 1,
			"sepp: cannot reach the server at http://" + tlsSrv.Addr + ": the server speaks TLS: use https://" + tlsSrv.Addr + "\n"},
		{"https:// without --ca-file", []string{"--addr", tlsSrv.URL}, 1,
			"sepp: cannot reach the server at " + tlsSrv.URL + `: the server's certificate is not signed by a CA you trust: pass --ca-file with the PEM certificate of the CA that signed it ("Sepp Test CA") (or set SEPP_CA_FILE)` + "\n"},
		{"https:// with another CA", []string{"--addr", tlsSrv.URL, "--ca-file", other.File}, 1,
			"sepp: cannot reach the server at " + tlsSrv.URL + ": the server's certificate is not signed by a CA you trust (--ca-file " + other.File + `): pass --ca-file with the PEM certificate of the CA that signed it ("Sepp Test CA")` + "\n"},
		{"https:// to a plain server", []string{"--addr", "https://" + plain.Addr}, 1,
			"sepp: cannot reach the server at https://" + plain.Addr + ": the server does not speak TLS: use http://" + plain.Addr + "\n"},
		{"refused", []string{"--addr", "http://127.0.0.1:1"}, 4, "(is the server running? start it with: sepp serve)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := binRun(t, nil, append([]string{"queues", "--timeout", "5s"}, tc.args...)...)
			if code != tc.code || out != "" || !strings.HasSuffix(errOut, tc.want) {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s\nwant stderr ending %q", code, tc.code, out, errOut, tc.want)
			}
			if tc.code == 1 && strings.Contains(errOut, "sepp serve") {
				t.Errorf("the hint to start a server, for a server that runs:\n%s", errOut)
			}
		})
	}
	_, errOut, code := binRun(t, nil, "queues", "--addr", "http://"+tlsSrv.Addr, "--json")
	if e := jsonErr(t, "http:// to TLS --json", errOut); code != 1 || !strings.Contains(e.Message, "the server speaks TLS: use https://") {
		t.Errorf("http:// to a TLS server --json: exit %d\n%s", code, errOut)
	}
	if out, errOut, code := binRun(t, nil, "queues", "--addr", tlsSrv.URL, "--ca-file", ca.File); code != 0 {
		t.Errorf("https:// with the right --ca-file: exit %d\n%s%s", code, out, errOut)
	}
}
