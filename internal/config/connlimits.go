package config

import (
	"fmt"
	"time"
)

// Defaults of the connection keys of the [limits] table.
const (
	DefaultMaxConnections      = 10000
	DefaultMaxConnectionsPerIP = 1000
	DefaultIdleTimeoutMs       = 120 * 1000 // 2 min
	DefaultHeaderTimeoutMs     = 10 * 1000  // 10 s
	DefaultBodyTimeoutMs       = 60 * 1000  // 1 min
	DefaultMaxStreams          = 1000
)

// ConnectionLimits are the keys of the [limits] table that bound
// connections rather than requests (docs/security.md, Limits on
// connections). A zero field means "not set": the methods return its
// default.
type ConnectionLimits struct {
	// MaxConnections is the most client connections the port holds open at
	// once; a connection over it is closed as soon as it is accepted. The
	// server lowers it to what the process's open-file limit leaves room
	// for. Default 10000.
	MaxConnections int `toml:"max_connections"`
	// MaxConnectionsPerIP is the most connections one client IP address
	// (loopback included) may hold open at once. Default 1000.
	MaxConnectionsPerIP int `toml:"max_connections_per_ip"`
	// IdleTimeoutMs is how long a connection with no request in progress
	// (an HTTP/1.1 keep-alive, an HTTP/2 or gRPC connection with no open
	// stream) is kept before the server closes it, in milliseconds.
	// Default 120000 (2 min).
	IdleTimeoutMs int64 `toml:"idle_timeout_ms"`
	// HeaderTimeoutMs is how long a new connection may take to send its
	// first request's headers (and an HTTP/1.1 connection each request's
	// headers), in milliseconds. Default 10000 (10 s).
	HeaderTimeoutMs int64 `toml:"header_timeout_ms"`
	// BodyTimeoutMs is how long a request body may take to arrive, from the
	// end of its headers, in milliseconds (Connect, gRPC-Web, webhooks and
	// /metrics; gRPC calls on grpc-go's own transport are bounded by flow
	// control and the client's deadline instead). It does not bound the
	// response, so a long poll is not cut short. Default 60000 (1 min).
	BodyTimeoutMs int64 `toml:"body_timeout_ms"`
	// MaxStreamsPerConnection is the most calls one HTTP/2 connection (a
	// gRPC channel, an HTTP/2 Connect client) may have open at once; the
	// server announces it in its SETTINGS, and a client queues calls over
	// it. Default 1000.
	MaxStreamsPerConnection int `toml:"max_streams_per_connection"`
}

func orDefault[T int | int64](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

// Connections is MaxConnections with its default.
func (l ConnectionLimits) Connections() int {
	return orDefault(l.MaxConnections, DefaultMaxConnections)
}

// ConnectionsPerIP is MaxConnectionsPerIP with its default.
func (l ConnectionLimits) ConnectionsPerIP() int {
	return orDefault(l.MaxConnectionsPerIP, DefaultMaxConnectionsPerIP)
}

// StreamsPerConnection is MaxStreamsPerConnection with its default.
func (l ConnectionLimits) StreamsPerConnection() int {
	return orDefault(l.MaxStreamsPerConnection, DefaultMaxStreams)
}

// IdleTimeout is IdleTimeoutMs, with its default, as a duration.
func (l ConnectionLimits) IdleTimeout() time.Duration {
	return ms(orDefault(l.IdleTimeoutMs, DefaultIdleTimeoutMs))
}

// HeaderTimeout is HeaderTimeoutMs, with its default, as a duration.
func (l ConnectionLimits) HeaderTimeout() time.Duration {
	return ms(orDefault(l.HeaderTimeoutMs, DefaultHeaderTimeoutMs))
}

// BodyTimeout is BodyTimeoutMs, with its default, as a duration.
func (l ConnectionLimits) BodyTimeout() time.Duration {
	return ms(orDefault(l.BodyTimeoutMs, DefaultBodyTimeoutMs))
}

// validateConnectionLimits checks the connection keys of [limits]: a key
// set in the file must be inside its range (ranges.go), zero included.
func (v *validator) validateConnectionLimits(l ConnectionLimits) {
	for _, k := range []struct {
		path string
		n    int64
	}{
		{"limits.max_connections", int64(l.MaxConnections)},
		{"limits.max_connections_per_ip", int64(l.MaxConnectionsPerIP)},
		{"limits.idle_timeout_ms", l.IdleTimeoutMs},
		{"limits.header_timeout_ms", l.HeaderTimeoutMs},
		{"limits.body_timeout_ms", l.BodyTimeoutMs},
		{"limits.max_streams_per_connection", int64(l.MaxStreamsPerConnection)},
	} {
		if path := k.path; k.n == 0 && v.has(path) {
			r := intRanges[path]
			v.bad(path, fmt.Sprintf("must be from %d to %d, got 0 (leave the key out for the default)", r.lo, r.hi))
		}
	}
}
