package testserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority for TLS tests, made with crypto/x509.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// Pool holds Cert, for a client's RootCAs.
	Pool *x509.CertPool
	// File is Cert in PEM, in a t.TempDir(): for tls_client_ca_file or a
	// client's --ca-file.
	File string
	dir  string
}

var serial atomic.Int64

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, key: key, Pool: x509.NewCertPool(), dir: t.TempDir()}
	ca.Pool.AddCert(cert)
	ca.File = filepath.Join(ca.dir, "ca.pem")
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Issued is a certificate a CA signed, with its key, as PEM files and as a
// tls.Certificate.
type Issued struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
	Leaf              *x509.Certificate
}

// Server issues a server certificate for 127.0.0.1 and localhost with
// common name cn.
func (ca *CA) Server(t testing.TB, cn string) *Issued {
	return ca.issue(t, cn, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate with common name cn.
func (ca *CA) Client(t testing.TB, cn string) *Issued {
	return ca.issue(t, cn, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(t testing.TB, cn string, usage x509.ExtKeyUsage) *Issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	n := serial.Load()
	is := &Issued{
		CertFile: filepath.Join(ca.dir, fmt.Sprintf("%s-%d.pem", cn, n)),
		KeyFile:  filepath.Join(ca.dir, fmt.Sprintf("%s-%d-key.pem", cn, n)),
	}
	writePEM(t, is.CertFile, "CERTIFICATE", der)
	writePEM(t, is.KeyFile, "PRIVATE KEY", keyDER)
	if is.TLS, err = tls.LoadX509KeyPair(is.CertFile, is.KeyFile); err != nil {
		t.Fatal(err)
	}
	is.Leaf, _ = x509.ParseCertificate(der)
	return is
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TLSConfig returns the [server] lines that serve is with TLS, and require
// client certificates from clientCA when it is not nil.
func TLSConfig(is *Issued, clientCA *CA) string {
	s := fmt.Sprintf("tls_cert_file = %q\ntls_key_file = %q\n", is.CertFile, is.KeyFile)
	if clientCA != nil {
		s += fmt.Sprintf("tls_client_ca_file = %q\n", clientCA.File)
	}
	return s
}
