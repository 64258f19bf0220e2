package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sepp-dev/sepp/internal/config"
)

// TestServeRefusesOpenPortWithoutAuth runs the real binary: listening beyond
// loopback with no [[auth.tokens]] stops serve and --check-config with an
// exit code that is not 0 and a message naming both ways out; tokens, or
// allow_unauthenticated = true, let it start.
func TestServeRefusesOpenPortWithoutAuth(t *testing.T) {
	bin := buildSepp(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data := filepath.Join(dir, "data")
	open := write("open.toml", fmt.Sprintf("[server]\nlisten = \"0.0.0.0:0\"\n\n[storage]\npath = %q\n", data))
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{{"serve", "--config", open}, {"serve", "--check-config", "--config", open}} {
		out, err := run(nil, args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("%v: %v, want a non-zero exit\n%s", args, err, out)
		}
		for _, want := range []string{open + `:2: server.listen: "0.0.0.0:0" is not a loopback address`, "[[auth.tokens]]", "allow_unauthenticated = true"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: the message lacks %q:\n%s", args, want, out)
			}
		}
	}
	// SEPP_LISTEN counts as the file's listen does.
	loop := write("loop.toml", fmt.Sprintf("[storage]\npath = %q\n", data))
	if out, err := run([]string{"SEPP_LISTEN=:0"}, "serve", "--check-config", "--config", loop); err == nil || !strings.Contains(out, `SEPP_LISTEN: ":0" is not a loopback address`) {
		t.Errorf("SEPP_LISTEN=:0 without tokens: %v\n%s", err, out)
	}
	if out, err := run([]string{"SEPP_LISTEN=127.0.0.1:0"}, "serve", "--check-config", "--config", loop); err != nil {
		t.Errorf("loopback without tokens: %v\n%s", err, out)
	}

	accepted := write("accepted.toml", fmt.Sprintf("[server]\nlisten = \"0.0.0.0:0\"\nallow_unauthenticated = true\n\n[storage]\npath = %q\n", data))
	if out, err := run(nil, "serve", "--check-config", "--config", accepted); err != nil || !strings.Contains(out, "OK") {
		t.Errorf("allow_unauthenticated = true: %v\n%s", err, out)
	}
	withToken := write("token.toml", fmt.Sprintf("[server]\nlisten = \"0.0.0.0:0\"\n\n[storage]\npath = %q\n\n[[auth.tokens]]\nname = \"ops\"\nsecret_env = \"SEPP_TEST_OPS_TOKEN\"\nroles = [\"admin\"]\n", data))
	if out, err := run(nil, "serve", "--check-config", "--config", withToken); err == nil || !strings.Contains(out, "SEPP_TEST_OPS_TOKEN") {
		t.Errorf("a token whose secret_env is not set: %v\n%s", err, out)
	}
	if out, err := run([]string{"SEPP_TEST_OPS_TOKEN=s3cret"}, "serve", "--check-config", "--config", withToken); err != nil || !strings.Contains(out, "OK") {
		t.Errorf("tokens set: %v\n%s", err, out)
	}
}

// TestServeWithTokens starts the real binary with a token and calls it with
// the CLI: without --token the call is refused with UNAUTHENTICATED, with
// it (or SEPP_TOKEN) it works.
func TestServeWithTokens(t *testing.T) {
	secret, snippet, err := newToken("ops", []string{"admin"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sepp.toml")
	if err := os.WriteFile(cfg, []byte(snippet), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &serverProcess{t: t, bin: buildSepp(t), addr: freePort(t), data: filepath.Join(dir, "data"), args: []string{"--config", cfg}}
	p.start()
	defer p.signal(15)
	addr := "--addr=http://" + p.addr
	_, _, err = cli(t, "queues", addr)
	if err == nil || !strings.Contains(err.Error(), "Authorization: Bearer") {
		t.Fatalf("queues without a token: %v", err)
	}
	if _, _, err := cli(t, "queues", addr, "--token", secret); err != nil {
		t.Fatalf("queues --token: %v", err)
	}
	if _, _, err := cli(t, "queues", addr, "--token", secret+"x"); err == nil {
		t.Fatal("queues with a wrong token succeeded")
	}
}

// TestTokenCreate: the printed secret hashes to the printed secret_sha256,
// and the printed lines are a valid config with the roles and queues asked
// for.
func TestTokenCreate(t *testing.T) {
	out, _, err := cli(t, "token", "create", "--name", "billing", "--roles", "producer, worker", "--queues", "payments*,invoices")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^  ([A-Za-z0-9_-]{43})$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no 43-character base64url secret on its own line:\n%s", out)
	}
	secret := m[1]
	i := strings.Index(out, "[[auth.tokens]]")
	if i < 0 {
		t.Fatalf("no [[auth.tokens]] lines:\n%s", out)
	}
	c, err := config.Parse("snippet", []byte(out[i:]))
	if err != nil {
		t.Fatalf("the printed lines do not parse: %v\n%s", err, out[i:])
	}
	tok := c.Auth.Tokens[0]
	sum := sha256.Sum256([]byte(secret))
	if tok.Name != "billing" || tok.SecretSHA256 != hex.EncodeToString(sum[:]) ||
		strings.Join(tok.Roles, ",") != "producer,worker" || strings.Join(tok.Queues, ",") != "payments*,invoices" {
		t.Errorf("got %+v for secret %s", tok, secret)
	}
	if strings.Contains(out[i:], secret) {
		t.Error("the config lines hold the secret")
	}
	out2, _, _ := cli(t, "token", "create", "--name", "billing", "--roles", "producer")
	if strings.Contains(out2, secret) {
		t.Error("two tokens got the same secret")
	}
	for _, args := range [][]string{
		{"token", "create", "--roles", "admin"},
		{"token", "create", "--name", "x"},
		{"token", "create", "--name", "x", "--roles", "writer"},
	} {
		if _, _, err := cli(t, args...); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// TestCLITokenCreateUsage: the real binary refuses token create's flag
// mistakes as usage errors (exit 2) that name the flag and, for a role, the
// roles there are.
func TestCLITokenCreateUsage(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--name", "x", "--roles", "writer"}, `sepp: --roles: unknown role "writer"; the roles are: producer, worker, reader, admin` + "\n"},
		{[]string{"--name", "x", "--roles", "admin,admin"}, `sepp: --roles: "admin" is listed twice; list each role once` + "\n"},
		{[]string{"--name", "x"}, "sepp: --roles is required: a comma-separated list of producer, worker, reader, admin\n"},
		{[]string{"--roles", "admin"}, "sepp: --name is required"},
		{[]string{"--name", "x", "--roles", "admin", "extra"}, `sepp: unexpected argument "extra"`},
	} {
		out, errOut, code := binRun(t, nil, append([]string{"token", "create"}, tc.args...)...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, tc.want) || !strings.HasSuffix(errOut, "Run 'sepp token create --help' for usage.\n") {
			t.Errorf("token create %v: exit %d, want 2\nstdout:\n%s\nstderr:\n%s\nwant stderr starting %q", tc.args, code, out, errOut, tc.want)
		}
	}
	_, errOut, code := binRun(t, nil, "token", "create", "--name", "x", "--roles", "writer", "--json")
	if e := jsonErr(t, "--roles writer --json", errOut); code != 2 || e.Reason != "USAGE" || !strings.Contains(e.Message, `unknown role "writer"`) {
		t.Errorf("--roles writer --json: exit %d\n%s", code, errOut)
	}
}
