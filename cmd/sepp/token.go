package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/sepp-dev/sepp/internal/config"
)

const tokenCreateLong = `Makes a new API token: a random secret, printed once, and the
[[auth.tokens]] lines, with the secret's SHA-256, to add to the server's
config. The server never stores the secret, so it cannot be shown again.
docs/security.md describes the roles.`

// runTokenCreate makes a new API token: a random secret, printed once, and
// the [[auth.tokens]] lines with its SHA-256 for the server's config. The
// server never stores the secret, so it cannot be shown again.
func runTokenCreate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp token create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "the token's `name`, shown in logs and errors (required)")
	roles := fs.String("roles", "", "comma-separated `roles`, of "+strings.Join(config.Roles, ", ")+" (required)")
	queues := fs.String("queues", "", "comma-separated queue names or globs like 'payments*' the token is limited to (default: every queue)")
	jsonOut := fs.Bool("json", false, "print {name, secret, secretSha256, config} as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: the name goes in --name", pos[0])
	}
	secret, snippet, err := newToken(*name, splitList(*roles), splitList(*queues))
	if err != nil {
		return err
	}
	if *jsonOut {
		sum := sha256.Sum256([]byte(secret))
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]string{"name": *name, "secret": secret, "secretSha256": hex.EncodeToString(sum[:]), "config": snippet})
	}
	fmt.Fprintf(stdout, "secret (shown once; give it to the client as SEPP_TOKEN, --token or the header Authorization: Bearer <secret>):\n\n  %s\n\n", secret)
	fmt.Fprintf(stdout, "add to the server's config (it holds only the secret's SHA-256):\n\n%s", snippet)
	return nil
}

// newToken returns a fresh secret (32 random bytes, base64url) and the
// [[auth.tokens]] lines for it, checked by the config's own validation.
func newToken(name string, roles, queues []string) (secret, snippet string, err error) {
	if name == "" {
		return "", "", usagef("--name is required: the name logs and errors show for the token, like --name billing-api")
	}
	if len(roles) == 0 {
		return "", "", usagef("--roles is required: a comma-separated list of %s", strings.Join(config.Roles, ", "))
	}
	for _, r := range roles {
		if !slices.Contains(config.Roles, r) {
			return "", "", usagef("--roles: unknown role %q; the roles are: %s", r, strings.Join(config.Roles, ", "))
		}
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("token create: read random bytes: %w", err)
	}
	secret = base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(secret))
	var sb strings.Builder
	sb.WriteString("[[auth.tokens]]\n")
	fmt.Fprintf(&sb, "name = %s\n", strconv.Quote(name))
	fmt.Fprintf(&sb, "secret_sha256 = %q\n", hex.EncodeToString(sum[:]))
	fmt.Fprintf(&sb, "roles = %s\n", tomlList(roles))
	if len(queues) > 0 {
		fmt.Fprintf(&sb, "queues = %s\n", tomlList(queues))
	}
	snippet = sb.String()
	if _, err := config.Parse("the new token", []byte(snippet)); err != nil {
		// The flags made the lines: name the flag, not the line.
		var ce *config.Error
		if errors.As(err, &ce) {
			if key, ok := strings.CutPrefix(ce.Key, "auth.tokens[0]."); ok {
				return "", "", usagef("--%s: %s", key, ce.Msg)
			}
		}
		return "", "", fmt.Errorf("token create: %w", err)
	}
	return secret, snippet, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// tomlList writes list as a TOML array of basic strings. strconv.Quote's
// escapes (\n, \t, \", \\, \u....) are TOML's too, except \x, which it only
// writes for invalid UTF-8, which the config refuses anyway.
func tomlList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
