package config

import (
	"strings"
	"testing"
)

func TestTracingDefaults(t *testing.T) {
	c, err := Parse("sepp.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := TracingConfig{ServiceName: "sepp", SampleRatio: 1}
	if c.Tracing != want {
		t.Fatalf("defaults: got %+v, want %+v", c.Tracing, want)
	}
}

func TestTracingKeys(t *testing.T) {
	c, err := Parse("sepp.toml", []byte("[tracing]\nenabled = true\nendpoint = \"http://127.0.0.1:4318\"\nservice_name = \"sepp-eu\"\nsample_ratio = 0.25\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := TracingConfig{Enabled: true, Endpoint: "http://127.0.0.1:4318", ServiceName: "sepp-eu", SampleRatio: 0.25}
	if c.Tracing != want {
		t.Fatalf("got %+v, want %+v", c.Tracing, want)
	}
	if got := c.Tracing.ExporterURL(); got != "http://127.0.0.1:4318/v1/traces" {
		t.Errorf("ExporterURL: %q", got)
	}
	// A whole number is a ratio too: 0 keeps no trace the server starts.
	c, err = Parse("sepp.toml", []byte("[tracing]\nsample_ratio = 0\nendpoint = \"collector:4318\"\ninsecure = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing.SampleRatio != 0 || c.Tracing.ExporterURL() != "" {
		t.Errorf("got %+v, ExporterURL %q", c.Tracing, c.Tracing.ExporterURL())
	}
}

func TestTracingRefused(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"[tracing]\nsample_ratio = 1.5\n", "sepp.toml:2: tracing.sample_ratio: must be from 0 to 1, got 1.5"},
		{"[tracing]\nsample_ratio = -0.1\n", "sepp.toml:2: tracing.sample_ratio: must be from 0 to 1, got -0.1"},
		{"[tracing]\nsample_ratio = \"half\"\n", "sepp.toml:2: tracing.sample_ratio: must be a number, like 0.25, got the string \"half\""},
		{"[tracing]\nendpoint = \"https://otel.example\"\ninsecure = true\n", `sepp.toml:2: tracing.endpoint: "https://otel.example" is an https:// URL but insecure = true`},
		{"[tracing]\nendpoint = \"collector\"\n", `sepp.toml:2: tracing.endpoint: must be a URL like "http://127.0.0.1:4318" or host:port`},
		{"[tracing]\nendpoint = \"collector:0\"\n", `sepp.toml:2: tracing.endpoint: must end in a port number from 1 to 65535`},
		{"[tracing]\nendpoint = \"http://\"\n", `sepp.toml:2: tracing.endpoint: "http://" has no host`},
		{"[tracing]\nservice_name = \"\"\n", `sepp.toml:2: tracing.service_name: must not be empty`},
		{"[tracing]\nenable = true\n", `sepp.toml:2: tracing.enable: unknown key (did you mean "enabled"?)`},
	} {
		_, err := Parse("sepp.toml", []byte(tc.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q...", tc.doc, err, tc.want)
		}
	}
}
