package config

import "fmt"

// Defaults of the [limits] table: bounds on what one request, and one
// connection, may ask of the server (docs/security.md, Limits on requests).
const (
	DefaultMaxReserveQueues          = 100
	DefaultMaxReserveJobs            = 1000
	DefaultMaxLongPollsPerConnection = 100
	DefaultMaxLongPolls              = 10000
	// DefaultMaxLongPollsPerClient is the per-client bound left out of
	// the file (at most half of max_long_polls): one client needs 1000
	// waiting calls only for 1000 worker processes (a worker holds one
	// Reserve), which max_connections_per_ip (1000) already stops from
	// reaching the port from one address.
	DefaultMaxLongPollsPerClient = 1000
	// DefaultMaxQueueLabels is how many queues not declared in [[queues]]
	// have series of their own on /metrics: a Prometheus server keeps a
	// few hundred series per metric at ease, and each such queue adds
	// about a dozen lines to a scrape.
	DefaultMaxQueueLabels = 100
)

// Bounds of the derived request size (LimitsConfig.RequestBytes).
const (
	// requestBytesPerItem is what one batch item may carry besides its
	// payload: job type, key, a few headers and the protobuf framing.
	requestBytesPerItem = 4 << 10
	// requestBytesHeadroom leaves room for the headers of one job at
	// their limit (64 KiB) and the request's own fields.
	requestBytesHeadroom = 128 << 10
)

// LimitsConfig is the [limits] table: bounds that keep one client from
// slowing the others. Over a bound, a call fails with LIMIT_EXCEEDED
// (ResourceExhausted), naming the key.
type LimitsConfig struct {
	// MaxReserveQueues is the most queues one Reserve call may name.
	// Default 100.
	MaxReserveQueues int `toml:"max_reserve_queues"`
	// MaxReserveJobs is the largest max_jobs a Reserve call may ask for.
	// Default 1000.
	MaxReserveJobs int `toml:"max_reserve_jobs"`
	// MaxLongPollsPerConnection is the most calls that wait (Reserve or
	// ClaimEffect with wait_ms > 0) one client connection may have open at
	// once. Default 100.
	MaxLongPollsPerConnection int `toml:"max_long_polls_per_connection"`
	// MaxLongPolls is the most waiting calls the whole node holds at once.
	// Default 10000.
	MaxLongPolls int `toml:"max_long_polls"`
	// MaxLongPollsPerClient is the most waiting calls one client may have
	// open at once, over all its connections: a client is a token when
	// [auth] has tokens, else an IP address. 0 (left out) is
	// DefaultMaxLongPollsPerClient, at most half of MaxLongPolls; see
	// LongPollsPerClient.
	MaxLongPollsPerClient int `toml:"max_long_polls_per_client"`
	// MaxRequestBytes is the largest request message accepted, in bytes,
	// refused by the transport before it is read. 0 (the default) derives
	// it from [server]: max_payload_bytes + max_batch_size * 4 KiB +
	// 128 KiB; see RequestBytes.
	MaxRequestBytes int64 `toml:"max_request_bytes"`
	// MaxQueueLabels is how many queues that are not declared in
	// [[queues]] get a queue label value of their own on /metrics, the
	// first ones the node finds to exist; the others are counted under
	// queue="other". Nothing is refused. Default 100.
	MaxQueueLabels int `toml:"max_queue_labels"`
	// ConnectionLimits are the keys that bound connections: connlimits.go.
	ConnectionLimits
}

// RequestBytes is the largest request message the server reads: limits.
// max_request_bytes if set, else derived from s: one job at
// max_payload_bytes with headers at their limit fits, and so does a batch of
// max_batch_size small jobs (4 KiB each besides their payloads, or a few
// large payloads). It is capped at 1 GiB.
func (l LimitsConfig) RequestBytes(s ServerConfig) int64 {
	if l.MaxRequestBytes > 0 {
		return l.MaxRequestBytes
	}
	n := s.MaxPayloadBytes + requestBytesHeadroom
	if b := int64(s.MaxBatchSize); b > 0 && b < 1<<30/requestBytesPerItem {
		n += b * requestBytesPerItem
	} else {
		n = 1 << 30
	}
	return min(n, 1<<30)
}

// LongPollsPerClient is MaxLongPollsPerClient, or when it is left out
// DefaultMaxLongPollsPerClient, lowered to half of MaxLongPolls so that one
// client never takes every waiting place of the node.
func (l LimitsConfig) LongPollsPerClient() int {
	if l.MaxLongPollsPerClient > 0 {
		return l.MaxLongPollsPerClient
	}
	return min(DefaultMaxLongPollsPerClient, max(l.MaxLongPolls/2, 1))
}

// defaultLimits is the [limits] table with nothing set.
func defaultLimits() LimitsConfig {
	return LimitsConfig{
		MaxReserveQueues:          DefaultMaxReserveQueues,
		MaxReserveJobs:            DefaultMaxReserveJobs,
		MaxLongPollsPerConnection: DefaultMaxLongPollsPerConnection,
		MaxLongPolls:              DefaultMaxLongPolls,
		MaxQueueLabels:            DefaultMaxQueueLabels,
	}
}

// validateLimits checks the [limits] table.
func (v *validator) validateLimits(l LimitsConfig) {
	v.positive("limits.max_reserve_queues", int64(l.MaxReserveQueues))
	v.positive("limits.max_reserve_jobs", int64(l.MaxReserveJobs))
	v.positive("limits.max_long_polls_per_connection", int64(l.MaxLongPollsPerConnection))
	v.positive("limits.max_long_polls", int64(l.MaxLongPolls))
	if l.MaxLongPollsPerClient < 0 || (l.MaxLongPollsPerClient == 0 && v.has("limits.max_long_polls_per_client")) {
		r := intRanges["limits.max_long_polls_per_client"]
		v.bad("limits.max_long_polls_per_client", fmt.Sprintf("must be from %d to %d, got %d (leave it out for the default: %d, at most half of max_long_polls)",
			r.lo, r.hi, l.MaxLongPollsPerClient, DefaultMaxLongPollsPerClient))
	}
	v.positive("limits.max_queue_labels", int64(l.MaxQueueLabels))
	if l.MaxRequestBytes < 0 || (l.MaxRequestBytes == 0 && v.has("limits.max_request_bytes")) {
		v.bad("limits.max_request_bytes", "must be > 0 (leave it out for the derived default)")
	}
}
