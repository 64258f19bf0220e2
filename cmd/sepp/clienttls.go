package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

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
