package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sepp-dev/sepp"
)

// connFlags are the flags that say how a client command authenticates to
// the server and checks it: a token, and TLS files for https:// addresses.
type connFlags struct {
	token    string
	caFile   string
	certFile string
	keyFile  string
}

// stringFlags is a flag set of either package: the Go-style commands' flag
// and cobra's pflag.
type stringFlags interface {
	StringVar(p *string, name, value, usage string)
}

func (f *connFlags) register(fs stringFlags) {
	fs.StringVar(&f.token, "token", os.Getenv("SEPP_TOKEN"), "send this token as authorization: Bearer (env SEPP_TOKEN)")
	f.registerTLS(fs)
}

// registerTLS registers the TLS flags alone, for a command that sends no
// token.
func (f *connFlags) registerTLS(fs stringFlags) {
	fs.StringVar(&f.caFile, "ca-file", os.Getenv("SEPP_CA_FILE"), "verify an https:// server against the PEM CA certificates in this `file` instead of the system's (env SEPP_CA_FILE)")
	fs.StringVar(&f.certFile, "cert-file", os.Getenv("SEPP_CERT_FILE"), "mutual TLS: present the PEM client certificate in this `file` (env SEPP_CERT_FILE; needs --key-file)")
	fs.StringVar(&f.keyFile, "key-file", os.Getenv("SEPP_KEY_FILE"), "mutual TLS: the PEM private key of --cert-file (env SEPP_KEY_FILE)")
}

// tlsConfig returns the TLS settings the flags give, or nil when they give
// none (an https:// address then uses the system's roots).
func (f *connFlags) tlsConfig() (*tls.Config, error) {
	if f.caFile == "" && f.certFile == "" && f.keyFile == "" {
		return nil, nil
	}
	tc := &tls.Config{}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: holds no PEM certificate (BEGIN CERTIFICATE)", f.caFile)
		}
	}
	switch {
	case f.certFile != "" && f.keyFile != "":
		cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file %s, --key-file %s: %w", f.certFile, f.keyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	case f.certFile != "":
		return nil, errors.New("--cert-file needs --key-file (or SEPP_KEY_FILE): the client certificate's private key")
	case f.keyFile != "":
		return nil, errors.New("--key-file needs --cert-file (or SEPP_CERT_FILE): the client certificate")
	}
	return tc, nil
}

// apply sets cfg's Token and TLS from the flags, for a client of addr.
func (f *connFlags) apply(cfg *sepp.Config, addr string) error {
	cfg.Token = f.token
	tc, err := f.tlsFor(addr)
	cfg.TLS = tc
	return err
}

// tlsFor is tlsConfig, refused for an address that is not https://.
func (f *connFlags) tlsFor(addr string) (*tls.Config, error) {
	tc, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil && !strings.HasPrefix(addr, "https://") && !strings.HasPrefix(addr, "grpcs://") {
		return nil, fmt.Errorf("--ca-file, --cert-file and --key-file are for TLS: give an https:// address (--addr %s)", addr)
	}
	return tc, nil
}

// connectHint is appended to a connection failure the probe could not
// explain: most often no server is running at the address.
const connectHint = "\n(is the server running? start it with: sepp serve)"

// probeTimeout bounds explainConnect's own connection to the server.
const probeTimeout = 2 * time.Second

// explainConnect says why the connection to addr failed, when a TLS
// handshake of its own with the server can tell: the server speaks TLS to
// an http:// address, or an https:// server's certificate is not signed by
// a CA the client trusts, or is not for its name, or the server speaks no
// TLS. These are mistakes in --addr or --ca-file, not an outage: they exit
// 1, not 4. When nothing listens at addr (or it does not answer), it
// returns err with the hint to start a server (exit 4, as before);
// otherwise err as it is.
func (f *connFlags) explainConnect(addr string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w%s", err, connectHint) // a silent server: a probe would wait too
	}
	u, perr := url.Parse(addr)
	if perr != nil || u.Host == "" {
		return fmt.Errorf("%w%s", err, connectHint)
	}
	secure := u.Scheme == "https" || u.Scheme == "grpcs"
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	conn, derr := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if derr != nil {
		return fmt.Errorf("%w%s", err, connectHint)
	}
	defer conn.Close()
	// Something listens: from here on the hint to start a server would
	// mislead.
	if !secure {
		// Any certificate: the question is only whether it speaks TLS.
		if tls.Client(conn, &tls.Config{InsecureSkipVerify: true}).HandshakeContext(ctx) == nil {
			https := *u
			https.Scheme = "https"
			return fmt.Errorf("cannot reach the server at %s: the server speaks TLS: use %s", addr, https.String())
		}
		return err
	}
	tc, terr := f.tlsFor(addr)
	if terr != nil {
		return terr
	}
	if tc == nil {
		tc = &tls.Config{}
	}
	tc = tc.Clone()
	tc.ServerName = u.Hostname()
	herr := tls.Client(conn, tc).HandshakeContext(ctx)
	if why := tlsMismatch(herr, f.caFile, u); why != "" {
		return fmt.Errorf("cannot reach the server at %s: %s", addr, why)
	}
	return err
}

// tlsMismatch says what a failed TLS handshake with the server at u means
// for the user, or "" if it is none of the mistakes it knows.
func tlsMismatch(err error, caFile string, u *url.URL) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var notTLS tls.RecordHeaderError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &unknownCA):
		signer := ""
		if unknownCA.Cert != nil && unknownCA.Cert.Issuer.CommonName != "" {
			signer = fmt.Sprintf(" (%q)", unknownCA.Cert.Issuer.CommonName)
		}
		if caFile != "" {
			return fmt.Sprintf("the server's certificate is not signed by a CA you trust (--ca-file %s): pass --ca-file with the PEM certificate of the CA that signed it%s", caFile, signer)
		}
		return fmt.Sprintf("the server's certificate is not signed by a CA you trust: pass --ca-file with the PEM certificate of the CA that signed it%s (or set SEPP_CA_FILE)", signer)
	case errors.As(err, &hostname):
		return fmt.Sprintf("the server's certificate is not for %s (%v): use an address its certificate names", u.Hostname(), hostname.Error())
	case errors.As(err, &invalid):
		return fmt.Sprintf("the server's certificate is not valid: %v", invalid.Error())
	case errors.As(err, &notTLS):
		plain := *u
		plain.Scheme = "http"
		return fmt.Sprintf("the server does not speak TLS: use %s", plain.String())
	}
	return ""
}
