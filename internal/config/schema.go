package config

import (
	"fmt"
	"strings"
)

// valueKind is the TOML shape a key expects.
type valueKind int

const (
	kindString valueKind = iota + 1
	kindBool
	kindInt
	kindStringList
	kindTable
	kindTableArray
	kindFloat
)

// want describes the expected shape, for "must be ..." messages.
func (k valueKind) want() string {
	switch k {
	case kindString:
		return `a string in double quotes, like "text"`
	case kindBool:
		return "true or false"
	case kindInt:
		return "a whole number, like 1000"
	case kindStringList:
		return `a list of strings, like ["a", "b"]`
	case kindTable:
		return "a table"
	case kindTableArray:
		return "a list of tables"
	case kindFloat:
		return "a number, like 0.25"
	}
	return "?"
}

// noun names the kind briefly: "a string".
func (k valueKind) noun() string {
	switch k {
	case kindString:
		return "a string"
	case kindBool:
		return "a boolean"
	case kindInt:
		return "a number"
	case kindStringList:
		return "a list of strings"
	case kindTable:
		return "a table"
	case kindTableArray:
		return "a list of tables"
	case kindFloat:
		return "a number"
	}
	return "?"
}

// hint says how to write a value of this kind, for syntax errors.
func (k valueKind) hint() string {
	switch k {
	case kindString:
		return `put the value in double quotes, like "text"`
	case kindBool:
		return "write true or false"
	case kindInt:
		return "write a whole number, like 1000"
	case kindStringList:
		return `write a list of strings, like ["a", "b"]`
	case kindFloat:
		return "write a number, like 0.25"
	}
	return ""
}

// keySpec describes one key of the file.
type keySpec struct {
	// path is the key's path, with "[]" for the elements of an array of
	// tables: "queues[].name".
	path string
	kind valueKind
	// about says what the key is, for messages: "the dedup window in
	// milliseconds; default 86400000".
	about string
}

// specs lists every key, sections first; validate, the walk and the tests
// use it. Its order is the order of "valid keys" hints.
var specs = []keySpec{
	{"server", kindTable, "the [server] section"},
	{"server.listen", kindString, `the address to listen on, host:port; default "127.0.0.1:50051"`},
	{"server.strict", kindBool, "true makes every call that names an undeclared queue fail with UNKNOWN_QUEUE; default false"},
	{"server.max_payload_bytes", kindInt, "the largest job payload accepted, in bytes; default 1048576"},
	{"server.max_batch_size", kindInt, "the most jobs one EnqueueBatch call may carry; default 1000"},
	{"server.allow_unauthenticated", kindBool, "true lets the server listen beyond loopback with no [[auth.tokens]]; default false"},
	{"server.log_keys", kindString, `how log lines show idempotency keys, "full", "hash" (sha256:<16 hex digits>) or "none"; default "full"`},
	{"server.tls_cert_file", kindString, "the PEM certificate chain the port serves TLS with, set together with tls_key_file; default: no TLS"},
	{"server.tls_key_file", kindString, "the PEM private key of tls_cert_file; default: no TLS"},
	{"server.tls_client_ca_file", kindString, "the PEM CA certificates a client certificate must chain to (mutual TLS); default: no client certificate asked for"},

	{"storage", kindTable, "the [storage] section"},
	{"storage.backend", kindString, `the storage backend: "embedded" (the Pebble store in path) or "postgres"; default "embedded"`},
	{"storage.path", kindString, `the embedded store's data directory; default "./sepp-data"`},
	{"storage.url", kindString, "the postgres URL, like postgres://user@127.0.0.1:5432/sepp; required with backend = \"postgres\""},
	{"storage.dedup_window_ms", kindInt, "the dedup window in milliseconds; default 86400000"},
	{"storage.max_idempotency_key_bytes", kindInt, "the longest idempotency key accepted, in bytes; default 256"},
	{"storage.sweep_interval_ms", kindInt, "how often expired records are deleted, in milliseconds; default 60000"},
	{"storage.pool_size", kindInt, "the most PostgreSQL connections a node opens; default 16"},
	{"storage.completed_retention_ms", kindInt, "how long completed jobs are kept, in milliseconds; default 86400000"},
	{"storage.dead_retention_ms", kindInt, "how long dead-lettered jobs are kept, in milliseconds; default 604800000"},

	{"limits", kindTable, "the [limits] table"},
	{"limits.max_reserve_queues", kindInt, "the most queues one Reserve may name; default 100"},
	{"limits.max_reserve_jobs", kindInt, "the largest max_jobs a Reserve may ask for; default 1000"},
	{"limits.max_long_polls_per_connection", kindInt, "the most waiting Reserve and ClaimEffect calls one connection may hold; default 100"},
	{"limits.max_long_polls", kindInt, "the most waiting Reserve and ClaimEffect calls the node holds; default 10000"},
	{"limits.max_long_polls_per_client", kindInt, "the most waiting Reserve and ClaimEffect calls one client (a token, or else an IP address) may hold; default 1000, at most half of max_long_polls"},
	{"limits.max_queue_labels", kindInt, "how many queues not declared in [[queues]] get series of their own on /metrics; the others count as queue=\"other\"; default 100"},
	{"limits.max_request_bytes", kindInt, "the largest request message read, in bytes; default derived from max_payload_bytes and max_batch_size"},
	{"limits.max_connections", kindInt, "the most client connections held open at once; default 10000, lowered to fit the open-file limit"},
	{"limits.max_connections_per_ip", kindInt, "the most connections one client IP address may hold open at once; default 1000"},
	{"limits.max_streams_per_connection", kindInt, "the most calls one HTTP/2 connection may have open at once; default 1000"},
	{"limits.idle_timeout_ms", kindInt, "how long a connection with no request in progress is kept, in milliseconds; default 120000"},
	{"limits.header_timeout_ms", kindInt, "how long a request's headers may take to arrive, in milliseconds; default 10000"},
	{"limits.body_timeout_ms", kindInt, "how long a request body may take to arrive, in milliseconds; default 60000"},

	{"queues", kindTableArray, "the queue declarations, one [[queues]] section each"},
	{"queues[].name", kindString, "the queue name; required"},
	{"queues[].dedup_window_ms", kindInt, "this queue's dedup window in milliseconds; default storage.dedup_window_ms"},
	{"queues[].key_reuse", kindString, `what a reused key with another payload gets, "return_original" or "reject_mismatch"; default "return_original"`},
	{"queues[].dedup_by_content", kindBool, "true also deduplicates jobs without an idempotency key, by content; default false"},
	{"queues[].job_types", kindStringList, "the only job types accepted; default: all"},
	{"queues[].max_attempts", kindInt, "how many times a job is tried before it is dead-lettered; default 25"},
	{"queues[].lease_ms", kindInt, "how long a worker holds a job, in milliseconds; default 30000"},
	{"queues[].backoff_initial_ms", kindInt, "the first retry delay, in milliseconds; default 1000"},
	{"queues[].backoff_max_ms", kindInt, "the longest retry delay, in milliseconds; default 3600000"},
	{"queues[].require_key", kindBool, "true refuses an enqueue with no idempotency key, given or derived; default false"},
	{"queues[].key_fields", kindStringList, `JSON pointers into the payload that make the key of a job enqueued without one, like ["/account", "/amount"]; default: none`},
	{"queues[].on_duplicate", kindString, `what a dedup hit gets, "return_original", "reject", "replace" or "debounce"; default "return_original"`},
	{"queues[].debounce_ms", kindInt, `with on_duplicate = "debounce": how long after the last enqueue the job runs, in milliseconds`},
	{"queues[].debounce_max_wait_ms", kindInt, `with on_duplicate = "debounce": the longest a job waits after its first enqueue, in milliseconds; default: no bound`},
	{"queues[].release_key_on", kindStringList, `the final states, of "dead", "cancelled" and "completed", that free a job's idempotency key at once; default: none`},
	{"queues[].rules", kindTableArray, "uniqueness rules besides the key, one [[queues.rules]] section each"},
	{"queues[].rules[].name", kindString, "the rule's name, unique in its queue; required"},
	{"queues[].rules[].key_fields", kindStringList, `JSON pointers into the payload that make the rule key, like ["/account", "/amount"]; required`},
	{"queues[].rules[].window_ms", kindInt, "the rule's window, in milliseconds; required"},
	{"queues[].rules[].limit", kindInt, "how many jobs with one rule key may be created within any window; default 1"},
	{"queues[].rules[].action", kindString, `what a job that finds the window full gets, "reject" (DEDUP_RULE_VIOLATED) or "delay" (scheduled for the first moment the window has room); default "reject"`},
	{"queues[].concurrency", kindTable, "per-key concurrency: the [queues.concurrency] section"},
	{"queues[].concurrency.key_fields", kindStringList, `JSON pointers into the payload that make a job's concurrency key, like ["/account"]; default: one key for the whole queue`},
	{"queues[].concurrency.limit", kindInt, "how many jobs of one key may be reserved at once; default 1"},
	{"queues[].concurrency.ordered", kindBool, "true delivers the jobs of one key in enqueue order, a job waiting for its retry holding the later ones; default false"},
	{"queues[].rate", kindTable, "per-key delivery rate: the [queues.rate] section"},
	{"queues[].rate.key_fields", kindStringList, `JSON pointers into the payload that make a job's rate key, like ["/account"]; default: one key for the whole queue`},
	{"queues[].rate.limit", kindInt, "how many jobs of one key may be reserved within any period; default 1"},
	{"queues[].rate.period_ms", kindInt, "the period, in milliseconds; required"},
	{"queues[].when_running", kindString, `what a keyed enqueue gets while the job its key names runs, "return_original" or "run_again" (one follow-up job that runs after it); default "return_original"`},

	{"auth", kindTable, "the [auth] section: the tokens calls must carry"},
	{"auth.metrics_token_role", kindString, `the role whose tokens (and admin's) may read /metrics, "producer", "worker", "reader" or "admin"; default: /metrics is open`},
	{"auth.tokens", kindTableArray, "the API tokens, one [[auth.tokens]] section each"},
	{"auth.tokens[].name", kindString, "the token's name, shown in logs and errors; required"},
	{"auth.tokens[].secret_sha256", kindString, "the hex SHA-256 of the token's secret, as sepp token create prints it"},
	{"auth.tokens[].secret_env", kindString, "the environment variable holding the token's secret"},
	{"auth.tokens[].secret_file", kindString, "the file holding the token's secret"},
	{"auth.tokens[].secret", kindString, "never accepted: use secret_sha256, secret_env or secret_file"},
	{"auth.tokens[].roles", kindStringList, `the token's roles, of "producer", "worker", "reader" and "admin"; required`},
	{"auth.tokens[].queues", kindStringList, `the queues the token may touch, names or globs like "payments*"; default: all`},

	{"webhooks", kindTableArray, "the webhook endpoints, one [[webhooks]] section each"},
	{"webhooks[].path", kindString, `the URL path the webhook is served at, like "/hooks/github"; required`},
	{"webhooks[].queue", kindString, "the queue the webhook's jobs go to; required"},
	{"webhooks[].job_type", kindString, "the job type of the webhook's jobs; required"},
	{"webhooks[].key_header", kindString, `the request header holding the idempotency key; default "Idempotency-Key"`},
	{"webhooks[].require_key", kindBool, "true answers 400 to a request without the key header; default true"},
	{"webhooks[].forward_headers", kindStringList, `request headers copied into the job's headers, like ["X-GitHub-Event"]; default: none`},
	{"webhooks[].max_body_bytes", kindInt, "the largest request body accepted, in bytes; default server.max_payload_bytes"},
	{"webhooks[].signature", kindTable, "how the sender signs its requests; default: no signature checked"},
	{"webhooks[].signature.scheme", kindString, `the signature scheme, "github", "stripe" or "hmac-sha256"; required in [webhooks.signature]`},
	{"webhooks[].signature.secret_env", kindString, "the environment variable holding the signing secret"},
	{"webhooks[].signature.secret_file", kindString, "the file holding the signing secret"},
	{"webhooks[].signature.secret", kindString, "never accepted: use secret_env or secret_file"},
	{"webhooks[].signature.header", kindString, `the header holding the signature, with scheme = "hmac-sha256"`},
	{"webhooks[].signature.prefix", kindString, `the text before the hex digest, like "sha256=", with scheme = "hmac-sha256"; default ""`},
	{"webhooks[].signature.timestamp_tolerance_ms", kindInt, `how far a signed timestamp may be from the server's clock, in milliseconds, with scheme = "stripe"; default 300000`},
	{"outboxes", kindTableArray, "the app databases whose outbox tables sepp serve relays into jobs, one [[outboxes]] section each"},
	{"outboxes[].name", kindString, `the outbox's name in logs, metrics and the dashboard, like "orders-db"; required`},
	{"outboxes[].dialect", kindString, `the app database's dialect, "postgres", "mysql" or "sqlite"; required`},
	{"outboxes[].url_env", kindString, "the environment variable holding the database's connection string"},
	{"outboxes[].url_file", kindString, "the file holding the database's connection string"},
	{"outboxes[].url", kindString, "never accepted: use url_env or url_file"},
	{"outboxes[].table", kindString, `the outbox table, optionally schema.table; default "sepp_outbox"`},
	{"outboxes[].batch_size", kindInt, "the most rows one relay pass claims and enqueues; default 100"},
	{"outboxes[].poll_interval_ms", kindInt, "how often the relay looks for rows when nothing woke it, in milliseconds; default 1000"},
	{"schedules", kindTableArray, "jobs enqueued at the ticks of a cron expression, once across every node, one [[schedules]] section each"},
	{"schedules[].name", kindString, `the schedule's name in its jobs' keys, logs, metrics and the dashboard, like "nightly-report"; required`},
	{"schedules[].cron", kindString, `five cron fields like "0 3 * * *", a descriptor like "@hourly", or "@every 30s"; required`},
	{"schedules[].timezone", kindString, `the IANA zone the cron fields are read in, like "Europe/Berlin"; default "UTC"`},
	{"schedules[].queue", kindString, "the queue of the tick's job; required"},
	{"schedules[].job_type", kindString, "the job type of the tick's job; required"},
	{"schedules[].payload", kindString, `the job's payload, the string's UTF-8 bytes, like "{\"report\": \"daily\"}"; default empty`},
	{"schedules[].payload_file", kindString, "a file whose bytes are the job's payload, read at start; instead of payload"},
	{"schedules[].headers", kindTable, `the job's headers, like { "X-Source" = "cron" }; default none`},
	{"schedules[].catch_up", kindString, `what to fire of the ticks missed while no node ran: "none", "last" or "all"; default "last"`},

	{"tracing", kindTable, "the [tracing] section: OpenTelemetry traces over OTLP/HTTP"},
	{"tracing.enabled", kindBool, "true exports spans; default false"},
	{"tracing.endpoint", kindString, `where spans go, a URL like "http://127.0.0.1:4318" or host:port like "collector:4318"; default the OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT variable, else https://localhost:4318/v1/traces`},
	{"tracing.insecure", kindBool, "true sends spans to a host:port endpoint over plain HTTP; default false"},
	{"tracing.service_name", kindString, `the service.name of every span; default "sepp"`},
	{"tracing.sample_ratio", kindFloat, "the share of the traces the server starts that are kept, from 0 to 1; default 1"},
}

var (
	// specByPath indexes specs by path.
	specByPath = map[string]*keySpec{}
	// childNames lists the keys directly under a path ("" is the root), in
	// specs order.
	childNames = map[string][]string{}
)

func init() {
	for i := range specs {
		s := &specs[i]
		specByPath[s.path] = s
		parent, name := splitPath(s.path)
		childNames[parent] = append(childNames[parent], name)
	}
}

// splitPath splits a spec path into its parent (with a trailing "[]" of an
// array of tables removed) and last key: "queues[].name" gives "queues[]",
// "name".
func splitPath(p string) (parent, name string) {
	i := strings.LastIndexByte(p, '.')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

// section names a spec path as the user writes its header: "[server]",
// "[[queues]]", or "the top level" for the root.
func section(p string) string {
	switch {
	case p == "":
		return "the top level"
	case strings.HasSuffix(p, "[]"):
		return "[[" + strings.TrimSuffix(p, "[]") + "]]"
	}
	// A table inside an array of tables is written without the brackets:
	// [webhooks.signature].
	return "[" + strings.ReplaceAll(p, "[]", "") + "]"
}

// about returns the spec's help for a key path such as "queues[3].lease_ms",
// formatted as " (help)", or "" for an unknown key.
func about(path string) string {
	if s := specByPath[specPath(path)]; s != nil {
		return " (" + s.about + ")"
	}
	return ""
}

// specPath turns a key path into its spec path: "queues[3].lease_ms" gives
// "queues[].lease_ms".
func specPath(path string) string {
	if !strings.Contains(path, "[") {
		return path
	}
	var b strings.Builder
	skip := false
	for _, r := range path {
		switch {
		case r == '[':
			b.WriteString("[]")
			skip = true
		case r == ']':
			skip = false
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// unknownKeyMsg is the message for key name found under the spec path parent
// (which is itself known): a did-you-mean if a key there is close, else the
// sections where name does exist, else the list of valid keys.
func unknownKeyMsg(parent, name string, header bool) string {
	what := "unknown key"
	if header {
		what = "unknown section"
	}
	cands := childNames[parent]
	best, bestD := "", 3
	lower := strings.ToLower(name)
	for _, c := range cands {
		d := editDistance(lower, c)
		if len(lower) >= 4 && strings.HasPrefix(c, lower+"_") {
			d = 1 // the unit left out: "lease" for "lease_ms"
		}
		if d < bestD && d <= len(c)/3+1 {
			best, bestD = c, d
		}
	}
	if best != "" {
		if parent == "" {
			return fmt.Sprintf("%s (did you mean %s?)", what, section(specByPath[best].sectionPath()))
		}
		return fmt.Sprintf("%s (did you mean %q?)", what, best)
	}
	var elsewhere []string
	for _, s := range specs {
		if p, n := splitPath(s.path); n == name && p != parent {
			elsewhere = append(elsewhere, section(p))
		}
	}
	if len(elsewhere) > 0 {
		where := "in " + section(parent)
		if parent == "" {
			where = "at the top level"
		}
		return fmt.Sprintf("%s %s (it belongs in %s)", what, where, strings.Join(elsewhere, " or "))
	}
	if parent == "" {
		var valid []string
		for _, c := range cands {
			valid = append(valid, section(specByPath[c].sectionPath()))
		}
		return fmt.Sprintf("%s; the sections are %s", what, strings.Join(valid, ", "))
	}
	return fmt.Sprintf("%s; the keys of %s are %s", what, section(parent), strings.Join(cands, ", "))
}

// sectionPath is the path of the section a table key opens: "queues[]" for
// the array of tables "queues".
func (s *keySpec) sectionPath() string {
	if s.kind == kindTableArray {
		return s.path + "[]"
	}
	return s.path
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
