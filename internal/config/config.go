package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Defaults of every setting. Durations are in milliseconds, as in the file.
const (
	DefaultListen                 = "127.0.0.1:50051"
	DefaultMaxPayloadBytes        = 1 << 20 // 1 MiB
	DefaultMaxBatchSize           = 1000
	DefaultBackend                = BackendEmbedded
	DefaultStoragePath            = "./sepp-data"
	DefaultDedupWindowMs          = 24 * 60 * 60 * 1000 // 24 h
	DefaultMaxIdempotencyKeyBytes = 256
	DefaultPoolSize               = 16
	DefaultSweepIntervalMs        = 60 * 1000               // 1 min
	DefaultCompletedRetentionMs   = 24 * 60 * 60 * 1000     // 24 h
	DefaultDeadRetentionMs        = 7 * 24 * 60 * 60 * 1000 // 7 days
	DefaultKeyReuse               = KeyReuseReturnOriginal
	DefaultMaxAttempts            = 25
	DefaultLeaseMs                = 30 * 1000      // 30 s
	DefaultBackoffInitialMs       = 1000           // 1 s
	DefaultBackoffMaxMs           = 60 * 60 * 1000 // 1 h
)

// MaxMs is the largest millisecond value accepted for any *_ms key: the
// largest that still fits in a time.Duration (about 292 years).
const MaxMs = int64(1<<63-1) / int64(time.Millisecond)

// Environment variables that override the file.
const (
	EnvListen         = "SEPP_LISTEN"          // server.listen
	EnvStorageBackend = "SEPP_STORAGE_BACKEND" // storage.backend
	EnvStoragePath    = "SEPP_STORAGE_PATH"    // storage.path
	EnvStorageURL     = "SEPP_STORAGE_URL"     // storage.url
)

// Config is the whole configuration. Obtain one from Load, LoadWith, Parse or
// Default; treat it as read-only once loaded (see Validate for configs built
// in code).
type Config struct {
	// Server is the [server] section.
	Server ServerConfig `toml:"server"`
	// Storage is the [storage] section.
	Storage StorageConfig `toml:"storage"`
	// Limits is the [limits] table: bounds on what one request or
	// connection may ask of the server (limits.go).
	Limits LimitsConfig `toml:"limits"`
	// Queues are the [[queues]] entries in file order, as written: a zero
	// field means "not set" and falls back to its default. Use Queue for the
	// resolved settings of a queue. Default: none (every queue is undeclared).
	Queues []QueueConfig `toml:"queues"`
	// Webhooks are the [[webhooks]] entries in file order, as written; use
	// ResolvedWebhooks for their settings with defaults. Default: none.
	Webhooks []WebhookConfig `toml:"webhooks"`
	// Outboxes are the [[outboxes]] entries in file order, as written; use
	// ResolvedOutboxes for their settings with defaults. Default: none.
	Outboxes []OutboxConfig `toml:"outboxes"`
	// Schedules are the [[schedules]] entries in file order, as written; use
	// ResolvedSchedules for them ready to run. Default: none.
	Schedules []ScheduleConfig `toml:"schedules"`
	// Auth is the [auth] section: the tokens calls must carry (auth.go).
	// Default: no token, every call accepted.
	Auth AuthConfig `toml:"auth"`
	// Tracing is the [tracing] section: OpenTelemetry traces over OTLP
	// (tracing.go). Default: off.
	Tracing TracingConfig `toml:"tracing"`

	// byName maps a declared queue's name to its resolved settings; built by
	// Validate (and so by Load and Parse). nil means "not built": Queue and
	// Declared then scan Queues.
	byName map[string]QueueConfig
	// undeclared is the resolved settings of an undeclared queue, without a
	// name; valid when byName is not nil.
	undeclared QueueConfig
	// from says where each key was set, for Where (where.go); nil for a
	// config built in code.
	from *keyOrigins
}

// ServerConfig is the [server] section.
type ServerConfig struct {
	// Listen is the TCP address the API listens on, as host:port.
	// Default "127.0.0.1:50051"; env SEPP_LISTEN.
	Listen string `toml:"listen"`
	// Strict, when true, makes an enqueue to a queue not declared in
	// [[queues]] fail with UNKNOWN_QUEUE. When false, undeclared queues are
	// created on first use with the default queue settings. Default false.
	Strict bool `toml:"strict"`
	// MaxPayloadBytes is the largest job payload accepted, in bytes.
	// Default 1048576 (1 MiB).
	MaxPayloadBytes int64 `toml:"max_payload_bytes"`
	// MaxBatchSize is the most jobs one EnqueueBatch call may carry.
	// Default 1000.
	MaxBatchSize int `toml:"max_batch_size"`
	// AllowUnauthenticated, when true, lets sepp serve listen beyond
	// loopback with no [auth] tokens (CheckExposure). Default false.
	AllowUnauthenticated bool `toml:"allow_unauthenticated"`
	// LogKeys says how log lines show idempotency keys: LogKeysFull,
	// LogKeysHash or LogKeysNone. Default "full".
	LogKeys string `toml:"log_keys"`
	// TLSCertFile and TLSKeyFile are the PEM certificate chain and private
	// key the port serves TLS with (gRPC, Connect, gRPC-Web, webhooks and
	// /metrics alike); both or neither. Reloaded on SIGHUP. Default "": no
	// TLS.
	TLSCertFile string `toml:"tls_cert_file"`
	TLSKeyFile  string `toml:"tls_key_file"`
	// TLSClientCAFile, with TLSCertFile, turns on mutual TLS: every client
	// must present a certificate that chains to one of the PEM CA
	// certificates in this file. Reloaded on SIGHUP. Default "": no client
	// certificate asked for.
	TLSClientCAFile string `toml:"tls_client_ca_file"`
}

// TLS reports whether the [server] section turns TLS on.
func (s ServerConfig) TLS() bool { return s.TLSCertFile != "" }

// Backend names a storage backend.
type Backend string

// The storage backends.
const (
	// BackendEmbedded is the embedded backend, the Pebble store
	// (internal/store/pebble); it keeps its data under StorageConfig.Path.
	BackendEmbedded Backend = "embedded"
	// BackendPostgres uses the PostgreSQL database at StorageConfig.URL.
	BackendPostgres Backend = "postgres"

	// removedBackendSQLite names the earlier embedded engine, which this
	// release cannot open; validation says so and what to do instead.
	removedBackendSQLite Backend = "sqlite"
)

// StorageConfig is the [storage] section.
type StorageConfig struct {
	// Backend is the storage backend: BackendEmbedded or BackendPostgres.
	// Default "embedded"; env SEPP_STORAGE_BACKEND.
	Backend Backend `toml:"backend"`
	// Path is the data directory of the embedded store. Default
	// "./sepp-data"; env SEPP_STORAGE_PATH.
	Path string `toml:"path"`
	// URL is the postgres connection string, required when Backend is
	// "postgres", e.g. postgres://user@127.0.0.1:5432/sepp. Default "";
	// env SEPP_STORAGE_URL.
	URL string `toml:"url"`
	// DedupWindowMs is how long an idempotency key is remembered, in
	// milliseconds: the window of every queue that does not set its own.
	// Default 86400000 (24 h).
	DedupWindowMs int64 `toml:"dedup_window_ms"`
	// MaxIdempotencyKeyBytes is the longest idempotency key accepted, in
	// bytes. Default 256.
	MaxIdempotencyKeyBytes int `toml:"max_idempotency_key_bytes"`
	// SweepIntervalMs is how often expired dedup records and jobs past their
	// retention are deleted, in milliseconds. Default 60000 (1 min).
	SweepIntervalMs int64 `toml:"sweep_interval_ms"`
	// PoolSize is the most connections a node opens to PostgreSQL
	// (backend = "postgres"; one more is kept for LISTEN). Default 16.
	PoolSize int `toml:"pool_size"`
	// CompletedRetentionMs is how long a completed job is kept, in
	// milliseconds. Default 86400000 (24 h).
	CompletedRetentionMs int64 `toml:"completed_retention_ms"`
	// DeadRetentionMs is how long a dead-lettered job is kept, in
	// milliseconds. Default 604800000 (7 days).
	DeadRetentionMs int64 `toml:"dead_retention_ms"`
}

// DedupWindow is DedupWindowMs as a duration.
func (s StorageConfig) DedupWindow() time.Duration { return ms(s.DedupWindowMs) }

// SweepInterval is SweepIntervalMs as a duration.
func (s StorageConfig) SweepInterval() time.Duration { return ms(s.SweepIntervalMs) }

// CompletedRetention is CompletedRetentionMs as a duration.
func (s StorageConfig) CompletedRetention() time.Duration { return ms(s.CompletedRetentionMs) }

// DeadRetention is DeadRetentionMs as a duration.
func (s StorageConfig) DeadRetention() time.Duration { return ms(s.DeadRetentionMs) }

// KeyReuse says what an enqueue gets when its idempotency key is already
// recorded, inside the dedup window, with a different payload.
type KeyReuse string

// The key reuse policies.
const (
	// KeyReuseReturnOriginal returns the original job (deduplicated = true,
	// payload_mismatch = true): the second enqueue is a no-op.
	KeyReuseReturnOriginal KeyReuse = "return_original"
	// KeyReuseRejectMismatch fails the enqueue when the payload differs from
	// the original's; a reuse with the same payload still returns the
	// original.
	KeyReuseRejectMismatch KeyReuse = "reject_mismatch"
)

// QueueConfig is one [[queues]] entry. In Config.Queues a zero field means
// "not set in the file"; Config.Queue returns a copy with every field
// resolved to its value or default.
type QueueConfig struct {
	// Name is the queue name. Required in [[queues]].
	Name string `toml:"name"`
	// DedupWindowMs is this queue's dedup window in milliseconds.
	// Default (0): storage.dedup_window_ms.
	DedupWindowMs int64 `toml:"dedup_window_ms"`
	// KeyReuse is what a reused idempotency key with a different payload
	// gets. Default (""): KeyReuseReturnOriginal.
	KeyReuse KeyReuse `toml:"key_reuse"`
	// DedupByContent, when true, also deduplicates enqueues that carry no
	// idempotency key, keyed by a fingerprint of the job's content.
	// Default false.
	DedupByContent bool `toml:"dedup_by_content"`
	// JobTypes, when not empty, lists the only job types this queue
	// accepts. Default (empty): every job type. Do not modify the slice of
	// a loaded config.
	JobTypes []string `toml:"job_types"`
	// MaxAttempts is how many times a job is tried before it is
	// dead-lettered. Default (0): 25.
	MaxAttempts int `toml:"max_attempts"`
	// LeaseMs is how long a worker holds a job before it may be handed to
	// another worker, in milliseconds. Default (0): 30000 (30 s).
	LeaseMs int64 `toml:"lease_ms"`
	// BackoffInitialMs is the retry delay after the first failed attempt,
	// in milliseconds; later delays grow up to BackoffMaxMs.
	// Default (0): 1000 (1 s).
	BackoffInitialMs int64 `toml:"backoff_initial_ms"`
	// BackoffMaxMs is the longest retry delay, in milliseconds.
	// Default (0): 3600000 (1 h).
	BackoffMaxMs int64 `toml:"backoff_max_ms"`
	// RequireKey, when true, refuses an enqueue that has no idempotency
	// key, given or derived (IDEMPOTENCY_KEY_REQUIRED). Default false.
	RequireKey bool `toml:"require_key"`
	// KeyFields, when not empty, derives the key of a job enqueued without
	// one from these JSON pointers (RFC 6901) into its JSON-object payload:
	// the canonical JSON (RFC 8785) of the array of their values. Do not
	// modify the slice of a loaded config.
	KeyFields []string `toml:"key_fields"`
	// OnDuplicate is what an enqueue whose key is already recorded gets.
	// Default (""): OnDuplicateReturnOriginal.
	OnDuplicate OnDuplicate `toml:"on_duplicate"`
	// DebounceMs and DebounceMaxWaitMs are the debounce delay and the
	// longest a debounced job waits after its first enqueue (0: no bound),
	// in milliseconds; on_duplicate = "debounce" only.
	DebounceMs        int64 `toml:"debounce_ms"`
	DebounceMaxWaitMs int64 `toml:"debounce_max_wait_ms"`
	// ReleaseKeyOn lists the final states ("dead", "cancelled",
	// "completed") whose arrival deletes a job's dedup record, so that the
	// next enqueue of its key creates a new job. It is fixed on each job
	// when it is enqueued. Default (empty): the record lasts its window. Do
	// not modify the slice of a loaded config.
	ReleaseKeyOn []string `toml:"release_key_on"`
	// Rules are uniqueness rules besides the key ([[queues.rules]]): an
	// enqueue whose rule fields match a job enqueued on the queue within
	// the rule's window is refused (DEDUP_RULE_VIOLATED). Do not modify the
	// slice of a loaded config.
	Rules []RuleConfig `toml:"rules"`
	// WhenRunning is what a keyed enqueue gets when the job its key names
	// is running (reserved). Default (""): WhenRunningReturnOriginal.
	WhenRunning WhenRunning `toml:"when_running"`
	// Concurrency, when set ([queues.concurrency]), bounds how many jobs
	// of one key are reserved at once.
	Concurrency *ConcurrencyConfig `toml:"concurrency"`
	// Rate, when set ([queues.rate]), bounds how many jobs of one key are
	// reserved per period.
	Rate *RateConfig `toml:"rate"`
}

// RateConfig is a queue's [queues.rate] table.
type RateConfig struct {
	// KeyFields are the JSON pointers whose values make a job's rate key.
	// Default (empty): one key for the whole queue.
	KeyFields []string `toml:"key_fields"`
	// Limit is how many jobs of one key may be reserved within any period.
	// Default (0): 1.
	Limit int `toml:"limit"`
	// PeriodMs is the period, in milliseconds. Required.
	PeriodMs int64 `toml:"period_ms"`
}

// ResolvedLimit is Limit with its default.
func (r *RateConfig) ResolvedLimit() int { return max(r.Limit, 1) }

// Period is PeriodMs as a duration.
func (r *RateConfig) Period() time.Duration { return ms(r.PeriodMs) }

// ConcurrencyConfig is a queue's [queues.concurrency] table.
type ConcurrencyConfig struct {
	// KeyFields are the JSON pointers whose values make a job's
	// concurrency key, as key_fields make an idempotency key. Default
	// (empty): one key for the whole queue.
	KeyFields []string `toml:"key_fields"`
	// Limit is how many jobs of one key may be reserved at once. Default
	// (0): 1.
	Limit int `toml:"limit"`
	// Ordered delivers the jobs of one key in enqueue order: a job waiting
	// for its retry holds the later ones until it completes, dies or is
	// cancelled. Default false.
	Ordered bool `toml:"ordered"`
}

// ResolvedLimit is Limit with its default.
func (c *ConcurrencyConfig) ResolvedLimit() int { return max(c.Limit, 1) }

// WhenRunning is a queue's answer to a dedup hit on a running job.
type WhenRunning string

// The when_running values.
const (
	// WhenRunningReturnOriginal answers the hit as on_duplicate says, as
	// for a job that waits or has finished.
	WhenRunningReturnOriginal WhenRunning = "return_original"
	// WhenRunningRunAgain creates one follow-up job that runs once the
	// running one has ended (completed, dead or cancelled); the key names
	// the follow-up from then on, so later hits are judged against it.
	WhenRunningRunAgain WhenRunning = "run_again"
)

// maxRuleLimit bounds a rule's limit: a rule key's record keeps the time of
// each of its last limit jobs.
const maxRuleLimit = 10000

// maxConcurrencyLimit bounds [queues.concurrency] limit.
const maxConcurrencyLimit = 1000000

// maxRateLimit bounds [queues.rate] limit: a rate key's record keeps the
// time of each of its last limit reservations.
const maxRateLimit = 10000

// RuleAction is what a rule does with a job that finds its window full.
type RuleAction string

// The action values of [[queues.rules]].
const (
	// RuleActionReject refuses the job (DEDUP_RULE_VIOLATED).
	RuleActionReject RuleAction = "reject"
	// RuleActionDelay accepts the job and schedules it for the first
	// moment the window has room.
	RuleActionDelay RuleAction = "delay"
)

// RuleConfig is one [[queues.rules]] entry.
type RuleConfig struct {
	// Name names the rule in errors and metrics. Required, unique in its
	// queue.
	Name string `toml:"name"`
	// KeyFields are the JSON pointers whose values make the rule key, as a
	// queue's key_fields make a key. Required.
	KeyFields []string `toml:"key_fields"`
	// WindowMs is how long a job holds its rule key, in milliseconds.
	// Required.
	WindowMs int64 `toml:"window_ms"`
	// Limit is how many jobs with one rule key may be created within any
	// window. Default (0): 1.
	Limit int `toml:"limit"`
	// Action is what a job that finds the window full gets. Default (""):
	// RuleActionReject.
	Action RuleAction `toml:"action"`
}

// Window is WindowMs as a duration.
func (r RuleConfig) Window() time.Duration { return ms(r.WindowMs) }

// OnDuplicate is a queue's answer to a dedup hit.
type OnDuplicate string

// The on_duplicate values.
const (
	// OnDuplicateReturnOriginal answers a hit with the original job
	// (deduplicated = true).
	OnDuplicateReturnOriginal OnDuplicate = "return_original"
	// OnDuplicateReject fails a hit with DUPLICATE_JOB, naming the original.
	OnDuplicateReject OnDuplicate = "reject"
	// OnDuplicateReplace gives a still waiting original (scheduled or
	// available) the hit's payload, headers, priority and run-at; once it
	// runs or has finished, a hit returns it as return_original does.
	OnDuplicateReplace OnDuplicate = "replace"
	// OnDuplicateDebounce replaces as OnDuplicateReplace does, and moves
	// the waiting original's run-at to now + DebounceMs, never past its
	// first enqueue + DebounceMaxWaitMs.
	OnDuplicateDebounce OnDuplicate = "debounce"
)

// DedupWindow is DedupWindowMs as a duration (0 if not resolved: use the
// QueueConfig returned by Config.Queue).
func (q QueueConfig) DedupWindow() time.Duration { return ms(q.DedupWindowMs) }

// Lease is LeaseMs as a duration.
func (q QueueConfig) Lease() time.Duration { return ms(q.LeaseMs) }

// BackoffInitial is BackoffInitialMs as a duration.
func (q QueueConfig) BackoffInitial() time.Duration { return ms(q.BackoffInitialMs) }

// BackoffMax is BackoffMaxMs as a duration.
func (q QueueConfig) BackoffMax() time.Duration { return ms(q.BackoffMaxMs) }

// AcceptsJobType reports whether the queue accepts jobs of type t: true for
// any t when JobTypes is empty.
func (q QueueConfig) AcceptsJobType(t string) bool {
	return len(q.JobTypes) == 0 || slices.Contains(q.JobTypes, t)
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// MaxQueueNameBytes is the longest queue name accepted, in the config and on
// the wire.
const MaxQueueNameBytes = 255

// Limits on enqueue fields that have no config key. They keep one request
// from holding unbounded memory in the writer; each has a reason-coded error
// (INVALID_FIELD, listed in docs/errors.md). The server and the outbox
// writers check them.
const (
	MaxJobTypeBytes  = 255
	MaxHeaderBytes   = 64 << 10
	MaxHeaderEntries = 64
)

// Default returns the configuration used when there is no file and no
// environment variable: every setting at its default, no declared queue.
func Default() Config {
	return Config{
		Server: ServerConfig{
			Listen:          DefaultListen,
			Strict:          false,
			MaxPayloadBytes: DefaultMaxPayloadBytes,
			MaxBatchSize:    DefaultMaxBatchSize,
			LogKeys:         DefaultLogKeys,
		},
		Storage: StorageConfig{
			Backend:                DefaultBackend,
			Path:                   DefaultStoragePath,
			URL:                    "",
			DedupWindowMs:          DefaultDedupWindowMs,
			MaxIdempotencyKeyBytes: DefaultMaxIdempotencyKeyBytes,
			PoolSize:               DefaultPoolSize,
			SweepIntervalMs:        DefaultSweepIntervalMs,
			CompletedRetentionMs:   DefaultCompletedRetentionMs,
			DeadRetentionMs:        DefaultDeadRetentionMs,
		},
		Limits:  defaultLimits(),
		Tracing: defaultTracing(),
	}
}

// Queue returns the resolved settings of the queue called name: for a
// declared queue its values, with every unset field at its default (the
// dedup window at storage.dedup_window_ms); for an undeclared queue the
// defaults. The result's Name is always name. It is a map lookup on a loaded
// config.
func (c *Config) Queue(name string) QueueConfig {
	if c.byName != nil {
		if q, ok := c.byName[name]; ok {
			return q
		}
		q := c.undeclared
		q.Name = name
		return q
	}
	for _, q := range c.Queues {
		if q.Name == name {
			return c.resolve(q)
		}
	}
	return c.resolve(QueueConfig{Name: name})
}

// Declared reports whether name is declared in [[queues]].
func (c *Config) Declared(name string) bool {
	if c.byName != nil {
		_, ok := c.byName[name]
		return ok
	}
	for _, q := range c.Queues {
		if q.Name == name {
			return true
		}
	}
	return false
}

// resolve fills q's unset fields with their defaults.
func (c *Config) resolve(q QueueConfig) QueueConfig {
	if q.DedupWindowMs == 0 {
		q.DedupWindowMs = c.Storage.DedupWindowMs
	}
	if q.KeyReuse == "" {
		q.KeyReuse = DefaultKeyReuse
	}
	if q.OnDuplicate == "" {
		q.OnDuplicate = OnDuplicateReturnOriginal
	}
	if q.WhenRunning == "" {
		q.WhenRunning = WhenRunningReturnOriginal
	}
	if q.MaxAttempts == 0 {
		q.MaxAttempts = DefaultMaxAttempts
	}
	if q.LeaseMs == 0 {
		q.LeaseMs = DefaultLeaseMs
	}
	if q.BackoffInitialMs == 0 {
		q.BackoffInitialMs = DefaultBackoffInitialMs
	}
	if q.BackoffMaxMs == 0 {
		q.BackoffMaxMs = DefaultBackoffMaxMs
	}
	if len(q.JobTypes) == 0 {
		q.JobTypes = nil
	}
	return q
}

// buildIndex builds the lookups used by Queue and Declared.
func (c *Config) buildIndex() {
	c.byName = make(map[string]QueueConfig, len(c.Queues))
	for _, q := range c.Queues {
		c.byName[q.Name] = c.resolve(q)
	}
	c.undeclared = c.resolve(QueueConfig{})
}

// Validate checks a configuration built in code (for example Default with
// Queues appended) with the rules Load applies, and builds the lookups used
// by Queue and Declared. Call it before sharing the config between
// goroutines. Its errors carry no file or line.
func (c *Config) Validate() error {
	if err := c.validate("", nil); err != nil {
		return err
	}
	c.buildIndex()
	return nil
}

// DedupPolicy describes q's dedup policy where it differs from the default,
// in the config's own words ("" when it does not): what a key lookup shows
// as the policy that decides the queue's enqueues.
func (q QueueConfig) DedupPolicy() string {
	var parts []string
	add := func(k string, v any) {
		b, _ := json.Marshal(v)
		parts = append(parts, k+"="+string(b))
	}
	if q.OnDuplicate != "" && q.OnDuplicate != OnDuplicateReturnOriginal {
		parts = append(parts, "on_duplicate="+string(q.OnDuplicate))
		if q.OnDuplicate == OnDuplicateDebounce {
			parts = append(parts, fmt.Sprintf("debounce_ms=%d", q.DebounceMs))
			if q.DebounceMaxWaitMs > 0 {
				parts = append(parts, fmt.Sprintf("debounce_max_wait_ms=%d", q.DebounceMaxWaitMs))
			}
		}
	}
	if q.KeyReuse == KeyReuseRejectMismatch {
		parts = append(parts, "key_reuse="+string(q.KeyReuse))
	}
	if q.RequireKey {
		parts = append(parts, "require_key=true")
	}
	if len(q.KeyFields) > 0 {
		add("key_fields", q.KeyFields)
	}
	if q.DedupByContent {
		parts = append(parts, "dedup_by_content=true")
	}
	if len(q.ReleaseKeyOn) > 0 {
		add("release_key_on", q.ReleaseKeyOn)
	}
	for _, r := range q.Rules {
		rule := map[string]any{"name": r.Name, "key_fields": r.KeyFields, "window_ms": r.WindowMs}
		if r.Limit > 1 {
			rule["limit"] = r.Limit
		}
		if r.Action == RuleActionDelay {
			rule["action"] = r.Action
		}
		add("rule", rule)
	}
	if q.WhenRunning == WhenRunningRunAgain {
		parts = append(parts, "when_running="+string(q.WhenRunning))
	}
	if c := q.Concurrency; c != nil {
		add("concurrency", map[string]any{"key_fields": c.KeyFields, "limit": c.ResolvedLimit(), "ordered": c.Ordered})
	}
	if r := q.Rate; r != nil {
		add("rate", map[string]any{"key_fields": r.KeyFields, "limit": r.ResolvedLimit(), "period_ms": r.PeriodMs})
	}
	return strings.Join(parts, " ")
}
