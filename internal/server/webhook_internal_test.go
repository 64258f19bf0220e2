package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sepp-dev/sepp/internal/config"
	"github.com/sepp-dev/sepp/internal/store/pebble"
)

// newWebhookServer builds a server on a real Pebble store without serving
// it; the caller closes the store.
func newWebhookServer(t *testing.T, doc string) (*Server, *pebble.Store, error) {
	t.Helper()
	cfg, err := config.Parse("test.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	st, err := pebble.Open(context.Background(), pebble.Options{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Config: cfg, Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return s, st, err
}

// TestWebhookSecretMissingStopsStart: a secret that cannot be read stops
// the server at start, naming the webhook and what to set.
func TestWebhookSecretMissingStopsStart(t *testing.T) {
	t.Setenv("SEPP_TEST_UNSET_SECRET", "")
	missing := filepath.Join(t.TempDir(), "nope")
	for doc, want := range map[string][]string{
		"[[webhooks]]\npath = \"/hooks/a\"\nqueue = \"q\"\njob_type = \"t\"\n[webhooks.signature]\nscheme = \"github\"\nsecret_env = \"SEPP_TEST_UNSET_SECRET\"\n": {
			"webhook /hooks/a", "SEPP_TEST_UNSET_SECRET", "not set or empty", "set it to the github signing secret"},
		fmt.Sprintf("[[webhooks]]\npath = \"/hooks/b\"\nqueue = \"q\"\njob_type = \"t\"\n[webhooks.signature]\nscheme = \"stripe\"\nsecret_file = %q\n", missing): {
			"webhook /hooks/b", "cannot read secret_file " + missing, "no such file or directory"},
	} {
		s, st, err := newWebhookServer(t, doc)
		st.Close()
		if err == nil || s != nil {
			t.Fatalf("started without its secret:\n%s", doc)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	}
}

// TestWebhookStoreUnavailable: a store that cannot take the write gets 503
// with Retry-After, over real HTTP through the server's own mux.
func TestWebhookStoreUnavailable(t *testing.T) {
	s, st, err := newWebhookServer(t, "[[webhooks]]\npath = \"/hooks/a\"\nqueue = \"q\"\njob_type = \"t\"\n")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.http.Handler)
	defer hs.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", hs.URL+"/hooks/a", strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", "k")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p problem
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || p.Reason != ReasonUnavailable || p.Status != 503 {
		t.Fatalf("closed store: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
}

func TestWebhookStatusMapping(t *testing.T) {
	for _, tc := range []struct {
		e    *apiError
		want int
	}{
		{toAPIError(errDuplicateForTest{}), http.StatusInternalServerError},
		{newError(4 /* connect.CodeDeadlineExceeded */, ReasonUnavailable, "x"), 503},
		{newError(6 /* AlreadyExists */, "DUPLICATE_JOB", "x"), 409},
		{newError(6, ReasonIdempotencyKeyConflict, "x"), 422},
		{newError(3 /* InvalidArgument */, ReasonPayloadTooLarge, "x"), 413},
		{newError(3, ReasonUnknownJobType, "x"), 400},
		{newError(5 /* NotFound */, ReasonUnknownQueue, "x"), 404},
	} {
		if got := webhookStatus(tc.e); got != tc.want {
			t.Errorf("%s (%v): %d, want %d", tc.e.reason, tc.e.code, got, tc.want)
		}
	}
}

type errDuplicateForTest struct{}

func (errDuplicateForTest) Error() string { return "boom" }

func fuzzHMAC(secret, msg []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return hex.EncodeToString(m.Sum(nil))
}

// FuzzWebhookRequest fuzzes what a webhook reads from a request: the key
// header and the signature header of each scheme. It checks that nothing
// panics, that a signature is accepted only when it is the HMAC of the
// body (a forged value never passes), and that a correctly signed body
// always passes.
func FuzzWebhookRequest(f *testing.F) {
	f.Add("delivery-1", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", []byte("Hello, World!"), []byte("secret"), int64(1700000000))
	f.Add(`"quoted \" key"`, "t=1700000000,v1=00,v0=ab", []byte(`{"id":"evt_1"}`), []byte("whsec"), int64(1700000000))
	f.Add("", "t=,v1=", []byte{}, []byte("k"), int64(0))
	f.Add(`"`, "t=1,t=2,v1=zz", []byte("x"), []byte("k"), int64(-1))
	f.Fuzz(func(t *testing.T, keyHeader, sigHeader string, body, secret []byte, ts int64) {
		// The key header, as one value and as that value twice.
		key, present, err := parseKeyHeader([]string{keyHeader})
		if err == nil && present && key == "" {
			t.Fatalf("key %q: present but empty", keyHeader)
		}
		if err == nil && !present && strings.Trim(keyHeader, " \t") != "" {
			t.Fatalf("key %q: not present", keyHeader)
		}
		if _, _, err2 := parseKeyHeader([]string{keyHeader, keyHeader}); err2 == nil && present {
			t.Fatalf("key %q sent twice was accepted", keyHeader)
		}
		if len(secret) == 0 {
			return
		}
		now := time.Unix(1700000000, 0)
		schemes := []config.WebhookSignature{
			{Scheme: config.SignatureGitHub},
			{Scheme: config.SignatureStripe, ToleranceMs: 300000},
			{Scheme: config.SignatureHMACSHA256, Header: "X-Signature", Prefix: "v1="},
		}
		headers := []string{githubSignatureHeader, stripeSignatureHeader, "X-Signature"}
		for i, sig := range schemes {
			// The fuzzed header value: whatever it is, it passes only if it
			// carries the body's HMAC.
			h := http.Header{}
			h.Set(headers[i], sigHeader)
			if err := verifySignature(sig, h, body, secret, now); err == nil {
				want := fuzzHMAC(secret, body)
				if sig.Scheme == config.SignatureStripe {
					pt, _, perr := parseStripeSignature(strings.Trim(sigHeader, " \t"))
					if perr != nil {
						t.Fatalf("stripe %q accepted but does not parse: %v", sigHeader, perr)
					}
					want = fuzzHMAC(secret, stripeSignedPayload(pt, body))
				}
				if !strings.Contains(strings.ToLower(sigHeader), want) {
					t.Fatalf("%s accepted %q for a body whose HMAC is %s", sig.Scheme, sigHeader, want)
				}
			}
			// A correct signature passes.
			var good string
			switch sig.Scheme {
			case config.SignatureGitHub:
				good = "sha256=" + fuzzHMAC(secret, body)
			case config.SignatureStripe:
				good = "t=1700000000,v1=" + fuzzHMAC(secret, stripeSignedPayload(1700000000, body))
			default:
				good = "v1=" + fuzzHMAC(secret, body)
			}
			h.Set(headers[i], good)
			if err := verifySignature(sig, h, body, secret, now); err != nil {
				t.Fatalf("%s refused a correct signature %q: %v", sig.Scheme, good, err)
			}
		}
		// Stripe's timestamp: ts outside the tolerance is refused even when
		// signed correctly.
		h := http.Header{}
		h.Set(stripeSignatureHeader, "t="+strconv.FormatInt(ts, 10)+",v1="+fuzzHMAC(secret, stripeSignedPayload(ts, body)))
		err = verifySignature(schemes[1], h, body, secret, now)
		if d := now.Unix() - ts; ts > 0 && d >= -300 && d <= 300 {
			if err != nil {
				t.Fatalf("stripe t=%d within the tolerance refused: %v", ts, err)
			}
		} else if err == nil {
			t.Fatalf("stripe t=%d outside the tolerance accepted", ts)
		}
	})
}
