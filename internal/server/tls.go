package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sepp-dev/sepp/internal/config"
)

// tlsFiles is what [server] tls_cert_file, tls_key_file and
// tls_client_ca_file loaded: the certificate the port serves and, for mutual
// TLS, the pool client certificates must chain to (nil: none asked for).
type tlsFiles struct {
	cert *tls.Certificate
	cas  *x509.CertPool
}

// loadTLSFiles loads the files c's [server] section names. Its errors
// start with where the key at fault was set ("sepp.toml:4:
// server.tls_cert_file: ").
func loadTLSFiles(c *config.Config) (*tlsFiles, error) {
	s := c.Server
	certPEM, err := os.ReadFile(s.TLSCertFile)
	if err != nil {
		return nil, fmt.Errorf("%scannot read %s: %v", c.Where("server.tls_cert_file"), s.TLSCertFile, pathErrText(err))
	}
	keyPEM, err := os.ReadFile(s.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("%scannot read %s: %v", c.Where("server.tls_key_file"), s.TLSKeyFile, pathErrText(err))
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s%s with the key in %s: %v; give a PEM certificate chain (server certificate first) and the PEM private key that matches it",
			c.Where("server.tls_cert_file"), s.TLSCertFile, s.TLSKeyFile, err)
	}
	if cert.Leaf == nil {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	f := &tlsFiles{cert: &cert}
	if s.TLSClientCAFile != "" {
		pem, err := os.ReadFile(s.TLSClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%scannot read %s: %v", c.Where("server.tls_client_ca_file"), s.TLSClientCAFile, pathErrText(err))
		}
		f.cas = x509.NewCertPool()
		if !f.cas.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s%s holds no PEM certificate; give the CA certificates (BEGIN CERTIFICATE blocks) that sign the client certificates",
				c.Where("server.tls_client_ca_file"), s.TLSClientCAFile)
		}
	}
	return f, nil
}

// pathErrText is err's text without the "open PATH:" the message already
// names.
func pathErrText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// CheckTLS loads the [server] TLS files as sepp serve would, for
// --check-config. Without TLS it returns nil.
func CheckTLS(cfg *config.Config) error {
	if !cfg.Server.TLS() {
		return nil
	}
	_, err := loadTLSFiles(cfg)
	return err
}

// tlsReloader serves the TLS files of [server] to every handshake, and
// loads them again on Reload: a handshake sees the old files or the new
// ones, never a mix, and a failed reload keeps the old ones.
type tlsReloader struct {
	cfg *config.Config
	log *slog.Logger
	cur atomic.Pointer[tlsFiles]
}

func newTLSReloader(cfg *config.Config, log *slog.Logger) (*tlsReloader, error) {
	f, err := loadTLSFiles(cfg)
	if err != nil {
		return nil, err
	}
	r := &tlsReloader{cfg: cfg, log: log}
	r.cur.Store(f)
	r.logLoaded("TLS certificate loaded", f)
	return r, nil
}

// reload loads the files again and swaps them in if they load.
func (r *tlsReloader) reload() error {
	f, err := loadTLSFiles(r.cfg)
	if err != nil {
		r.log.Error("TLS reload failed: still serving the certificate loaded before", "err", err)
		return err
	}
	r.cur.Store(f)
	r.logLoaded("TLS certificate reloaded", f)
	return nil
}

func (r *tlsReloader) logLoaded(msg string, f *tlsFiles) {
	args := []any{"cert_file", r.cfg.Server.TLSCertFile, "mutual_tls", f.cas != nil}
	level := slog.LevelInfo
	if leaf := f.cert.Leaf; leaf != nil {
		args = append(args, "subject", leaf.Subject.String(), "dns_names", strings.Join(leaf.DNSNames, ","),
			"signed_by", leaf.Issuer.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
		if time.Now().After(leaf.NotAfter) {
			level = slog.LevelWarn
			msg += ": it has expired, clients will refuse it"
		}
	}
	r.log.Log(context.Background(), level, msg, args...)
}

// config returns the tls.Config the splitter handshakes with: each
// handshake takes the files loaded last.
func (r *tlsReloader) config() *tls.Config {
	return &tls.Config{
		NextProtos: []string{"h2", "http/1.1"},
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			f := r.cur.Load()
			c := &tls.Config{
				Certificates: []tls.Certificate{*f.cert},
				NextProtos:   []string{"h2", "http/1.1"},
				MinVersion:   tls.VersionTLS12,
			}
			if f.cas != nil {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = f.cas
			}
			return c, nil
		},
	}
}

// ReloadTLS loads the [server] TLS files again (sepp serve calls it on
// SIGHUP). A failure is logged and returned, and the port keeps serving the
// files loaded before. Without TLS it does nothing.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return nil
	}
	return s.tls.reload()
}

// connTLSState returns the TLS state of a connection the splitter handed
// on, or nil for a cleartext one. A wrapper around such a connection keeps
// its TLS state visible if it has a NetConn method, as *tls.Conn does.
func connTLSState(c net.Conn) *tls.ConnectionState {
	for range 16 {
		switch cc := c.(type) {
		case *tls.Conn:
			st := cc.ConnectionState()
			return &st
		case *replayConn:
			c = cc.Conn
		case *ackDropConn:
			c = cc.replayConn
		case interface{ NetConn() net.Conn }:
			c = cc.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// tlsStateKey is the context key of a connection's *tls.ConnectionState,
// which the HTTP server's ConnContext stores.
type tlsStateKey struct{}

// httpConnContext stores c's TLS state in the context of its requests, for
// withTLSState.
func httpConnContext(ctx context.Context, c net.Conn) context.Context {
	if st := connTLSState(c); st != nil {
		return context.WithValue(ctx, tlsStateKey{}, st)
	}
	return ctx
}

// withTLSState sets r.TLS for a request that came over TLS: net/http sees
// only the decrypted stream the splitter hands on, so it cannot set it
// itself.
func withTLSState(r *http.Request) {
	if r.TLS == nil {
		if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
			r.TLS = st
		}
	}
}

// splitCreds are grpc-go's transport credentials for connections the
// splitter hands on: the TLS handshake, if any, is done already, and the
// connection's TLS state becomes the peer's credentials.TLSInfo
// (peer.FromContext); a cleartext connection counts as insecure.
type splitCreds struct{}

func (splitCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	st := connTLSState(c)
	if st == nil {
		return insecure.NewCredentials().ServerHandshake(c)
	}
	return c, credentials.TLSInfo{State: *st, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (splitCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("server: splitCreds are for the server side")
}

func (splitCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}
func (c splitCreds) Clone() credentials.TransportCredentials { return c }
func (splitCreds) OverrideServerName(string) error           { return nil }

// answerCleartextHTTP answers a cleartext HTTP/1.x request sent to the TLS
// port, whose bytes made handshake fail, with a 400 that says so (as
// net/http's own TLS server does), so curl http:// shows why.
func answerCleartextHTTP(err error) {
	var re tls.RecordHeaderError
	if !errors.As(err, &re) || re.Conn == nil {
		return
	}
	switch string(re.RecordHeader[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH":
		re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nThis port serves TLS: use https:// instead of http://.\n")
	}
}
