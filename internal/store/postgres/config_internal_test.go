package postgres

import (
	"testing"
	"time"
)

// TestConnectTimeoutDefault: a URL without connect_timeout gets
// DefaultConnectTimeout; one with its own keeps it.
func TestConnectTimeoutDefault(t *testing.T) {
	t.Setenv("PGCONNECT_TIMEOUT", "") // pgx reads it when the URL has none
	for _, c := range []struct {
		url  string
		want time.Duration
	}{
		{"postgres://sepp@127.0.0.1:5432/sepp?sslmode=disable", DefaultConnectTimeout},
		{"postgres://sepp@127.0.0.1:5432/sepp?sslmode=disable&connect_timeout=0", DefaultConnectTimeout},
		{"postgres://sepp@127.0.0.1:5432/sepp?sslmode=disable&connect_timeout=3", 3 * time.Second},
		{"host=127.0.0.1 user=sepp dbname=sepp sslmode=disable", DefaultConnectTimeout},
		{"host=127.0.0.1 user=sepp dbname=sepp sslmode=disable connect_timeout=42", 42 * time.Second},
	} {
		cfg, err := poolConfig(Options{URL: c.url})
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		if got := cfg.ConnConfig.ConnectTimeout; got != c.want {
			t.Errorf("%s: ConnectTimeout %v, want %v", c.url, got, c.want)
		}
	}
}
