package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fullFile sets every key.
const fullFile = `# sepp.toml
[server]
listen = "0.0.0.0:6000"
strict = true
max_payload_bytes = 2048
max_batch_size = 50

[storage]
backend = "postgres"
path = "/var/lib/sepp"
url = "postgres://sepp@db.internal:5432/sepp"
dedup_window_ms = 3600000
max_idempotency_key_bytes = 128
sweep_interval_ms = 5000
completed_retention_ms = 7200000
dead_retention_ms = 86400000

[[queues]]
name = "payments"
dedup_window_ms = 604800000    # 7 days for a high-stakes queue
key_reuse = "reject_mismatch"
dedup_by_content = true
job_types = ["charge", "refund"]
max_attempts = 5
lease_ms = 60000
backoff_initial_ms = 2000
backoff_max_ms = 120000

[[queues]]
name = "emails"
`

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestNoFileIsDefault(t *testing.T) {
	for _, load := range []func() (*Config, error){
		func() (*Config, error) { return LoadWith("", nil) },
		func() (*Config, error) { return LoadWith("", env(nil)) },
		func() (*Config, error) { return Parse("sepp.toml", nil) },
		func() (*Config, error) { return Parse("sepp.toml", []byte("# nothing\n\n")) },
	} {
		c, err := load()
		if err != nil {
			t.Fatal(err)
		}
		d := Default()
		if c.Server != d.Server || c.Storage != d.Storage || len(c.Queues) != 0 {
			t.Errorf("got %+v, want %+v", c, d)
		}
	}
	d := Default()
	if err := d.validate("", nil); err != nil {
		t.Fatalf("Default() is invalid: %v", err)
	}
	if d.Server.Listen != "127.0.0.1:50051" || d.Server.Strict || d.Server.MaxPayloadBytes != 1048576 ||
		d.Server.MaxBatchSize != 1000 || d.Storage.Backend != BackendEmbedded || d.Storage.Path != "./sepp-data" ||
		d.Storage.URL != "" || d.Storage.DedupWindow() != 24*time.Hour || d.Storage.MaxIdempotencyKeyBytes != 256 ||
		d.Storage.SweepInterval() != time.Minute || d.Storage.CompletedRetention() != 24*time.Hour ||
		d.Storage.DeadRetention() != 7*24*time.Hour {
		t.Errorf("Default() = %+v does not match the documented defaults", d)
	}
}

func TestFullFile(t *testing.T) {
	c, err := Parse("sepp.toml", []byte(fullFile))
	if err != nil {
		t.Fatal(err)
	}
	wantServer := ServerConfig{Listen: "0.0.0.0:6000", Strict: true, MaxPayloadBytes: 2048, MaxBatchSize: 50, LogKeys: LogKeysFull}
	if c.Server != wantServer {
		t.Errorf("Server = %+v, want %+v", c.Server, wantServer)
	}
	wantStorage := StorageConfig{
		Backend: BackendPostgres, Path: "/var/lib/sepp", URL: "postgres://sepp@db.internal:5432/sepp",
		DedupWindowMs: 3600000, MaxIdempotencyKeyBytes: 128, SweepIntervalMs: 5000, PoolSize: 16,
		CompletedRetentionMs: 7200000, DeadRetentionMs: 86400000,
	}
	if c.Storage != wantStorage {
		t.Errorf("Storage = %+v, want %+v", c.Storage, wantStorage)
	}
	if c.Storage.DedupWindow() != time.Hour || c.Storage.SweepInterval() != 5*time.Second ||
		c.Storage.CompletedRetention() != 2*time.Hour || c.Storage.DeadRetention() != 24*time.Hour {
		t.Errorf("storage durations wrong: %+v", c.Storage)
	}
	wantPayments := QueueConfig{
		Name: "payments", DedupWindowMs: 604800000, KeyReuse: KeyReuseRejectMismatch, DedupByContent: true,
		JobTypes: []string{"charge", "refund"}, MaxAttempts: 5, LeaseMs: 60000, BackoffInitialMs: 2000, BackoffMaxMs: 120000, OnDuplicate: OnDuplicateReturnOriginal, WhenRunning: WhenRunningReturnOriginal,
	}
	rawPayments := wantPayments // as the file says it, before defaults
	rawPayments.OnDuplicate, rawPayments.WhenRunning = "", ""
	if len(c.Queues) != 2 || !reflect.DeepEqual(c.Queues[0], rawPayments) || !reflect.DeepEqual(c.Queues[1], QueueConfig{Name: "emails"}) {
		t.Errorf("Queues = %+v", c.Queues)
	}
	if got := c.Queue("payments"); !reflect.DeepEqual(got, wantPayments) {
		t.Errorf("Queue(payments) = %+v, want %+v", got, wantPayments)
	}
	q := c.Queue("payments")
	if q.DedupWindow() != 7*24*time.Hour || q.Lease() != time.Minute || q.BackoffInitial() != 2*time.Second || q.BackoffMax() != 2*time.Minute {
		t.Errorf("payments durations wrong: %+v", q)
	}
	if !q.AcceptsJobType("charge") || q.AcceptsJobType("email") {
		t.Errorf("payments job types wrong")
	}
	// emails inherits the storage window (1 h here) and the queue defaults.
	wantEmails := QueueConfig{
		Name: "emails", DedupWindowMs: 3600000, KeyReuse: KeyReuseReturnOriginal,
		MaxAttempts: 25, LeaseMs: 30000, BackoffInitialMs: 1000, BackoffMaxMs: 3600000, OnDuplicate: OnDuplicateReturnOriginal, WhenRunning: WhenRunningReturnOriginal,
	}
	if got := c.Queue("emails"); !reflect.DeepEqual(got, wantEmails) {
		t.Errorf("Queue(emails) = %+v, want %+v", got, wantEmails)
	}
	if !c.Queue("emails").AcceptsJobType("anything") {
		t.Error("a queue without job_types must accept every type")
	}
	wantOther := wantEmails
	wantOther.Name = "other"
	if got := c.Queue("other"); !reflect.DeepEqual(got, wantOther) {
		t.Errorf("Queue(other) = %+v, want %+v", got, wantOther)
	}
	if !c.Declared("payments") || !c.Declared("emails") || c.Declared("other") || c.Declared("") {
		t.Error("Declared is wrong")
	}
}

func TestSpecExampleParses(t *testing.T) {
	const doc = `[server]
listen = "127.0.0.1:50051"
strict = false                 # true: enqueue to an undeclared queue fails with UNKNOWN_QUEUE
max_payload_bytes = 1048576
max_batch_size = 1000

[storage]
backend = "embedded"           # the default; or "postgres"
path = "./sepp-data"           # embedded
url = ""                       # postgres, e.g. postgres://user@127.0.0.1:5432/sepp
dedup_window_ms = 86400000     # 24 h, the default window for every queue
max_idempotency_key_bytes = 256
sweep_interval_ms = 60000
completed_retention_ms = 86400000
dead_retention_ms = 604800000

[[queues]]
name = "payments"
dedup_window_ms = 604800000    # 7 days for a high-stakes queue
key_reuse = "return_original"  # or "reject_mismatch"
dedup_by_content = false
job_types = []                 # non-empty: only these job types are accepted
max_attempts = 25
lease_ms = 30000
backoff_initial_ms = 1000
backoff_max_ms = 3600000
`
	c, err := Parse("sepp.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if c.Server != d.Server || c.Storage != d.Storage {
		t.Errorf("the documented example should equal the defaults: %+v", c)
	}
	if q := c.Queue("payments"); q.DedupWindow() != 7*24*time.Hour || q.JobTypes != nil || !q.AcceptsJobType("x") {
		t.Errorf("Queue(payments) = %+v", q)
	}
}

func TestOtherTOMLForms(t *testing.T) {
	// Inline tables, dotted keys, an inline array of queues, CRLF and a BOM
	// are all TOML; they must decode and carry positions like the rest.
	docs := []string{
		"server = { listen = \":7000\", strict = true }\nqueues = [{ name = \"a\", max_attempts = 3 }, { name = \"b\" }]\n",
		"server.listen = \":7000\"\nserver.strict = true\n[[queues]]\nname = \"a\"\nmax_attempts = 3\n[[queues]]\nname = \"b\"\n",
		"\ufeff[server]\r\nlisten = \":7000\"\r\nstrict = true\r\n[[queues]]\r\nname = \"a\"\r\nmax_attempts = 3\r\n[[queues]]\r\nname = 'b'\r\n",
	}
	for _, doc := range docs {
		c, err := Parse("sepp.toml", []byte(doc))
		if err != nil {
			t.Errorf("%q: %v", doc, err)
			continue
		}
		if c.Server.Listen != ":7000" || !c.Server.Strict || c.Queue("a").MaxAttempts != 3 || !c.Declared("b") {
			t.Errorf("%q: got %+v", doc, c)
		}
	}
}

// TestBadFiles checks the exact message of every kind of bad file.
func TestBadFiles(t *testing.T) {
	tests := []struct {
		name, doc string
		line      int
		key       string
		want      string // the whole Error()
	}{
		// TOML syntax
		{"syntax: unquoted string", "[server]\nlisten = 127.0.0.1:50051\n", 2, "server.listen",
			`sepp.toml:2: server.listen: TOML syntax error: expected newline but got U+002E '.'; put the value in double quotes, like "text" (the address to listen on, host:port; default "127.0.0.1:50051")`},
		{"syntax: bare word", "[storage]\nbackend = postgres\n", 2, "storage.backend",
			`sepp.toml:2: storage.backend: TOML syntax error: unexpected character U+0070 'p' at start of value; put the value in double quotes, like "text" (the storage backend: "embedded" (the Pebble store in path) or "postgres"; default "embedded")`},
		{"syntax: unclosed header", "\n[server\nlisten = \"x\"\n", 2, "",
			`sepp.toml:2: TOML syntax error: expected ']' to close table name`},
		{"syntax: unclosed array", "[[queues]]\nname = \"a\"\njob_types = [\"x\",\n", 3, "queues[0].job_types",
			`sepp.toml:3: queues[0].job_types: TOML syntax error: array is incomplete; write a list of strings, like ["a", "b"] (the only job types accepted; default: all)`},
		{"syntax: key set twice", "[server]\nstrict = true\nstrict = false\n", 3, "server.strict",
			`sepp.toml:3: server.strict: set twice (first at line 2); keep one`},
		{"syntax: section twice", "[storage]\npath = \"a\"\n[server]\n[storage]\n", 4, "storage",
			`sepp.toml:4: storage: section [storage] appears twice (first at line 1); merge them`},
		{"syntax: int too big", "[server]\nmax_batch_size = 99999999999999999999\n", 2, "server.max_batch_size",
			`sepp.toml:2: server.max_batch_size: decimal number is too large to fit in a 64-bit signed integer (the most jobs one EnqueueBatch call may carry; default 1000)`},
		{"syntax: inline then header", "server = { strict = true }\n[server]\n", 2, "server",
			`sepp.toml:2: server: key server should be a table, not a value (the [server] section)`},

		// unknown keys
		{"unknown key: did you mean", "[server]\n\nlistne = \"x\"\n", 3, "server.listne",
			`sepp.toml:3: server.listne: unknown key (did you mean "listen"?)`},
		{"unknown key: case", "[server]\nListen = \"x\"\n", 2, "server.Listen",
			`sepp.toml:2: server.Listen: unknown key (did you mean "listen"?)`},
		{"unknown key: wrong section", "[server]\ndedup_window_ms = 5\n", 2, "server.dedup_window_ms",
			`sepp.toml:2: server.dedup_window_ms: unknown key in [server] (it belongs in [storage] or [[queues]])`},
		{"unknown key: top level", "listen = \":1\"\n", 1, "listen",
			`sepp.toml:1: listen: unknown key at the top level (it belongs in [server])`},
		{"unknown key: list", "[storage]\nfoo = 1\n", 2, "storage.foo",
			`sepp.toml:2: storage.foo: unknown key; the keys of [storage] are backend, path, url, dedup_window_ms, max_idempotency_key_bytes, sweep_interval_ms, pool_size, completed_retention_ms, dead_retention_ms`},
		{"unknown key: in queue", "[[queues]]\nname = \"a\"\n[[queues]]\nname = \"b\"\nnmae = \"c\"\n", 5, "queues[1].nmae",
			`sepp.toml:5: queues[1].nmae: unknown key (did you mean "name"?)`},
		{"unknown key: inline queue", "queues = [{ name = \"a\" }, { name = \"b\", lease = 5 }]\n", 1, "queues[1].lease",
			`sepp.toml:1: queues[1].lease: unknown key (did you mean "lease_ms"?)`},
		{"unknown key: quoted dotted", "\"server.listen\" = \":1\"\n", 1, `"server.listen"`,
			`sepp.toml:1: "server.listen": unknown key; the sections are [server], [storage], [limits], [[queues]], [auth], [[webhooks]], [[outboxes]], [[schedules]], [tracing]`},
		{"unknown section: did you mean", "[serverr]\n", 1, "serverr",
			`sepp.toml:1: serverr: unknown section (did you mean [server]?)`},
		{"unknown section: queue", "[queue]\nname = \"a\"\n", 1, "queue",
			`sepp.toml:1: queue: unknown section (did you mean [[queues]]?)`},
		{"unknown section", "[metrics]\n", 1, "metrics",
			`sepp.toml:1: metrics: unknown section; the sections are [server], [storage], [limits], [[queues]], [auth], [[webhooks]], [[outboxes]], [[schedules]], [tracing]`},
		{"unknown subsection", "[server.tls]\n", 1, "server.tls",
			`sepp.toml:1: server.tls: unknown section; the keys of [server] are listen, strict, max_payload_bytes, max_batch_size, allow_unauthenticated, log_keys, tls_cert_file, tls_key_file, tls_client_ca_file`},

		// wrong shape or type
		{"type: bool as string", "[server]\nstrict = \"yes\"\n", 2, "server.strict",
			`sepp.toml:2: server.strict: must be true or false, got the string "yes" (true makes every call that names an undeclared queue fail with UNKNOWN_QUEUE; default false)`},
		{"type: int as string", "[server]\nmax_batch_size = \"big\"\n", 2, "server.max_batch_size",
			`sepp.toml:2: server.max_batch_size: must be a whole number, like 1000, got the string "big" (the most jobs one EnqueueBatch call may carry; default 1000)`},
		{"type: int as float", "[storage]\nsweep_interval_ms = 1.5\n", 2, "storage.sweep_interval_ms",
			`sepp.toml:2: storage.sweep_interval_ms: must be a whole number, like 1000, got the number 1.5 (how often expired records are deleted, in milliseconds; default 60000)`},
		{"type: string as int", "[server]\nlisten = 50051\n", 2, "server.listen",
			`sepp.toml:2: server.listen: must be a string in double quotes, like "text", got the whole number 50051 (the address to listen on, host:port; default "127.0.0.1:50051")`},
		{"type: date", "[[queues]]\nname = \"a\"\nlease_ms = 2024-01-01\n", 3, "queues[0].lease_ms",
			`sepp.toml:3: queues[0].lease_ms: must be a whole number, like 1000, got the date/time 2024-01-01 (how long a worker holds a job, in milliseconds; default 30000)`},
		{"type: queue bool", "[[queues]]\nname = \"a\"\ndedup_by_content = 1\n", 3, "queues[0].dedup_by_content",
			`sepp.toml:3: queues[0].dedup_by_content: must be true or false, got the whole number 1 (true also deduplicates jobs without an idempotency key, by content; default false)`},
		{"type: job_types not a list", "[[queues]]\nname = \"a\"\njob_types = \"x\"\n", 3, "queues[0].job_types",
			`sepp.toml:3: queues[0].job_types: must be a list of strings, like ["a", "b"], got the string "x" (the only job types accepted; default: all)`},
		{"type: job_types entry", "[[queues]]\nname = \"a\"\njob_types = [\"x\", 2]\n", 3, "queues[0].job_types",
			`sepp.toml:3: queues[0].job_types: must be a list of strings, like ["a", "b"], got the whole number 2 as entry 1 (the only job types accepted; default: all)`},
		{"type: section as value", "server = 5\n", 1, "server",
			`sepp.toml:1: server: must be a table, got the whole number 5 (the [server] section)`},
		{"type: [queues]", "[queues]\nname = \"a\"\n", 1, "queues",
			`sepp.toml:1: queues: is not a section: write [[queues]], not [queues]`},
		{"type: [[server]]", "[[server]]\n", 1, "server",
			`sepp.toml:1: server: is not a list of tables: write [server], not [[server]]`},
		{"type: [server.listen]", "[server.listen]\n", 1, "server.listen",
			`sepp.toml:1: server.listen: is not a section: write listen = ... in [server], not [server.listen]`},
		{"type: [queues.name]", "[[queues]]\nname = \"a\"\n[queues.name]\n", 3, "queues[0].name",
			`sepp.toml:3: queues[0].name: is not a section: write name = ... in [[queues]], not [queues.name]`},
		{"type: dotted into value", "server.listen.port = 1\n", 1, "server.listen",
			`sepp.toml:1: server.listen: is a string, not a table`},
		{"type: queue not a table", "queues = [{ name = \"a\" }, \"b\"]\n", 1, "queues[1]",
			`sepp.toml:1: queues[1]: must be a table, like { name = "emails" }, got the string "b"`},
		{"type: queue subsection", "[[queues]]\nname = \"a\"\n[queues.retry]\n", 3, "queues[0].retry",
			`sepp.toml:3: queues[0].retry: unknown section; the keys of [[queues]] are name, dedup_window_ms, key_reuse, dedup_by_content, job_types, max_attempts, lease_ms, backoff_initial_ms, backoff_max_ms, require_key, key_fields, on_duplicate, debounce_ms, debounce_max_wait_ms, release_key_on, rules, concurrency, rate, when_running`},

		// bad values
		{"value: listen", "[server]\nlisten = \"localhost\"\n", 2, "server.listen",
			`sepp.toml:2: server.listen: must be host:port, like "127.0.0.1:50051" or ":50051", got "localhost" (the address to listen on, host:port; default "127.0.0.1:50051")`},
		{"value: listen port", "[server]\nlisten = \"localhost:http\"\n", 2, "server.listen",
			`sepp.toml:2: server.listen: must end in a port number from 0 to 65535, got "localhost:http" (the address to listen on, host:port; default "127.0.0.1:50051")`},
		{"value: listen empty", "[server]\nlisten = \"\"\n", 2, "server.listen",
			`sepp.toml:2: server.listen: must not be empty; use host:port, like "127.0.0.1:50051" or ":50051" (the address to listen on, host:port; default "127.0.0.1:50051")`},
		{"value: max_payload_bytes 0", "[server]\nmax_payload_bytes = 0\n", 2, "server.max_payload_bytes",
			`sepp.toml:2: server.max_payload_bytes: must be > 0, got 0 (the largest job payload accepted, in bytes; default 1048576)`},
		{"value: max_batch_size negative", "[server]\nmax_batch_size = -1\n", 2, "server.max_batch_size",
			`sepp.toml:2: server.max_batch_size: must be > 0, got -1 (the most jobs one EnqueueBatch call may carry; default 1000)`},
		{"value: backend", "[storage]\nbackend = \"mysql\"\n", 2, "storage.backend",
			`sepp.toml:2: storage.backend: must be "embedded" or "postgres", got "mysql" (the storage backend: "embedded" (the Pebble store in path) or "postgres"; default "embedded")`},
		{"value: embedded path empty", "[storage]\npath = \"\"\n", 2, "storage.path",
			`sepp.toml:2: storage.path: must not be empty with backend = "embedded" (the embedded store's data directory; default "./sepp-data")`},
		{"value: sqlite removed", "[storage]\nbackend = \"sqlite\"\n", 2, "storage.backend",
			`sepp.toml:2: storage.backend: "sqlite", the earlier embedded engine, was removed; set "embedded" (the Pebble store, the default) or "postgres". A data directory SQLite wrote (it holds sepp.db) cannot be read by this release: drain its jobs with the release that wrote it, then start on a new path`},
		{"outbox: no name", "[[outboxes]]\ndialect = \"postgres\"\nurl_env = \"A\"\n", 1, "outboxes[0].name",
			`sepp.toml:1: outboxes[0].name: missing: every [[outboxes]] entry needs a name, like name = "orders-db"`},
		{"outbox: dialect", "[[outboxes]]\nname = \"app\"\ndialect = \"oracle\"\nurl_env = \"A\"\n", 3, "outboxes[0].dialect",
			`sepp.toml:3: outboxes[0].dialect: must be "postgres", "mysql" (MySQL 8, MariaDB 10.6+) or "sqlite", got "oracle" (the app database's dialect, "postgres", "mysql" or "sqlite"; required)`},
		{"outbox: url in the file", "[[outboxes]]\nname = \"app\"\ndialect = \"postgres\"\nurl = \"postgres://app:hunter2@db/app\"\n", 4, "outboxes[0].url",
			`sepp.toml:4: outboxes[0].url: a connection string holds a password and is never written into the config file: put it in an environment variable and name it with url_env, or in a file and give its path in url_file`},
		{"outbox: no url", "[[outboxes]]\nname = \"app\"\ndialect = \"postgres\"\n", 1, "outboxes[0].url_env",
			`sepp.toml:1: outboxes[0].url_env: missing: name where the connection string is, with url_env = "APP_DATABASE_URL" (an environment variable) or url_file = "/etc/sepp/app-db-url" (a file)`},
		{"outbox: env and file", "[[outboxes]]\nname = \"app\"\ndialect = \"postgres\"\nurl_env = \"A\"\nurl_file = \"/f\"\n", 5, "outboxes[0].url_file",
			`sepp.toml:5: outboxes[0].url_file: cannot be set together with url_env; keep one`},
		{"outbox: table", "[[outboxes]]\nname = \"app\"\ndialect = \"postgres\"\nurl_env = \"A\"\ntable = \"x; drop\"\n", 5, "outboxes[0].table",
			`sepp.toml:5: outboxes[0].table: must be a plain SQL identifier of at most 52 characters (letters, digits, _; optionally schema.table), got "x; drop" (the outbox table, optionally schema.table; default "sepp_outbox")`},
		{"outbox: batch over max_batch_size", "[server]\nmax_batch_size = 10\n[[outboxes]]\nname = \"app\"\ndialect = \"postgres\"\nurl_env = \"A\"\nbatch_size = 20\n", 7, "outboxes[0].batch_size",
			`sepp.toml:7: outboxes[0].batch_size: 20 is more than server.max_batch_size (10), which bounds every enqueue batch: lower it or raise that`},
		{"outbox: duplicate name", "[[outboxes]]\nname = \"app\"\ndialect = \"postgres\"\nurl_env = \"A\"\n[[outboxes]]\nname = \"app\"\ndialect = \"postgres\"\nurl_env = \"B\"\n", 6, "outboxes[1].name",
			`sepp.toml:6: outboxes[1].name: duplicate name "app" (first at line 2); each outbox needs its own name`},
		{"value: postgres without url", "[storage]\n\nbackend = \"postgres\"\n", 3, "storage.backend",
			`sepp.toml:3: storage.backend: is "postgres" but storage.url is not set; set url in [storage] or SEPP_STORAGE_URL, like postgres://user@127.0.0.1:5432/sepp`},
		{"value: postgres with empty url", "[storage]\nbackend = \"postgres\"\nurl = \"\"\n", 3, "storage.url",
			`sepp.toml:3: storage.url: must not be empty with backend = "postgres"; set it like postgres://user@127.0.0.1:5432/sepp`},
		{"value: postgres url scheme", "[storage]\nbackend = \"postgres\"\nurl = \"mysql://root:hunter2@db/sepp\"\n", 3, "storage.url",
			`sepp.toml:3: storage.url: must start with postgres:// or postgresql://, got "mysql://"`},
		{"value: postgres url bad", "[storage]\nbackend = \"postgres\"\nurl = \"postgres://root:hunter2@db:port/sepp\"\n", 3, "storage.url",
			`sepp.toml:3: storage.url: is not a valid URL; write it like postgres://user@127.0.0.1:5432/sepp`},
		{"value: postgres url not a url", "[storage]\nbackend = \"postgres\"\nurl = \"db:5432/sepp\"\n", 3, "storage.url",
			`sepp.toml:3: storage.url: must be a URL like postgres://user@127.0.0.1:5432/sepp (or a key=value connection string)`},
		{"value: storage window negative", "[server]\nstrict = true\n\n[storage]\n\n\ndedup_window_ms = -5\n", 7, "storage.dedup_window_ms",
			`sepp.toml:7: storage.dedup_window_ms: must be > 0, got -5 (the dedup window in milliseconds; default 86400000)`},
		{"value: storage window too big", "[storage]\ndedup_window_ms = 9223372036855\n", 2, "storage.dedup_window_ms",
			`sepp.toml:2: storage.dedup_window_ms: must be at most 9223372036854 (about 292 years), got 9223372036855 (the dedup window in milliseconds; default 86400000)`},
		{"value: key bytes 0", "[storage]\nmax_idempotency_key_bytes = 0\n", 2, "storage.max_idempotency_key_bytes",
			`sepp.toml:2: storage.max_idempotency_key_bytes: must be > 0, got 0 (the longest idempotency key accepted, in bytes; default 256)`},
		{"value: sweep 0", "[storage]\nsweep_interval_ms = 0\n", 2, "storage.sweep_interval_ms",
			`sepp.toml:2: storage.sweep_interval_ms: must be > 0, got 0 (how often expired records are deleted, in milliseconds; default 60000)`},
		{"value: completed retention negative", "[storage]\ncompleted_retention_ms = -1\n", 2, "storage.completed_retention_ms",
			`sepp.toml:2: storage.completed_retention_ms: must be > 0, got -1 (how long completed jobs are kept, in milliseconds; default 86400000)`},
		{"value: dead retention 0", "[storage]\ndead_retention_ms = 0\n", 2, "storage.dead_retention_ms",
			`sepp.toml:2: storage.dead_retention_ms: must be > 0, got 0 (how long dead-lettered jobs are kept, in milliseconds; default 604800000)`},

		// queues
		{"queue: duplicate name", "[server]\nstrict = true\n\n\n\n\n\n[[queues]]\nname = \"payments\"\n\n[[queues]]\nname = \"payments\"\n", 12, "queues[1].name",
			`sepp.toml:12: queues[1].name: duplicate queue "payments" (first declared at line 9)`},
		{"queue: duplicate inline", "queues = [{ name = \"a\" }, { name = \"a\" }]\n", 1, "queues[1].name",
			`sepp.toml:1: queues[1].name: duplicate queue "a" (first declared at line 1)`},
		{"queue: empty name", "[[queues]]\nname = \"\"\n", 2, "queues[0].name",
			`sepp.toml:2: queues[0].name: must not be empty (the queue name; required)`},
		{"queue: missing name", "[[queues]]\nname = \"a\"\n\n[[queues]]\nmax_attempts = 3\n", 4, "queues[1].name",
			`sepp.toml:4: queues[1].name: missing: every [[queues]] entry needs a name, like name = "emails"`},
		{"queue: name spaces", "[[queues]]\nname = \"emails \"\n", 2, "queues[0].name",
			`sepp.toml:2: queues[0].name: "emails " has leading or trailing spaces (the queue name; required)`},
		{"queue: name control", "[[queues]]\nname = \"a\\tb\"\n", 2, "queues[0].name",
			`sepp.toml:2: queues[0].name: "a\tb" contains the control character U+0009 at byte 1; names may hold only visible characters (the queue name; required)`},
		{"queue: window 0", "[[queues]]\nname = \"a\"\ndedup_window_ms = 0\n", 3, "queues[0].dedup_window_ms",
			`sepp.toml:3: queues[0].dedup_window_ms: must be > 0, got 0 (this queue's dedup window in milliseconds; default storage.dedup_window_ms)`},
		{"queue: window negative", "[[queues]]\nname = \"a\"\ndedup_window_ms = -1\n", 3, "queues[0].dedup_window_ms",
			`sepp.toml:3: queues[0].dedup_window_ms: must be > 0, got -1 (this queue's dedup window in milliseconds; default storage.dedup_window_ms)`},
		{"queue: key_reuse", "[[queues]]\nname = \"a\"\nkey_reuse = \"foo\"\n", 3, "queues[0].key_reuse",
			`sepp.toml:3: queues[0].key_reuse: must be "return_original" or "reject_mismatch", got "foo" (what a reused key with another payload gets, "return_original" or "reject_mismatch"; default "return_original")`},
		{"queue: key_reuse empty", "[[queues]]\nname = \"a\"\nkey_reuse = \"\"\n", 3, "queues[0].key_reuse",
			`sepp.toml:3: queues[0].key_reuse: must be "return_original" or "reject_mismatch", got "" (what a reused key with another payload gets, "return_original" or "reject_mismatch"; default "return_original")`},
		{"queue: job type empty", "[[queues]]\nname = \"a\"\njob_types = [\"x\", \"\"]\n", 3, "queues[0].job_types",
			`sepp.toml:3: queues[0].job_types: entry 1 is empty; list job type names, or leave job_types out to accept every job type`},
		{"queue: max_attempts 0", "[[queues]]\nname = \"a\"\nmax_attempts = 0\n", 3, "queues[0].max_attempts",
			`sepp.toml:3: queues[0].max_attempts: must be >= 1, got 0 (how many times a job is tried before it is dead-lettered; default 25)`},
		{"queue: max_attempts negative", "[[queues]]\nname = \"a\"\nmax_attempts = -3\n", 3, "queues[0].max_attempts",
			`sepp.toml:3: queues[0].max_attempts: must be >= 1, got -3 (how many times a job is tried before it is dead-lettered; default 25)`},
		{"queue: max_attempts huge", "[[queues]]\nname = \"a\"\nmax_attempts = 3000000000\n", 3, "queues[0].max_attempts",
			`sepp.toml:3: queues[0].max_attempts: must be at most 2147483647, got 3000000000 (how many times a job is tried before it is dead-lettered; default 25)`},
		{"queue: lease 0", "[[queues]]\nname = \"a\"\nlease_ms = 0\n", 3, "queues[0].lease_ms",
			`sepp.toml:3: queues[0].lease_ms: must be > 0, got 0 (how long a worker holds a job, in milliseconds; default 30000)`},
		{"queue: backoff_initial 0", "[[queues]]\nname = \"a\"\nbackoff_initial_ms = 0\n", 3, "queues[0].backoff_initial_ms",
			`sepp.toml:3: queues[0].backoff_initial_ms: must be > 0, got 0 (the first retry delay, in milliseconds; default 1000)`},
		{"queue: backoff_max negative", "[[queues]]\nname = \"a\"\nbackoff_max_ms = -1\n", 3, "queues[0].backoff_max_ms",
			`sepp.toml:3: queues[0].backoff_max_ms: must be > 0, got -1 (the longest retry delay, in milliseconds; default 3600000)`},
		{"queue: backoff initial > max", "[[queues]]\nname = \"a\"\nbackoff_initial_ms = 5000\nbackoff_max_ms = 1000\n", 3, "queues[0].backoff_initial_ms",
			`sepp.toml:3: queues[0].backoff_initial_ms: must be <= backoff_max_ms (1000), got 5000; lower it or raise backoff_max_ms`},
		{"queue: backoff initial > default max", "[[queues]]\nname = \"a\"\nbackoff_initial_ms = 7200000\n", 3, "queues[0].backoff_initial_ms",
			`sepp.toml:3: queues[0].backoff_initial_ms: must be <= backoff_max_ms (3600000), got 7200000; lower it or raise backoff_max_ms`},
		{"queue: backoff max < default initial", "[[queues]]\nname = \"a\"\nbackoff_max_ms = 500\n", 3, "queues[0].backoff_max_ms",
			`sepp.toml:3: queues[0].backoff_max_ms: must be >= backoff_initial_ms (1000), got 500; raise it or lower backoff_initial_ms`},

		// several problems: the first by line wins
		{"first by line: value then unknown", "[server]\nmax_batch_size = 0\n[storage]\nbogus = 1\n", 4, "storage.bogus",
			`sepp.toml:4: storage.bogus: unknown key; the keys of [storage] are backend, path, url, dedup_window_ms, max_idempotency_key_bytes, sweep_interval_ms, pool_size, completed_retention_ms, dead_retention_ms`},
		{"first by line: values", "[storage]\ndead_retention_ms = 0\n[server]\nmax_batch_size = 0\n", 2, "storage.dead_retention_ms",
			`sepp.toml:2: storage.dead_retention_ms: must be > 0, got 0 (how long dead-lettered jobs are kept, in milliseconds; default 604800000)`},
		{"first by line: type then syntax", "[server]\nstrict = 1\nlisten = \n", 2, "server.strict",
			`sepp.toml:2: server.strict: must be true or false, got the whole number 1 (true makes every call that names an undeclared queue fail with UNKNOWN_QUEUE; default false)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("sepp.toml", []byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			if c != nil {
				t.Error("a config came back with the error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error is %T, not *Error: %v", err, err)
			}
			if e.File != "sepp.toml" || e.Line != tc.line || e.Key != tc.key {
				t.Errorf("got file %q line %d key %q, want sepp.toml line %d key %q", e.File, e.Line, e.Key, tc.line, tc.key)
			}
			if err.Error() != tc.want {
				t.Errorf("got\n\t%s\nwant\n\t%s", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Error("the error shows a password")
			}
		})
	}
}

func TestEnv(t *testing.T) {
	t.Run("no file", func(t *testing.T) {
		c, err := LoadWith("", env(map[string]string{
			"SEPP_LISTEN":          ":9999",
			"SEPP_STORAGE_BACKEND": "postgres",
			"SEPP_STORAGE_PATH":    "/data",
			"SEPP_STORAGE_URL":     "postgres://u@h:5432/db",
		}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Server.Listen != ":9999" || c.Storage.Backend != BackendPostgres || c.Storage.Path != "/data" || c.Storage.URL != "postgres://u@h:5432/db" {
			t.Errorf("got %+v", c)
		}
	})
	t.Run("overrides the file", func(t *testing.T) {
		path := writeFile(t, fullFile)
		c, err := LoadWith(path, env(map[string]string{
			"SEPP_LISTEN":          "127.0.0.1:1",
			"SEPP_STORAGE_BACKEND": "embedded",
		}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Server.Listen != "127.0.0.1:1" || c.Storage.Backend != BackendEmbedded || c.Storage.Path != "/var/lib/sepp" || !c.Server.Strict {
			t.Errorf("got %+v", c)
		}
	})
	t.Run("env fixes a bad file value", func(t *testing.T) {
		path := writeFile(t, "[server]\nlisten = \"nope\"\n")
		if _, err := LoadWith(path, env(map[string]string{"SEPP_LISTEN": ":1"})); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("empty counts as unset", func(t *testing.T) {
		c, err := LoadWith("", env(map[string]string{"SEPP_LISTEN": "", "SEPP_STORAGE_BACKEND": ""}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Server.Listen != DefaultListen || c.Storage.Backend != BackendEmbedded {
			t.Errorf("got %+v", c)
		}
	})
	t.Run("file url with env backend", func(t *testing.T) {
		path := writeFile(t, "[storage]\nurl = \"postgres://u@h/db\"\n")
		c, err := LoadWith(path, env(map[string]string{"SEPP_STORAGE_BACKEND": "postgres"}))
		if err != nil || c.Storage.Backend != BackendPostgres {
			t.Fatalf("got %+v, %v", c, err)
		}
	})

	bad := []struct {
		name string
		file string
		env  map[string]string
		key  string
		want string
	}{
		{"backend", "", map[string]string{"SEPP_STORAGE_BACKEND": "mysql"}, "SEPP_STORAGE_BACKEND",
			`SEPP_STORAGE_BACKEND: must be "embedded" or "postgres", got "mysql" (from the environment: it overrides storage.backend, the storage backend: "embedded" (the Pebble store in path) or "postgres"; default "embedded")`},
		{"listen", "", map[string]string{"SEPP_LISTEN": "50051"}, "SEPP_LISTEN",
			`SEPP_LISTEN: must be host:port, like "127.0.0.1:50051" or ":50051", got "50051" (from the environment: it overrides server.listen, the address to listen on, host:port; default "127.0.0.1:50051")`},
		{"postgres without url", "", map[string]string{"SEPP_STORAGE_BACKEND": "postgres"}, "SEPP_STORAGE_BACKEND",
			`SEPP_STORAGE_BACKEND: is "postgres" but storage.url is not set; set url in [storage] or SEPP_STORAGE_URL, like postgres://user@127.0.0.1:5432/sepp (from the environment: it overrides storage.backend)`},
		{"url", "[storage]\nbackend = \"postgres\"\nurl = \"postgres://u@h/db\"\n", map[string]string{"SEPP_STORAGE_URL": "http://secret@h/db"}, "SEPP_STORAGE_URL",
			`SEPP_STORAGE_URL: must start with postgres:// or postgresql://, got "http://" (from the environment: it overrides storage.url)`},
		{"env beats file line", "[storage]\npath = \"\"\n", map[string]string{"SEPP_LISTEN": "x"}, "SEPP_LISTEN",
			`SEPP_LISTEN: must be host:port, like "127.0.0.1:50051" or ":50051", got "x" (from the environment: it overrides server.listen, the address to listen on, host:port; default "127.0.0.1:50051")`},
	}
	for _, tc := range bad {
		t.Run("bad "+tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = writeFile(t, tc.file)
			}
			_, err := LoadWith(path, env(tc.env))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if e.Key != tc.key || e.File != "" || e.Line != 0 || err.Error() != tc.want {
				t.Errorf("got %#v\n\t%s\nwant\n\t%s", e, err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Error("the error shows a password")
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	path := writeFile(t, fullFile)
	c, err := LoadWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Declared("payments") {
		t.Error("payments not declared")
	}

	bad := writeFile(t, "[server]\nmax_batch_size = 0\n")
	_, err = LoadWith(bad, nil)
	if want := bad + ":2: server.max_batch_size: must be > 0, got 0 (the most jobs one EnqueueBatch call may carry; default 1000)"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}

	missing := filepath.Join(t.TempDir(), "nope.toml")
	_, err = LoadWith(missing, nil)
	var e *Error
	if !errors.As(err, &e) || e.File != missing || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
	want := missing + ": cannot read the config file: no such file or directory; fix the path given to --config, or leave --config out to run on defaults"
	if err.Error() != want {
		t.Errorf("got\n\t%s\nwant\n\t%s", err, want)
	}

	// Load reads the real environment.
	t.Setenv("SEPP_LISTEN", ":4242")
	c, err = Load("")
	if err != nil || c.Server.Listen != ":4242" {
		t.Errorf("Load: %+v, %v", c, err)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sepp.toml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestQueueFallbacks(t *testing.T) {
	c, err := Parse("sepp.toml", []byte(`
[storage]
dedup_window_ms = 1000

[[queues]]
name = "own"
dedup_window_ms = 5000
max_attempts = 1

[[queues]]
name = "inherits"
backoff_max_ms = 1000
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want QueueConfig
	}{
		{"own", QueueConfig{Name: "own", DedupWindowMs: 5000, KeyReuse: KeyReuseReturnOriginal, MaxAttempts: 1, LeaseMs: 30000, BackoffInitialMs: 1000, BackoffMaxMs: 3600000, OnDuplicate: OnDuplicateReturnOriginal, WhenRunning: WhenRunningReturnOriginal}},
		{"inherits", QueueConfig{Name: "inherits", DedupWindowMs: 1000, KeyReuse: KeyReuseReturnOriginal, MaxAttempts: 25, LeaseMs: 30000, BackoffInitialMs: 1000, BackoffMaxMs: 1000, OnDuplicate: OnDuplicateReturnOriginal, WhenRunning: WhenRunningReturnOriginal}},
		{"undeclared", QueueConfig{Name: "undeclared", DedupWindowMs: 1000, KeyReuse: KeyReuseReturnOriginal, MaxAttempts: 25, LeaseMs: 30000, BackoffInitialMs: 1000, BackoffMaxMs: 3600000, OnDuplicate: OnDuplicateReturnOriginal, WhenRunning: WhenRunningReturnOriginal}},
		{"", QueueConfig{Name: "", DedupWindowMs: 1000, KeyReuse: KeyReuseReturnOriginal, MaxAttempts: 25, LeaseMs: 30000, BackoffInitialMs: 1000, BackoffMaxMs: 3600000, OnDuplicate: OnDuplicateReturnOriginal, WhenRunning: WhenRunningReturnOriginal}},
	}
	for _, tc := range tests {
		if got := c.Queue(tc.name); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Queue(%q) = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// The raw entries keep "not set" as zero.
	if c.Queues[1].DedupWindowMs != 0 || c.Queues[1].MaxAttempts != 0 {
		t.Errorf("raw entry changed: %+v", c.Queues[1])
	}

	// A config built in code works without Validate (by scanning) and with
	// it (by the index), with the same answers.
	built := Default()
	built.Storage.DedupWindowMs = 42
	built.Queues = []QueueConfig{{Name: "a", LeaseMs: 7}}
	for _, step := range []string{"before Validate", "after Validate"} {
		if q := built.Queue("a"); q.LeaseMs != 7 || q.DedupWindowMs != 42 || q.MaxAttempts != DefaultMaxAttempts {
			t.Errorf("%s: Queue(a) = %+v", step, q)
		}
		if q := built.Queue("b"); q.Name != "b" || q.LeaseMs != DefaultLeaseMs || q.DedupWindowMs != 42 {
			t.Errorf("%s: Queue(b) = %+v", step, q)
		}
		if !built.Declared("a") || built.Declared("b") {
			t.Errorf("%s: Declared wrong", step)
		}
		if err := built.Validate(); err != nil {
			t.Fatal(err)
		}
	}

	built.Queues = append(built.Queues, QueueConfig{Name: "a"})
	err = built.Validate()
	if err == nil || err.Error() != `queues[1].name: duplicate queue "a" (first declared at queues[0])` {
		t.Errorf("Validate: %v", err)
	}
	built.Queues = []QueueConfig{{Name: "x", MaxAttempts: -1}}
	if err := built.Validate(); err == nil || err.Error() != "queues[0].max_attempts: must be >= 1, got -1 (how many times a job is tried before it is dead-lettered; default 25)" {
		t.Errorf("Validate: %v", err)
	}
}

func TestQueueConcurrent(t *testing.T) {
	c, err := Parse("sepp.toml", []byte(fullFile))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if c.Queue("payments").MaxAttempts != 5 || !c.Declared("emails") || c.Queue("x").Name != "x" {
					t.Error("wrong answer")
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "f.toml", Line: 3, Key: "a.b", Msg: "m"}, "f.toml:3: a.b: m"},
		{Error{File: "f.toml", Key: "a.b", Msg: "m"}, "f.toml: a.b: m"},
		{Error{File: "f.toml", Line: 3, Msg: "m"}, "f.toml:3: m"},
		{Error{Key: "SEPP_LISTEN", Msg: "m"}, "SEPP_LISTEN: m"},
		{Error{Msg: "m"}, "m"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestSpecsMatchStructs keeps specs (used for unknown keys, types and
// messages) in line with the toml tags of the structs.
func TestSpecsMatchStructs(t *testing.T) {
	var fromStructs []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for f := range typ.Fields() {
			if f.Anonymous { // an embedded struct's keys are its parent's
				walk(prefix, f.Type)
				continue
			}
			tag := f.Tag.Get("toml")
			if tag == "" {
				continue
			}
			p := joinPath(prefix, tag)
			fromStructs = append(fromStructs, p)
			switch f.Type.Kind() {
			case reflect.Struct:
				walk(p, f.Type)
			case reflect.Pointer:
				if f.Type.Elem().Kind() == reflect.Struct {
					walk(p, f.Type.Elem())
				}
			case reflect.Slice:
				if f.Type.Elem().Kind() == reflect.Struct {
					walk(p+"[]", f.Type.Elem())
				}
			}
		}
	}
	walk("", reflect.TypeFor[Config]())
	var fromSpecs []string
	for _, s := range specs {
		fromSpecs = append(fromSpecs, s.path)
	}
	slices.Sort(fromStructs)
	slices.Sort(fromSpecs)
	if !slices.Equal(fromStructs, fromSpecs) {
		t.Errorf("struct keys %v\nspec keys   %v", fromStructs, fromSpecs)
	}
}

// TestDocsListEveryEnvVariable keeps docs/configuration.md in line with the
// environment variables; TestDocumentedKeys (docs_test.go) does the keys.
func TestDocsListEveryEnvVariable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{EnvListen, EnvStorageBackend, EnvStoragePath, EnvStorageURL} {
		if !strings.Contains(string(doc), v) {
			t.Errorf("docs/configuration.md does not list %s", v)
		}
	}
}

func BenchmarkQueue(b *testing.B) {
	c, err := Parse("sepp.toml", []byte(fullFile))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_ = c.Queue("payments")
		_ = c.Queue("other")
		_ = c.Declared("emails")
	}
}

func TestEmbeddedBackend(t *testing.T) {
	c, err := Parse("sepp.toml", []byte("[storage]\nbackend = \"embedded\"\n"))
	if err != nil || c.Storage.Backend != BackendEmbedded {
		t.Fatalf("backend = \"embedded\": %+v %v", c, err)
	}
	c, err = LoadWith(writeFile(t, "[storage]\nbackend = \"sqlite\"\n"), env(map[string]string{"SEPP_STORAGE_BACKEND": "embedded"}))
	if err != nil || c.Storage.Backend != BackendEmbedded {
		t.Fatalf("SEPP_STORAGE_BACKEND=embedded: %+v %v", c, err)
	}
	if _, err := Parse("sepp.toml", []byte("[storage]\nbackend = \"sqlite\"\n")); err == nil || !strings.Contains(err.Error(), "was removed") {
		t.Fatalf("backend = \"sqlite\" must be refused as removed: %v", err)
	}
}
