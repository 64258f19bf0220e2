package config

import "testing"

func TestTLSKeys(t *testing.T) {
	c, err := Parse("sepp.toml", []byte("[server]\ntls_cert_file = \"c.pem\"\ntls_key_file = \"k.pem\"\ntls_client_ca_file = \"ca.pem\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Server.TLS() || c.Server.TLSCertFile != "c.pem" || c.Server.TLSKeyFile != "k.pem" || c.Server.TLSClientCAFile != "ca.pem" {
		t.Errorf("Server = %+v", c.Server)
	}
	if d := Default(); d.Server.TLS() {
		t.Error("TLS on by default")
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"cert without key", "[server]\nlisten = \":1\"\ntls_cert_file = \"c.pem\"\n",
			"sepp.toml:3: server.tls_cert_file: is set but tls_key_file is not: set both (the certificate and its private key), or neither for no TLS"},
		{"key without cert", "[server]\n\ntls_key_file = \"k.pem\"\n",
			"sepp.toml:3: server.tls_key_file: is set but tls_cert_file is not: set both (the certificate and its private key), or neither for no TLS"},
		{"client CA without TLS", "[server]\ntls_client_ca_file = \"ca.pem\"\n",
			"sepp.toml:2: server.tls_client_ca_file: needs TLS: set tls_cert_file and tls_key_file too, since client certificates are only asked for over TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("sepp.toml", []byte(tc.doc))
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}
