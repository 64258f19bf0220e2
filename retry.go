package sepp

import (
	"math/rand/v2"
	"time"
)

// The retry policy every Sepp client shares (docs/clients.md, "Retries";
// clients/retry-policy.json holds it and the cases each client's tests
// check): a resend waits a full-jitter delay, uniform between zero and a
// ceiling that doubles from retryBase up to retryCap.
const (
	defaultRetries = 5
	retryBase      = 50 * time.Millisecond
	retryCap       = 2 * time.Second
)

// retryDelay is how long the resend after retry earlier resends waits, for
// random uniform in [0, 1).
func retryDelay(retry int, random float64) time.Duration {
	ceiling := retryCap
	if retry < 16 { // 50 ms << 16 is far past the cap
		ceiling = min(retryCap, retryBase<<retry)
	}
	return time.Duration(random * float64(ceiling))
}

// jitteredRetryDelay is retryDelay with a random draw.
func jitteredRetryDelay(retry int) time.Duration {
	return retryDelay(retry, rand.Float64())
}
