package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// The roles a token can hold, for [[auth.tokens]] roles and [auth]
// metrics_token_role. internal/server keeps the table of what each may call.
const (
	// RoleProducer enqueues jobs and reads them back (Enqueue, EnqueueBatch,
	// GetJob, LookupIdempotencyKey).
	RoleProducer = "producer"
	// RoleWorker runs jobs and effects: all of WorkerService and
	// EffectService.
	RoleWorker = "worker"
	// RoleReader reads: GetJob, LookupIdempotencyKey, ListJobs, ListQueues.
	RoleReader = "reader"
	// RoleAdmin may call everything.
	RoleAdmin = "admin"
)

// Roles lists every role, in the order messages name them.
var Roles = []string{RoleProducer, RoleWorker, RoleReader, RoleAdmin}

// The values of [server] log_keys.
const (
	// LogKeysFull prints idempotency keys in log lines as they are.
	LogKeysFull = "full"
	// LogKeysHash prints "sha256:" and the first 16 hex digits of the key's
	// SHA-256, enough to match lines about one key, not to read it.
	LogKeysHash = "hash"
	// LogKeysNone leaves idempotency keys out of log lines.
	LogKeysNone = "none"

	DefaultLogKeys = LogKeysFull
)

// AuthConfig is the [auth] section. With no Tokens, every call is accepted
// without a token.
type AuthConfig struct {
	// Tokens are the [[auth.tokens]] entries in file order. Default: none
	// (authentication is off).
	Tokens []TokenConfig `toml:"tokens"`
	// MetricsTokenRole, when set, makes /metrics require a token holding
	// this role or admin. Default "": /metrics is open.
	MetricsTokenRole string `toml:"metrics_token_role"`
}

// Enabled reports whether calls need a token.
func (a AuthConfig) Enabled() bool { return len(a.Tokens) > 0 }

// TokenConfig is one [[auth.tokens]] entry. Exactly one of SecretSHA256,
// SecretEnv and SecretFile says what the token's secret is; the config never
// holds the secret itself.
type TokenConfig struct {
	// Name names the token in logs and error messages. Required, unique.
	Name string `toml:"name"`
	// SecretSHA256 is the hex SHA-256 of the secret (64 hex digits), as
	// `sepp token create` prints it.
	SecretSHA256 string `toml:"secret_sha256"`
	// SecretEnv names the environment variable holding the secret.
	SecretEnv string `toml:"secret_env"`
	// SecretFile is the path of a file holding the secret (one trailing
	// newline is ignored).
	SecretFile string `toml:"secret_file"`
	// Secret is never accepted: it exists so that a secret written into the
	// file is refused with a message saying where to put it instead.
	Secret string `toml:"secret"`
	// Roles are the token's roles, of Roles. Required, non-empty.
	Roles []string `toml:"roles"`
	// Queues limits the token to these queues: names, or globs where "*"
	// matches any run of characters ("payments*"). Default (nil): every
	// queue.
	Queues []string `toml:"queues"`
}

// HasRole reports whether t holds role.
func (t TokenConfig) HasRole(role string) bool { return slices.Contains(t.Roles, role) }

// AllowsQueue reports whether t may touch queue: true for every queue when
// t.Queues is empty.
func (t TokenConfig) AllowsQueue(queue string) bool {
	if len(t.Queues) == 0 {
		return true
	}
	for _, p := range t.Queues {
		if MatchQueueGlob(p, queue) {
			return true
		}
	}
	return false
}

// MatchQueueGlob reports whether queue matches pattern, where "*" matches
// any run of characters (also none) and every other character only itself:
// queue names may hold "?", "[" or "\", which stay literal.
func MatchQueueGlob(pattern, queue string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == queue
	}
	if !strings.HasPrefix(queue, parts[0]) {
		return false
	}
	rest := queue[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return len(rest) >= len(last) && strings.HasSuffix(rest, last)
}

// IsLoopback reports whether the listen address host:port only accepts
// connections from this machine: a host in 127.0.0.0/8, ::1, or
// "localhost". An empty host (":50051") listens on every interface.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckExposure returns the error sepp serve stops with when the server
// would listen beyond loopback with no token configured and
// allow_unauthenticated is not set, or nil. The message starts with where
// listen was set (Where).
func (c *Config) CheckExposure() error {
	if c.Auth.Enabled() || c.Server.AllowUnauthenticated || IsLoopback(c.Server.Listen) {
		return nil
	}
	return errors.New(c.Where("server.listen") + fmt.Sprintf(
		"%q is not a loopback address, so other machines can reach the server, and [auth] has no tokens, so they could call everything: "+
			"configure [[auth.tokens]] (sepp token create prints the lines), or set [server] allow_unauthenticated = true to accept the risk, "+
			"or listen on 127.0.0.1", c.Server.Listen))
}

// validateAuth checks [auth] and the [server] keys that go with it into v.
func (c *Config) validateAuth(v *validator) {
	if c.Server.LogKeys != "" || v.has("server.log_keys") {
		switch c.Server.LogKeys {
		case LogKeysFull, LogKeysHash, LogKeysNone:
		default:
			v.bad("server.log_keys", fmt.Sprintf("must be %q, %q or %q, got %q", LogKeysFull, LogKeysHash, LogKeysNone, c.Server.LogKeys))
		}
	}
	a := c.Auth
	if a.MetricsTokenRole != "" || v.has("auth.metrics_token_role") {
		switch {
		case !slices.Contains(Roles, a.MetricsTokenRole):
			v.bad("auth.metrics_token_role", fmt.Sprintf("must be one of %s, got %q", quoteList(Roles), a.MetricsTokenRole))
		case !a.Enabled():
			v.fail("auth.metrics_token_role", "needs [[auth.tokens]]: without a token no one could read /metrics; add tokens, or leave metrics_token_role out to keep /metrics open")
		}
	}
	firstName := map[string]int{}
	firstHash := map[string]int{}
	for i, t := range a.Tokens {
		p := fmt.Sprintf("auth.tokens[%d]", i)
		first := func(j int, key string) string {
			f := fmt.Sprintf("auth.tokens[%d]", j)
			if l := v.line(f + "." + key); l > 0 {
				return "line " + strconv.Itoa(l)
			}
			return f
		}
		switch {
		case t.Name == "" && !v.has(p+".name"):
			v.fail(p+".name", `missing: every [[auth.tokens]] entry needs a name, like name = "billing-api"; logs and errors name the token by it`)
		case CheckQueueName(t.Name) != nil:
			v.bad(p+".name", CheckQueueName(t.Name).Error())
		default:
			if j, dup := firstName[t.Name]; dup {
				v.fail(p+".name", fmt.Sprintf("duplicate token name %q (first at %s); give each token its own name", t.Name, first(j, "name")))
			} else {
				firstName[t.Name] = i
			}
		}
		c.validateTokenSecret(v, p, t)
		if t.SecretSHA256 != "" && isHex64(t.SecretSHA256) {
			h := strings.ToLower(t.SecretSHA256)
			if j, dup := firstHash[h]; dup {
				v.fail(p+".secret_sha256", fmt.Sprintf("is the same as the secret_sha256 of the token at %s: two tokens with one secret cannot be told apart; create a new secret with sepp token create", first(j, "secret_sha256")))
			} else {
				firstHash[h] = i
			}
		}

		switch {
		case len(t.Roles) == 0 && !v.has(p+".roles"):
			v.fail(p+".roles", fmt.Sprintf(`missing: every [[auth.tokens]] entry needs roles, like roles = ["producer"]; the roles are %s`, quoteList(Roles)))
		case len(t.Roles) == 0:
			v.fail(p+".roles", fmt.Sprintf("is empty: a token with no role can call nothing; list some of %s", quoteList(Roles)))
		}
		seen := map[string]bool{}
		for _, r := range t.Roles {
			if !slices.Contains(Roles, r) {
				v.fail(p+".roles", fmt.Sprintf("%q is not a role; the roles are %s", r, quoteList(Roles)))
				break
			}
			if seen[r] {
				v.fail(p+".roles", fmt.Sprintf("%q is listed twice; list each role once", r))
				break
			}
			seen[r] = true
		}

		if v.has(p+".queues") && len(t.Queues) == 0 {
			v.fail(p+".queues", `is empty, which would allow no queue; list queue names or globs like ["payments*"], or leave queues out to allow every queue`)
		}
		for _, q := range t.Queues {
			if err := CheckQueueName(q); err != nil {
				v.fail(p+".queues", fmt.Sprintf("entry %q %v; list queue names, or globs where * matches any run of characters, like \"payments*\"", q, err))
				break
			}
		}
	}
}

// validateTokenSecret checks that exactly one of secret_sha256, secret_env
// and secret_file is set, and well formed.
func (c *Config) validateTokenSecret(v *validator, p string, t TokenConfig) {
	if t.Secret != "" || v.has(p+".secret") {
		v.fail(p+".secret", "a token's secret is never written into the config file: write its SHA-256 in secret_sha256 (sepp token create prints it), or put the secret in an environment variable named by secret_env, or in a file named by secret_file")
		return
	}
	var set []string
	for _, k := range []struct {
		key string
		val string
	}{{"secret_sha256", t.SecretSHA256}, {"secret_env", t.SecretEnv}, {"secret_file", t.SecretFile}} {
		if k.val != "" || v.has(p+"."+k.key) {
			set = append(set, k.key)
		}
	}
	switch {
	case len(set) == 0:
		v.fail(p+".secret_sha256", `missing: say what the token's secret is with one of secret_sha256 = "<64 hex digits>" (sepp token create prints it), secret_env = "SEPP_TOKEN_BILLING" (an environment variable) or secret_file = "/etc/sepp/billing-token" (a file)`)
		return
	case len(set) > 1:
		v.fail(p+"."+set[1], fmt.Sprintf("cannot be set together with %s; keep one of secret_sha256, secret_env and secret_file", set[0]))
		return
	}
	switch set[0] {
	case "secret_sha256":
		if !isHex64(t.SecretSHA256) {
			v.bad(p+".secret_sha256", fmt.Sprintf("must be 64 hex digits, the SHA-256 of the secret (sepp token create prints it), got %d characters", len(t.SecretSHA256)))
		}
	case "secret_env":
		if t.SecretEnv == "" || strings.ContainsAny(t.SecretEnv, "= \t\x00") {
			v.bad(p+".secret_env", fmt.Sprintf("must be an environment variable name, like \"SEPP_TOKEN_BILLING\", got %q", t.SecretEnv))
		}
	case "secret_file":
		if strings.TrimSpace(t.SecretFile) == "" {
			v.bad(p+".secret_file", "must not be empty")
		}
	}
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// quoteList writes list as `"a", "b" or "c"`.
func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
