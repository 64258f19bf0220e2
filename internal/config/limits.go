package config

// Defaults of the [limits] table: bounds on what one request, and one
// connection, may ask of the server (docs/security.md, Limits on requests).
const (
	DefaultMaxReserveQueues          = 100
	DefaultMaxReserveJobs            = 1000
	DefaultMaxLongPollsPerConnection = 100
	DefaultMaxLongPolls              = 10000
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
	// MaxRequestBytes is the largest request message accepted, in bytes,
	// refused by the transport before it is read. 0 (the default) derives
	// it from [server]: max_payload_bytes + max_batch_size * 4 KiB +
	// 128 KiB; see RequestBytes.
	MaxRequestBytes int64 `toml:"max_request_bytes"`
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

// defaultLimits is the [limits] table with nothing set.
func defaultLimits() LimitsConfig {
	return LimitsConfig{
		MaxReserveQueues:          DefaultMaxReserveQueues,
		MaxReserveJobs:            DefaultMaxReserveJobs,
		MaxLongPollsPerConnection: DefaultMaxLongPollsPerConnection,
		MaxLongPolls:              DefaultMaxLongPolls,
	}
}

// validateLimits checks the [limits] table.
func (v *validator) validateLimits(l LimitsConfig) {
	v.positive("limits.max_reserve_queues", int64(l.MaxReserveQueues))
	v.positive("limits.max_reserve_jobs", int64(l.MaxReserveJobs))
	v.positive("limits.max_long_polls_per_connection", int64(l.MaxLongPollsPerConnection))
	v.positive("limits.max_long_polls", int64(l.MaxLongPolls))
	if l.MaxRequestBytes < 0 || (l.MaxRequestBytes == 0 && v.has("limits.max_request_bytes")) {
		v.bad("limits.max_request_bytes", "must be > 0 (leave it out for the derived default)")
	}
}
