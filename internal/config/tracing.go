package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
)

// Tracing defaults.
const (
	DefaultTracingServiceName = "sepp"
	DefaultTracingSampleRatio = 1.0
)

// TracingConfig is the [tracing] section: OpenTelemetry traces of the
// server's enqueue, reserve, complete and fail calls, exported over OTLP/HTTP
// (protobuf). Off by default; off, the server installs no tracer and its
// calls do no tracing work.
type TracingConfig struct {
	// Enabled turns tracing on. Default false.
	Enabled bool `toml:"enabled"`
	// Endpoint is where spans are sent: a URL ("http://127.0.0.1:4318",
	// whose path defaults to /v1/traces) or host:port (https unless
	// Insecure). Default "": the OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT environment variable, else
	// https://localhost:4318/v1/traces.
	Endpoint string `toml:"endpoint"`
	// Insecure sends spans over plain HTTP to a host:port endpoint (a URL
	// says so with its scheme). Default false.
	Insecure bool `toml:"insecure"`
	// ServiceName is the service.name of the spans. Default "sepp".
	ServiceName string `toml:"service_name"`
	// SampleRatio is the share of the traces the server starts (calls that
	// carry no trace context) that are kept, from 0 to 1; a call that
	// carries one follows its sampling decision. Default 1.
	SampleRatio float64 `toml:"sample_ratio"`
}

// ExporterURL is the endpoint as the exporter wants it: a URL with the
// /v1/traces path filled in, or "" for a host:port endpoint (or none),
// which the exporter takes as is.
func (t TracingConfig) ExporterURL() string {
	u, err := url.Parse(t.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String()
}

func defaultTracing() TracingConfig {
	return TracingConfig{ServiceName: DefaultTracingServiceName, SampleRatio: DefaultTracingSampleRatio}
}

// validateTracing checks the [tracing] section into v.
func (c *Config) validateTracing(v *validator) {
	t := c.Tracing
	if math.IsNaN(t.SampleRatio) || t.SampleRatio < 0 || t.SampleRatio > 1 {
		v.bad("tracing.sample_ratio", fmt.Sprintf("must be from 0 to 1, got %s", strconv.FormatFloat(t.SampleRatio, 'g', -1, 64)))
	}
	if t.ServiceName == "" && v.has("tracing.service_name") {
		v.fail("tracing.service_name", `must not be empty; leave it out for "sepp"`)
	}
	if t.Endpoint == "" {
		return
	}
	if msg := checkTracingEndpoint(t.Endpoint, t.Insecure); msg != "" {
		v.fail("tracing.endpoint", msg)
	}
}

// checkTracingEndpoint returns what is wrong with an endpoint, or "".
func checkTracingEndpoint(endpoint string, insecure bool) string {
	if u, err := url.Parse(endpoint); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		switch {
		case u.Host == "":
			return fmt.Sprintf("%q has no host; write it like \"http://127.0.0.1:4318\"", endpoint)
		case u.Scheme == "https" && insecure:
			return fmt.Sprintf("%q is an https:// URL but insecure = true: use http:// for plain HTTP, or drop insecure", endpoint)
		}
		return ""
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || host == "" {
		return fmt.Sprintf("must be a URL like \"http://127.0.0.1:4318\" or host:port like \"collector:4318\", got %q", endpoint)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Sprintf("must end in a port number from 1 to 65535, got %q", endpoint)
	}
	return ""
}
