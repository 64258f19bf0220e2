package config

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Outbox defaults.
const (
	DefaultOutboxTable          = "sepp_outbox"
	DefaultOutboxBatchSize      = 100
	DefaultOutboxPollIntervalMs = 1000
	// MaxOutboxBatchSize bounds batch_size: one batch is one enqueue batch
	// (server.max_batch_size bounds it too) and one transaction holding
	// that many rows locked in the app's database.
	MaxOutboxBatchSize = 1000
)

// OutboxConfig is one [[outboxes]] entry: a table in the app's own database
// whose rows sepp serve relays into jobs. In Config.Outboxes a zero field
// means "not set"; Config.ResolvedOutboxes applies the defaults.
type OutboxConfig struct {
	// Name names the outbox in logs, metrics and the dashboard. Required,
	// unique.
	Name string `toml:"name"`
	// Dialect is the database's: "postgres", "mysql" (MySQL 8, MariaDB
	// 10.6+) or "sqlite". Required.
	Dialect string `toml:"dialect"`
	// URLEnv names the environment variable that holds the connection
	// string; URLFile, a file that holds it. Exactly one is required: a
	// connection string holds a password, which the config file never does.
	URLEnv  string `toml:"url_env"`
	URLFile string `toml:"url_file"`
	// URL is never accepted: it exists so that a connection string written
	// into the config file is refused with what to do instead.
	URL string `toml:"url"`
	// Table is the outbox table. Default "sepp_outbox".
	Table string `toml:"table"`
	// BatchSize is the most rows one relay pass claims and enqueues.
	// Default 100.
	BatchSize int `toml:"batch_size"`
	// PollIntervalMs is how often the relay looks for rows when nothing
	// woke it (on PostgreSQL the schema's trigger wakes it at once).
	// Default 1000.
	PollIntervalMs int64 `toml:"poll_interval_ms"`
}

// PollInterval is PollIntervalMs as a duration.
func (o OutboxConfig) PollInterval() time.Duration {
	return time.Duration(o.PollIntervalMs) * time.Millisecond
}

// ResolvedOutboxes returns the [[outboxes]] entries with every default
// applied.
func (c *Config) ResolvedOutboxes() []OutboxConfig {
	out := make([]OutboxConfig, len(c.Outboxes))
	for i, o := range c.Outboxes {
		if o.Table == "" {
			o.Table = DefaultOutboxTable
		}
		if o.BatchSize == 0 {
			o.BatchSize = min(DefaultOutboxBatchSize, c.Server.MaxBatchSize)
		}
		if o.PollIntervalMs == 0 {
			o.PollIntervalMs = DefaultOutboxPollIntervalMs
		}
		out[i] = o
	}
	return out
}

// validateOutboxes checks the [[outboxes]] entries into v.
func (c *Config) validateOutboxes(v *validator) {
	first := make(map[string]int, len(c.Outboxes))
	for i, o := range c.Outboxes {
		p := fmt.Sprintf("outboxes[%d]", i)
		if o.Name == "" && !v.has(p+".name") {
			v.fail(p+".name", `missing: every [[outboxes]] entry needs a name, like name = "orders-db"`)
		} else if err := CheckQueueName(o.Name); err != nil {
			v.bad(p+".name", err.Error())
		} else if j, dup := first[o.Name]; dup {
			at := fmt.Sprintf("outboxes[%d]", j)
			if l := v.line(at + ".name"); l > 0 {
				at = "line " + strconv.Itoa(l)
			}
			v.fail(p+".name", fmt.Sprintf("duplicate name %q (first at %s); each outbox needs its own name", o.Name, at))
		} else {
			first[o.Name] = i
		}
		switch o.Dialect {
		case "postgres", "mysql", "sqlite":
		case "":
			if !v.has(p + ".dialect") {
				v.fail(p+".dialect", `missing: the app database's dialect, dialect = "postgres", "mysql" or "sqlite"`)
				break
			}
			fallthrough
		default:
			v.bad(p+".dialect", fmt.Sprintf(`must be "postgres", "mysql" (MySQL 8, MariaDB 10.6+) or "sqlite", got %q`, o.Dialect))
		}
		if o.URL != "" || v.has(p+".url") {
			v.fail(p+".url", "a connection string holds a password and is never written into the config file: put it in an environment variable and name it with url_env, or in a file and give its path in url_file")
		} else {
			v.envOrFile(p, "url", o.URLEnv, o.URLFile, "the connection string", "APP_DATABASE_URL", "/etc/sepp/app-db-url")
		}
		if v.has(p+".table") || o.Table != "" {
			if err := CheckOutboxTable(o.Table); err != nil {
				v.bad(p+".table", err.Error())
			}
		}
		if v.has(p + ".batch_size") {
			if o.BatchSize < 1 || o.BatchSize > MaxOutboxBatchSize {
				v.bad(p+".batch_size", fmt.Sprintf("must be 1 to %d, got %d", MaxOutboxBatchSize, o.BatchSize))
			} else if o.BatchSize > c.Server.MaxBatchSize {
				v.fail(p+".batch_size", fmt.Sprintf("%d is more than server.max_batch_size (%d), which bounds every enqueue batch: lower it or raise that", o.BatchSize, c.Server.MaxBatchSize))
			}
		}
		if v.has(p + ".poll_interval_ms") {
			if o.PollIntervalMs < 10 || o.PollIntervalMs > 3_600_000 {
				v.bad(p+".poll_interval_ms", fmt.Sprintf("must be 10 to 3600000 (an hour), got %d", o.PollIntervalMs))
			}
		}
	}
}

// CheckOutboxTable checks that an outbox table's name is a plain SQL
// identifier, optionally schema-qualified ("app.sepp_outbox"): it is
// spliced into the writers' and the relay's statements, and with "_dead" or
// "_created_at" after it names the dead table and the index.
func CheckOutboxTable(table string) error {
	if !outboxTableName.MatchString(table) || len(table) > 52 {
		return fmt.Errorf("must be a plain SQL identifier of at most 52 characters (letters, digits, _; optionally schema.table), got %q", table)
	}
	return nil
}

var outboxTableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)
