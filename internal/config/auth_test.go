package config

import (
	"errors"
	"strings"
	"testing"
)

const hash64 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestAuthParses(t *testing.T) {
	c, err := Parse("sepp.toml", []byte(`[server]
listen = "0.0.0.0:50051"
log_keys = "hash"

[auth]
metrics_token_role = "reader"

[[auth.tokens]]
name = "billing"
secret_sha256 = "`+strings.ToUpper(hash64)+`"
roles = ["producer", "reader"]
queues = ["payments*", "invoices"]

[[auth.tokens]]
name = "workers"
secret_env = "SEPP_TOKEN_WORKERS"
roles = ["worker"]

[[auth.tokens]]
name = "ops"
secret_file = "/etc/sepp/ops-token"
roles = ["admin"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Auth.Enabled() || len(c.Auth.Tokens) != 3 || c.Auth.MetricsTokenRole != RoleReader || c.Server.LogKeys != LogKeysHash {
		t.Fatalf("got %+v", c.Auth)
	}
	b := c.Auth.Tokens[0]
	if !b.HasRole(RoleProducer) || b.HasRole(RoleAdmin) || !b.AllowsQueue("payments-eu") || !b.AllowsQueue("invoices") || b.AllowsQueue("emails") || b.AllowsQueue("invoices2") {
		t.Errorf("billing token: %+v", b)
	}
	if !c.Auth.Tokens[1].AllowsQueue("anything") {
		t.Error("a token without queues must allow every queue")
	}
	if err := c.CheckExposure(); err != nil {
		t.Errorf("tokens set, listening on 0.0.0.0: %v", err)
	}
	d := Default()
	if d.Server.LogKeys != LogKeysFull || d.Server.AllowUnauthenticated || d.Auth.Enabled() {
		t.Errorf("defaults: %+v %+v", d.Server, d.Auth)
	}
}

func TestAuthBad(t *testing.T) {
	tok := func(body string) string { return "[[auth.tokens]]\n" + body }
	for _, tc := range []struct{ name, doc, want string }{
		{"plain secret", tok("name = \"a\"\nsecret = \"hunter2\"\nroles = [\"admin\"]\n"),
			`sepp.toml:3: auth.tokens[0].secret: a token's secret is never written into the config file: write its SHA-256 in secret_sha256 (sepp token create prints it), or put the secret in an environment variable named by secret_env, or in a file named by secret_file`},
		{"no name", tok("secret_sha256 = \"" + hash64 + "\"\nroles = [\"admin\"]\n"),
			`sepp.toml:1: auth.tokens[0].name: missing: every [[auth.tokens]] entry needs a name, like name = "billing-api"; logs and errors name the token by it`},
		{"duplicate name", tok("name = \"a\"\nsecret_env = \"A\"\nroles = [\"admin\"]\n") + tok("name = \"a\"\nsecret_env = \"B\"\nroles = [\"admin\"]\n"),
			`sepp.toml:6: auth.tokens[1].name: duplicate token name "a" (first at line 2); give each token its own name`},
		{"no secret", tok("name = \"a\"\nroles = [\"admin\"]\n"),
			`sepp.toml:1: auth.tokens[0].secret_sha256: missing: say what the token's secret is with one of secret_sha256 = "<64 hex digits>" (sepp token create prints it), secret_env = "SEPP_TOKEN_BILLING" (an environment variable) or secret_file = "/etc/sepp/billing-token" (a file)`},
		{"two secrets", tok("name = \"a\"\nsecret_sha256 = \"" + hash64 + "\"\nsecret_env = \"A\"\nroles = [\"admin\"]\n"),
			`sepp.toml:4: auth.tokens[0].secret_env: cannot be set together with secret_sha256; keep one of secret_sha256, secret_env and secret_file`},
		{"short hash", tok("name = \"a\"\nsecret_sha256 = \"abc\"\nroles = [\"admin\"]\n"),
			`sepp.toml:3: auth.tokens[0].secret_sha256: must be 64 hex digits, the SHA-256 of the secret (sepp token create prints it), got 3 characters (the hex SHA-256 of the token's secret, as sepp token create prints it)`},
		{"same hash twice", tok("name = \"a\"\nsecret_sha256 = \""+hash64+"\"\nroles = [\"admin\"]\n") + tok("name = \"b\"\nsecret_sha256 = \""+hash64+"\"\nroles = [\"admin\"]\n"),
			`sepp.toml:7: auth.tokens[1].secret_sha256: is the same as the secret_sha256 of the token at line 3: two tokens with one secret cannot be told apart; create a new secret with sepp token create`},
		{"bad env name", tok("name = \"a\"\nsecret_env = \"A=B\"\nroles = [\"admin\"]\n"),
			`sepp.toml:3: auth.tokens[0].secret_env: must be an environment variable name, like "SEPP_TOKEN_BILLING", got "A=B" (the environment variable holding the token's secret)`},
		{"no roles", tok("name = \"a\"\nsecret_env = \"A\"\n"),
			`sepp.toml:1: auth.tokens[0].roles: missing: every [[auth.tokens]] entry needs roles, like roles = ["producer"]; the roles are "producer", "worker", "reader" or "admin"`},
		{"empty roles", tok("name = \"a\"\nsecret_env = \"A\"\nroles = []\n"),
			`sepp.toml:4: auth.tokens[0].roles: is empty: a token with no role can call nothing; list some of "producer", "worker", "reader" or "admin"`},
		{"unknown role", tok("name = \"a\"\nsecret_env = \"A\"\nroles = [\"writer\"]\n"),
			`sepp.toml:4: auth.tokens[0].roles: "writer" is not a role; the roles are "producer", "worker", "reader" or "admin"`},
		{"role twice", tok("name = \"a\"\nsecret_env = \"A\"\nroles = [\"admin\", \"admin\"]\n"),
			`sepp.toml:4: auth.tokens[0].roles: "admin" is listed twice; list each role once`},
		{"empty queues", tok("name = \"a\"\nsecret_env = \"A\"\nroles = [\"admin\"]\nqueues = []\n"),
			`sepp.toml:5: auth.tokens[0].queues: is empty, which would allow no queue; list queue names or globs like ["payments*"], or leave queues out to allow every queue`},
		{"metrics role unknown", "[auth]\nmetrics_token_role = \"viewer\"\n" + tok("name = \"a\"\nsecret_env = \"A\"\nroles = [\"admin\"]\n"),
			`sepp.toml:2: auth.metrics_token_role: must be one of "producer", "worker", "reader" or "admin", got "viewer" (the role whose tokens (and admin's) may read /metrics, "producer", "worker", "reader" or "admin"; default: /metrics is open)`},
		{"metrics role without tokens", "[auth]\nmetrics_token_role = \"reader\"\n",
			`sepp.toml:2: auth.metrics_token_role: needs [[auth.tokens]]: without a token no one could read /metrics; add tokens, or leave metrics_token_role out to keep /metrics open`},
		{"log_keys", "[server]\nlog_keys = \"short\"\n",
			`sepp.toml:2: server.log_keys: must be "full", "hash" or "none", got "short" (how log lines show idempotency keys, "full", "hash" (sha256:<16 hex digits>) or "none"; default "full")`},
		{"allow_unauthenticated type", "[server]\nallow_unauthenticated = \"yes\"\n",
			`sepp.toml:2: server.allow_unauthenticated: must be true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("sepp.toml", []byte(tc.doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got\n\t%s\nwant\n\t%s", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Error("the error shows the secret")
			}
		})
	}
}

func TestCheckExposure(t *testing.T) {
	c, err := Parse("sepp.toml", []byte("[server]\n\nlisten = \"0.0.0.0:50051\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckExposure(); err == nil || !strings.HasPrefix(err.Error(), `sepp.toml:3: server.listen: "0.0.0.0:50051" is not a loopback address`) {
		t.Errorf("from the file: %v", err)
	}
	for _, tc := range []struct {
		listen string
		open   bool // listening beyond loopback
	}{
		{"127.0.0.1:50051", false}, {"127.5.6.7:1", false}, {"[::1]:50051", false}, {"localhost:50051", false}, {"LOCALHOST:1", false},
		{"0.0.0.0:50051", true}, {":50051", true}, {"[::]:50051", true}, {"10.0.0.5:50051", true}, {"sepp.internal:50051", true},
	} {
		c := Default()
		c.Server.Listen = tc.listen
		err := c.CheckExposure()
		if (err != nil) != tc.open {
			t.Errorf("%s: %v", tc.listen, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "[[auth.tokens]]") || !strings.Contains(err.Error(), "allow_unauthenticated = true")) {
			t.Errorf("%s: the message does not name both ways out: %v", tc.listen, err)
		}
		c.Server.AllowUnauthenticated = true
		if err := c.CheckExposure(); err != nil {
			t.Errorf("%s with allow_unauthenticated: %v", tc.listen, err)
		}
	}
}

func TestMatchQueueGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, queue string
		want           bool
	}{
		{"payments", "payments", true}, {"payments", "payments-eu", false},
		{"payments*", "payments", true}, {"payments*", "payments-eu", true}, {"payments*", "emails", false},
		{"*", "", true}, {"*", "anything", true},
		{"*-eu", "payments-eu", true}, {"*-eu", "payments-us", false},
		{"a*b*c", "abc", true}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "acb", false}, {"a*bc", "abc", true}, {"ab*bc", "abc", false},
		{"q?", "q?", true}, {"q?", "qx", false}, {"[a]", "[a]", true}, {"[a]", "a", false},
	} {
		if got := MatchQueueGlob(tc.pattern, tc.queue); got != tc.want {
			t.Errorf("MatchQueueGlob(%q, %q) = %v, want %v", tc.pattern, tc.queue, got, tc.want)
		}
	}
}
