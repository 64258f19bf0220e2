package config

import (
	"fmt"
	"math"
	"reflect"
	"strings"
)

// intRange is the values a whole-number key accepts, both ends included.
type intRange struct{ lo, hi int64 }

// intRanges gives the range of every whole-number key (kindInt in specs;
// TestEveryIntKeyHasRange keeps the two in step), by spec path. The bounds
// are sane values for the key, well inside the range of its Go type, so no
// value wraps or truncates on its way to where it is used (a pool_size of
// 4294967297 would otherwise become a pool of 1).
var intRanges = map[string]intRange{
	"server.max_payload_bytes": {1, 256 << 20},
	"server.max_batch_size":    {1, 100000},

	"storage.dedup_window_ms":           {1, MaxMs},
	"storage.max_idempotency_key_bytes": {1, 64 << 10},
	"storage.sweep_interval_ms":         {1, MaxMs},
	"storage.pool_size":                 {1, 1000},
	"storage.completed_retention_ms":    {1, MaxMs},
	"storage.dead_retention_ms":         {1, MaxMs},

	"limits.max_reserve_queues":            {1, 100000},
	"limits.max_reserve_jobs":              {1, 100000},
	"limits.max_long_polls_per_connection": {1, 1000000},
	"limits.max_long_polls":                {1, 10000000},
	"limits.max_long_polls_per_client":     {1, 10000000},
	"limits.max_queue_labels":              {1, 100000},
	"limits.max_request_bytes":             {1, 1 << 30},
	"limits.max_connections":               {1, 1000000},
	"limits.max_connections_per_ip":        {1, 1000000},
	"limits.max_streams_per_connection":    {1, 100000},
	"limits.idle_timeout_ms":               {100, 24 * 60 * 60 * 1000},
	"limits.header_timeout_ms":             {100, 60 * 60 * 1000},
	"limits.body_timeout_ms":               {100, 60 * 60 * 1000},

	"queues[].dedup_window_ms":      {1, MaxMs},
	"queues[].max_attempts":         {1, math.MaxInt32},
	"queues[].lease_ms":             {1, MaxMs},
	"queues[].backoff_initial_ms":   {1, MaxMs},
	"queues[].backoff_max_ms":       {1, MaxMs},
	"queues[].debounce_ms":          {1, MaxMs},
	"queues[].debounce_max_wait_ms": {1, MaxMs},
	"queues[].rules[].window_ms":    {1, MaxMs},
	"queues[].rules[].limit":        {1, maxRuleLimit},
	"queues[].concurrency.limit":    {1, maxConcurrencyLimit},
	"queues[].rate.limit":           {1, maxRateLimit},
	"queues[].rate.period_ms":       {1, MaxMs},

	"webhooks[].max_body_bytes":                   {1, 256 << 20},
	"webhooks[].signature.timestamp_tolerance_ms": {1, MaxMs},

	"outboxes[].batch_size":       {1, MaxOutboxBatchSize},
	"outboxes[].poll_interval_ms": {10, 3_600_000},
}

// checkRanges checks every whole-number field of c that is set (in the file,
// the environment, or to a value other than zero in code) against
// intRanges. It runs after the per-key checks, whose messages say more, so
// it only speaks for a value they let through.
func (v *validator) checkRanges(c *Config) {
	v.rangeWalk("", reflect.ValueOf(c).Elem())
}

func (v *validator) rangeWalk(path string, rv reflect.Value) {
	switch rv.Kind() {
	case reflect.Struct:
		t := rv.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Anonymous {
				v.rangeWalk(path, rv.Field(i))
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			v.rangeWalk(joinPath(path, name), rv.Field(i))
		}
	case reflect.Slice:
		if rv.Type().Elem().Kind() != reflect.Struct {
			return
		}
		for i := range rv.Len() {
			v.rangeWalk(fmt.Sprintf("%s[%d]", path, i), rv.Index(i))
		}
	case reflect.Pointer:
		if !rv.IsNil() {
			v.rangeWalk(path, rv.Elem())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := rv.Int()
		r, ok := intRanges[specPath(path)]
		if !ok || (n == 0 && !v.has(path)) || (n >= r.lo && n <= r.hi) {
			return
		}
		if v.reported(path) {
			return
		}
		v.bad(path, fmt.Sprintf("must be from %d to %d, got %d", r.lo, r.hi, n))
	}
}

// reported reports whether a problem was already found at path.
func (v *validator) reported(path string) bool {
	for _, p := range v.problems {
		if p.Key == path || strings.HasSuffix(p.Msg, "it overrides "+path+")") {
			return true
		}
	}
	return false
}
