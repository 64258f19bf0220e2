package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

const webhookTestLong = `Sends one POST to a [[webhooks]] path, signed as the sender would sign it,
and prints the status and the body of the answer. It exits 1 unless the
answer is a 2xx.

  --scheme github|stripe|hmac-sha256 signs the body with the secret in the
  environment variable named by --secret-env; hmac-sha256 also takes
  --header (where the signature goes) and --prefix (the text before the hex
  digest). Without --scheme the request is not signed.
`

func runWebhookTest(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sepp webhook test", flag.ContinueOnError)
	addr := os.Getenv("SEPP_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	fs.StringVar(&addr, "addr", addr, "server address (env SEPP_ADDR)")
	var conn connFlags
	conn.registerTLS(fs) // --ca-file, --cert-file, --key-file (clienttls.go)
	path := fs.String("path", "", "the webhook's path, like /hooks/github (required)")
	key := fs.String("key", "", "the idempotency key, sent in --key-header (empty: none)")
	keyHeader := fs.String("key-header", "Idempotency-Key", "the header the key goes in, like X-GitHub-Delivery")
	body := fs.String("body", "", "the body: @FILE reads a file (@- stdin), anything else is sent as written")
	contentType := fs.String("content-type", "application/json", "the Content-Type of the body")
	scheme := fs.String("scheme", "", "sign the body: github, stripe or hmac-sha256 (empty: unsigned)")
	secretEnv := fs.String("secret-env", "", "the environment variable holding the signing secret (required with --scheme)")
	sigHeader := fs.String("header", "", "with --scheme hmac-sha256: the header the signature goes in, like X-Signature")
	prefix := fs.String("prefix", "", "with --scheme hmac-sha256: the text before the hex digest, like sha256=")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	var extra headerFlag
	fs.Var(&extra, "send-header", "also send header `Name=value` (repeatable), like X-GitHub-Event=push")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: the body goes in --body", pos[0])
	}
	if *path == "" {
		return usagef("--path is required: the [[webhooks]] path to POST to, like --path /hooks/github")
	}
	if *timeout <= 0 {
		return usagef("--timeout %v: want more than 0, like 10s", *timeout)
	}
	if !strings.HasPrefix(*path, "/") {
		return fmt.Errorf("--path %q: must start with /, like /hooks/github", *path)
	}
	payload, err := readBodyFlag(*body)
	if err != nil {
		return err
	}

	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(addr, "/")+*path, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("--addr %q: %v", addr, err)
	}
	if *contentType != "" {
		req.Header.Set("Content-Type", *contentType)
	}
	if *key != "" {
		req.Header.Set(*keyHeader, *key)
	}
	for k, v := range extra.m {
		req.Header.Add(k, v)
	}
	if *scheme != "" {
		if *secretEnv == "" {
			return fmt.Errorf("--scheme %s needs --secret-env NAME, the environment variable holding the signing secret (a secret is never given on the command line)", *scheme)
		}
		secret := os.Getenv(*secretEnv)
		if secret == "" {
			return fmt.Errorf("--secret-env %s: the variable is not set or empty; export it with the webhook's signing secret", *secretEnv)
		}
		name, value, err := signWebhook(*scheme, []byte(secret), payload, *sigHeader, *prefix, time.Now())
		if err != nil {
			return err
		}
		req.Header.Set(name, value)
	} else if *secretEnv != "" || *sigHeader != "" || *prefix != "" {
		return errors.New("--secret-env, --header and --prefix sign the request: give --scheme too")
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	hc := http.DefaultClient
	if tc, err := conn.tlsFor(addr); err != nil {
		return err
	} else if tc != nil {
		tr := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		hc = &http.Client{Transport: tr}
	}
	resp, err := hc.Do(req.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("POST %s: %w\n(is the server running? start it with: sepp serve)", req.URL, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("POST %s: reading the answer: %w", req.URL, err)
	}
	fmt.Fprintln(stdout, resp.Proto, resp.Status)
	for _, h := range []string{"Content-Type", "Sepp-Job-Id", "Retry-After", "Allow"} {
		if v := resp.Header.Get(h); v != "" {
			fmt.Fprintf(stdout, "%s: %s\n", h, v)
		}
	}
	fmt.Fprintln(stdout)
	stdout.Write(answer)
	if len(answer) > 0 && answer[len(answer)-1] != '\n' {
		fmt.Fprintln(stdout)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return exitCode(1)
	}
	return nil
}

// readBodyFlag reads --body: @FILE from a file, @- from stdin, else as is.
func readBodyFlag(v string) ([]byte, error) {
	switch {
	case v == "@-":
		return io.ReadAll(os.Stdin)
	case strings.HasPrefix(v, "@"):
		b, err := os.ReadFile(v[1:])
		if err != nil {
			return nil, fmt.Errorf("--body %s: %w", v, err)
		}
		return b, nil
	}
	return []byte(v), nil
}

// signWebhook returns the signature header of body under scheme, as the
// sender makes it (the server's webhook.go checks the same formats).
func signWebhook(scheme string, secret, body []byte, header, prefix string, now time.Time) (name, value string, err error) {
	mac := func(msg []byte) string {
		m := hmac.New(sha256.New, secret)
		m.Write(msg)
		return hex.EncodeToString(m.Sum(nil))
	}
	switch scheme {
	case "github":
		if header != "" || prefix != "" {
			return "", "", errors.New("--header and --prefix are only for --scheme hmac-sha256; github signs in X-Hub-Signature-256")
		}
		return "X-Hub-Signature-256", "sha256=" + mac(body), nil
	case "stripe":
		if header != "" || prefix != "" {
			return "", "", errors.New("--header and --prefix are only for --scheme hmac-sha256; stripe signs in Stripe-Signature")
		}
		t := strconv.FormatInt(now.Unix(), 10)
		return "Stripe-Signature", "t=" + t + ",v1=" + mac(append([]byte(t+"."), body...)), nil
	case "hmac-sha256":
		if header == "" {
			return "", "", errors.New("--scheme hmac-sha256 needs --header, the header the signature goes in (the webhook's signature.header)")
		}
		return header, prefix + mac(body), nil
	}
	return "", "", fmt.Errorf("--scheme %q: must be github, stripe or hmac-sha256", scheme)
}
