package config

import (
	"errors"
	"fmt"
	"github.com/sepp-dev/sepp/internal/jsonkey"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

const postgresExample = "postgres://user@127.0.0.1:5432/sepp"

// validate checks c. file and org say where each value came from (org may
// be nil: then every value counts as set in code, and a zero queue field
// means "use the default"). It returns the problem on the earliest line
// (problems without a line first), or nil.
func (c *Config) validate(file string, org origins) error {
	v := &validator{file: file, org: org}

	s := c.Server
	if msg := checkListen(s.Listen); msg != "" {
		v.bad("server.listen", msg)
	}
	v.positive("server.max_payload_bytes", s.MaxPayloadBytes)
	v.positive("server.max_batch_size", int64(s.MaxBatchSize))
	switch {
	case s.TLSCertFile != "" && s.TLSKeyFile == "":
		v.fail("server.tls_cert_file", "is set but tls_key_file is not: set both (the certificate and its private key), or neither for no TLS")
	case s.TLSCertFile == "" && s.TLSKeyFile != "":
		v.fail("server.tls_key_file", "is set but tls_cert_file is not: set both (the certificate and its private key), or neither for no TLS")
	case s.TLSCertFile == "" && s.TLSClientCAFile != "":
		v.fail("server.tls_client_ca_file", "needs TLS: set tls_cert_file and tls_key_file too, since client certificates are only asked for over TLS")
	}

	st := c.Storage
	switch st.Backend {
	case BackendEmbedded:
		if st.Path == "" {
			v.bad("storage.path", fmt.Sprintf("must not be empty with backend = %q", st.Backend))
		}
	case BackendPostgres:
		switch {
		case st.URL == "" && v.has("storage.url"):
			v.fail("storage.url", `must not be empty with backend = "postgres"; set it like `+postgresExample)
		case st.URL == "":
			v.fail("storage.backend", `is "postgres" but storage.url is not set; set url in [storage] or `+EnvStorageURL+`, like `+postgresExample)
		default:
			if msg := checkPostgresURL(st.URL); msg != "" {
				v.fail("storage.url", msg)
			}
		}
	case removedBackendSQLite:
		v.fail("storage.backend", `"sqlite", the earlier embedded engine, was removed; set "embedded" (the Pebble store, the default) or "postgres". A data directory SQLite wrote (it holds sepp.db) cannot be read by this release: drain its jobs with the release that wrote it, then start on a new path`)
	default:
		v.bad("storage.backend", fmt.Sprintf("must be %q or %q, got %q", BackendEmbedded, BackendPostgres, st.Backend))
	}
	v.millis("storage.dedup_window_ms", st.DedupWindowMs)
	v.positive("storage.max_idempotency_key_bytes", int64(st.MaxIdempotencyKeyBytes))
	v.millis("storage.sweep_interval_ms", st.SweepIntervalMs)
	v.positive("storage.pool_size", int64(st.PoolSize))
	v.millis("storage.completed_retention_ms", st.CompletedRetentionMs)
	v.millis("storage.dead_retention_ms", st.DeadRetentionMs)
	v.validateLimits(c.Limits)

	firstIndex := make(map[string]int, len(c.Queues))
	for i, q := range c.Queues {
		p := fmt.Sprintf("queues[%d]", i)
		name := p + ".name"
		switch {
		case q.Name == "" && !v.has(name):
			v.fail(name, `missing: every [[queues]] entry needs a name, like name = "emails"`)
		case CheckQueueName(q.Name) != nil:
			v.bad(name, CheckQueueName(q.Name).Error())
		default:
			if j, dup := firstIndex[q.Name]; dup {
				first := fmt.Sprintf("queues[%d]", j)
				if l := v.line(first + ".name"); l > 0 {
					first = "line " + strconv.Itoa(l)
				}
				v.fail(name, fmt.Sprintf("duplicate queue %q (first declared at %s)", q.Name, first))
			} else {
				firstIndex[q.Name] = i
			}
		}

		v.queueMillis(p+".dedup_window_ms", q.DedupWindowMs)
		if q.KeyReuse != "" || v.has(p+".key_reuse") {
			if q.KeyReuse != KeyReuseReturnOriginal && q.KeyReuse != KeyReuseRejectMismatch {
				v.bad(p+".key_reuse", fmt.Sprintf("must be %q or %q, got %q", KeyReuseReturnOriginal, KeyReuseRejectMismatch, q.KeyReuse))
			}
		}
		if q.OnDuplicate != "" || v.has(p+".on_duplicate") {
			switch q.OnDuplicate {
			case OnDuplicateReturnOriginal, OnDuplicateReject, OnDuplicateReplace, OnDuplicateDebounce:
			default:
				v.bad(p+".on_duplicate", fmt.Sprintf("must be %q, %q, %q or %q, got %q", OnDuplicateReturnOriginal, OnDuplicateReject,
					OnDuplicateReplace, OnDuplicateDebounce, q.OnDuplicate))
			}
		}
		switch {
		case q.OnDuplicate == OnDuplicateDebounce && q.DebounceMs == 0 && !v.has(p+".debounce_ms"):
			v.fail(p+".debounce_ms", `is required with on_duplicate = "debounce": how long after the last enqueue the job runs, in milliseconds, like 5000`)
		case q.OnDuplicate != OnDuplicateDebounce && (v.has(p+".debounce_ms") || v.has(p+".debounce_max_wait_ms")):
			key := ".debounce_ms"
			if !v.has(p + key) {
				key = ".debounce_max_wait_ms"
			}
			v.fail(p+key, `is only used with on_duplicate = "debounce"`)
		case q.OnDuplicate == OnDuplicateDebounce:
			v.queueMillis(p+".debounce_ms", q.DebounceMs)
			if q.DebounceMaxWaitMs != 0 || v.has(p+".debounce_max_wait_ms") {
				v.queueMillis(p+".debounce_max_wait_ms", q.DebounceMaxWaitMs)
			}
		}
		v.releaseKeyOn(p+".release_key_on", q.ReleaseKeyOn)
		if q.WhenRunning != "" && q.WhenRunning != WhenRunningReturnOriginal && q.WhenRunning != WhenRunningRunAgain {
			v.bad(p+".when_running", fmt.Sprintf("must be %q or %q, got %q", WhenRunningReturnOriginal, WhenRunningRunAgain, q.WhenRunning))
		}
		if c := q.Concurrency; c != nil {
			if c.Limit < 0 || (c.Limit == 0 && v.has(p+".concurrency.limit")) || c.Limit > maxConcurrencyLimit {
				v.bad(p+".concurrency.limit", fmt.Sprintf("must be between 1 and %d: how many jobs of one key may be reserved at once, got %d", maxConcurrencyLimit, c.Limit))
			}
			if v.has(p+".concurrency.key_fields") && len(c.KeyFields) == 0 {
				v.fail(p+".concurrency.key_fields", `is empty; list JSON pointers like ["/account"], or leave key_fields out for one key for the whole queue`)
			}
			v.pointers(p+".concurrency.key_fields", c.KeyFields)
		}
		if r := q.Rate; r != nil {
			if r.Limit < 0 || (r.Limit == 0 && v.has(p+".rate.limit")) || r.Limit > maxRateLimit {
				v.bad(p+".rate.limit", fmt.Sprintf("must be between 1 and %d: how many jobs of one key may be reserved within the period, got %d", maxRateLimit, r.Limit))
			}
			if r.PeriodMs == 0 && !v.has(p+".rate.period_ms") {
				v.fail(p+".rate.period_ms", "is required: the period in milliseconds within which at most limit jobs of a key are reserved, like 60000")
			} else {
				v.queueMillis(p+".rate.period_ms", r.PeriodMs)
			}
			if v.has(p+".rate.key_fields") && len(r.KeyFields) == 0 {
				v.fail(p+".rate.key_fields", `is empty; list JSON pointers like ["/account"], or leave key_fields out for one key for the whole queue`)
			}
			v.pointers(p+".rate.key_fields", r.KeyFields)
		}
		if q.WhenRunning == WhenRunningRunAgain && q.OnDuplicate == OnDuplicateReject {
			v.fail(p+".when_running", `"run_again" cannot be set with on_duplicate = "reject": a hit on the waiting follow-up would be refused; use "return_original", "replace" or "debounce"`)
		}
		if len(q.KeyFields) > 0 && q.DedupByContent {
			v.fail(p+".key_fields", "cannot be set together with dedup_by_content = true: key_fields derives the key from some fields, dedup_by_content from the whole payload; keep one")
		}
		if v.has(p+".key_fields") && len(q.KeyFields) == 0 {
			v.fail(p+".key_fields", `is empty; list JSON pointers like ["/account", "/amount"], or leave key_fields out`)
		}
		v.pointers(p+".key_fields", q.KeyFields)
		ruleNames := map[string]bool{}
		for j, r := range q.Rules {
			rp := fmt.Sprintf("%s.rules[%d]", p, j)
			switch {
			case r.Name == "":
				v.fail(rp+".name", "is required: name the rule, like \"same-amount\"")
			case CheckQueueName(r.Name) != nil:
				v.fail(rp+".name", fmt.Sprintf("%q: %v", r.Name, CheckQueueName(r.Name)))
			case ruleNames[r.Name]:
				v.fail(rp+".name", fmt.Sprintf("duplicate rule %q in queue %q", r.Name, q.Name))
			}
			ruleNames[r.Name] = true
			if len(r.KeyFields) == 0 {
				v.fail(rp+".key_fields", `is required: list JSON pointers like ["/account", "/amount"]`)
			}
			v.pointers(rp+".key_fields", r.KeyFields)
			if r.WindowMs == 0 && !v.has(rp+".window_ms") {
				v.fail(rp+".window_ms", "is required: how long a job holds its rule key, in milliseconds, like 60000")
			} else {
				v.queueMillis(rp+".window_ms", r.WindowMs)
			}
			if r.Limit < 0 || (r.Limit == 0 && v.has(rp+".limit")) || r.Limit > maxRuleLimit {
				v.bad(rp+".limit", fmt.Sprintf("must be between 1 and %d: how many jobs with one rule key may be created within the window, got %d", maxRuleLimit, r.Limit))
			}
			if r.Action != "" && r.Action != RuleActionReject && r.Action != RuleActionDelay {
				v.bad(rp+".action", fmt.Sprintf("must be %q or %q, got %q", RuleActionReject, RuleActionDelay, r.Action))
			}
		}
		for j, t := range q.JobTypes {
			if strings.TrimSpace(t) == "" {
				v.fail(p+".job_types", fmt.Sprintf("entry %d is empty; list job type names, or leave job_types out to accept every job type", j))
				break
			}
		}
		if q.MaxAttempts < 0 || (q.MaxAttempts == 0 && v.has(p+".max_attempts")) {
			v.bad(p+".max_attempts", fmt.Sprintf("must be >= 1, got %d", q.MaxAttempts))
		} else if q.MaxAttempts > math.MaxInt32 {
			v.bad(p+".max_attempts", fmt.Sprintf("must be at most %d, got %d", math.MaxInt32, q.MaxAttempts))
		}
		v.queueMillis(p+".lease_ms", q.LeaseMs)
		v.queueMillis(p+".backoff_initial_ms", q.BackoffInitialMs)
		v.queueMillis(p+".backoff_max_ms", q.BackoffMaxMs)

		r := c.resolve(q)
		if r.BackoffInitialMs > 0 && r.BackoffMaxMs > 0 && r.BackoffInitialMs > r.BackoffMaxMs {
			if q.BackoffInitialMs != 0 {
				v.fail(p+".backoff_initial_ms", fmt.Sprintf("must be <= backoff_max_ms (%d), got %d; lower it or raise backoff_max_ms", r.BackoffMaxMs, r.BackoffInitialMs))
			} else {
				v.fail(p+".backoff_max_ms", fmt.Sprintf("must be >= backoff_initial_ms (%d), got %d; raise it or lower backoff_initial_ms", r.BackoffInitialMs, r.BackoffMaxMs))
			}
		}
	}
	c.validateSchedules(v) // schedules.go
	c.validateWebhooks(v)
	c.validateOutboxes(v) // outboxes.go
	c.validateAuth(v)     // [auth], server.log_keys: auth.go
	c.validateTracing(v)  // [tracing]: tracing.go
	// The connection keys of [limits] (connlimits.go), then the range of
	// every whole-number key (ranges.go).
	v.validateConnectionLimits(c.Limits.ConnectionLimits)
	v.checkRanges(c)

	if len(v.problems) == 0 {
		return nil
	}
	return firstProblem(v.problems)
}

type validator struct {
	file     string
	org      origins
	problems []*Error
}

// has reports whether path was set in the file or the environment.
func (v *validator) has(path string) bool {
	_, ok := v.org[path]
	return ok
}

// line is the file line where path was set, or 0.
func (v *validator) line(path string) int {
	return v.org[path].line
}

// bad reports a bad value at path, adding what the key is.
func (v *validator) bad(path, msg string) { v.report(path, msg, true) }

// pointers checks that every entry of list, at path, is a JSON pointer.
func (v *validator) pointers(path string, list []string) {
	for _, f := range list {
		if err := jsonkey.CheckPointer(f); err != nil {
			v.fail(path, fmt.Sprintf("%q is not a JSON pointer (RFC 6901): %v; write it like \"/account\" or \"/order/id\"", f, err))
			return
		}
	}
}

// releaseKeyOn checks a queue's release_key_on: each entry a final state,
// none twice.
func (v *validator) releaseKeyOn(path string, list []string) {
	seen := map[string]bool{}
	for _, s := range list {
		switch {
		case s != "dead" && s != "cancelled" && s != "completed":
			v.fail(path, fmt.Sprintf(`%q is not a final state; the valid values are "dead", "cancelled" and "completed"`, s))
			return
		case seen[s]:
			v.fail(path, fmt.Sprintf("%q is listed twice; list each state once", s))
			return
		}
		seen[s] = true
	}
}

// fail reports a problem at path, as is.
func (v *validator) fail(path, msg string) { v.report(path, msg, false) }

// report blames the origin of path or, if path kept its default, of its
// nearest enclosing section set in the file ("queues[1]" for a missing
// "queues[1].name").
func (v *validator) report(path, msg string, withAbout bool) {
	for p := path; p != ""; p = parentKey(p) {
		o, ok := v.org[p]
		if !ok {
			continue
		}
		if o.env != "" {
			note := " (from the environment: it overrides " + path
			if a := about(path); withAbout && a != "" {
				note += ", " + a[2:]
			} else {
				note += ")"
			}
			v.problems = append(v.problems, &Error{Key: o.env, Msg: msg + note})
			return
		}
		if withAbout {
			msg += about(path)
		}
		v.problems = append(v.problems, &Error{File: v.file, Line: o.line, Key: path, Msg: msg})
		return
	}
	if withAbout {
		msg += about(path)
	}
	v.problems = append(v.problems, &Error{File: v.file, Key: path, Msg: msg})
}

// parentKey strips the last element of a key path: "queues[1].name" gives
// "queues[1]", which gives "queues".
func parentKey(p string) string {
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

func (v *validator) positive(path string, n int64) {
	if n <= 0 {
		v.bad(path, fmt.Sprintf("must be > 0, got %d", n))
	}
}

func (v *validator) millis(path string, n int64) {
	switch {
	case n <= 0:
		v.bad(path, fmt.Sprintf("must be > 0, got %d", n))
	case n > MaxMs:
		v.bad(path, fmt.Sprintf("must be at most %d (about 292 years), got %d", MaxMs, n))
	}
}

// queueMillis checks a queue duration, where 0 means "not set" unless the
// key is in the file.
func (v *validator) queueMillis(path string, n int64) {
	if n == 0 && !v.has(path) {
		return
	}
	v.millis(path, n)
}

// checkListen returns what is wrong with a listen address, or "".
func checkListen(addr string) string {
	if addr == "" {
		return `must not be empty; use host:port, like "127.0.0.1:50051" or ":50051"`
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf(`must be host:port, like "127.0.0.1:50051" or ":50051", got %q`, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("must end in a port number from 0 to 65535, got %q", addr)
	}
	return checkListenHost(host) // listen.go
}

// checkPostgresURL returns what is wrong with a postgres connection string,
// or "". It never quotes the string, which may hold a password.
func checkPostgresURL(s string) string {
	if !strings.Contains(s, "://") {
		if strings.Contains(s, "=") {
			return "" // keyword/value form: host=... dbname=...
		}
		return "must be a URL like " + postgresExample + " (or a key=value connection string)"
	}
	u, err := url.Parse(s)
	if err != nil {
		return "is not a valid URL; write it like " + postgresExample
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Sprintf("must start with postgres:// or postgresql://, got %q", shorten(u.Scheme)+"://")
	}
	return ""
}

// CheckQueueName applies the rules every queue name follows, in the config
// and on the wire: 1 to MaxQueueNameBytes bytes of UTF-8, no leading or
// trailing spaces, no invisible characters (checkVisible: Unicode control
// and format characters, line and paragraph separators).
func CheckQueueName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) > MaxQueueNameBytes:
		return fmt.Errorf("is %d bytes; the limit is %d", len(name), MaxQueueNameBytes)
	case !utf8.ValidString(name):
		return errors.New("is not valid UTF-8")
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%q has leading or trailing spaces", name)
	}
	return checkVisible(name)
}
