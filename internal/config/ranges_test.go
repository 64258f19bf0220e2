package config

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestEveryIntKeyHasRange keeps intRanges in step with specs: every
// whole-number key has a range, inside int64 and with lo >= 0.
func TestEveryIntKeyHasRange(t *testing.T) {
	for _, s := range specs {
		if s.kind != kindInt {
			continue
		}
		r, ok := intRanges[s.path]
		if !ok {
			t.Errorf("%s is a whole-number key without a range: add it to intRanges in ranges.go", s.path)
			continue
		}
		if r.lo < 0 || r.lo > r.hi {
			t.Errorf("%s: bad range %d..%d", s.path, r.lo, r.hi)
		}
	}
	for p := range intRanges {
		if s := specByPath[p]; s == nil || s.kind != kindInt {
			t.Errorf("intRanges has %s, which is not a whole-number key", p)
		}
	}
}

// intKeyDoc returns a config file that sets the whole-number key at spec
// path p to value, with what the key needs around it, and the line the key
// is on.
func intKeyDoc(p string, value string) (string, int) {
	parent, name := splitPath(p)
	kv := name + " = " + value + "\n"
	switch parent {
	case "server", "storage", "limits":
		return "[" + parent + "]\n" + kv, 2
	case "queues[]":
		doc := "[[queues]]\nname = \"q\"\n"
		if strings.HasPrefix(name, "debounce") {
			doc += "on_duplicate = \"debounce\"\n"
			if name != "debounce_ms" {
				doc += "debounce_ms = 1000\n"
			}
		}
		return doc + kv, strings.Count(doc, "\n") + 1
	case "queues[].concurrency":
		doc := "[[queues]]\nname = \"q\"\n[queues.concurrency]\n"
		return doc + kv, 4
	case "queues[].rate":
		doc := "[[queues]]\nname = \"q\"\n[queues.rate]\n"
		if name != "period_ms" {
			doc += "period_ms = 1000\n"
		}
		return doc + kv, strings.Count(doc, "\n") + 1
	case "queues[].rules[]":
		doc := "[[queues]]\nname = \"q\"\n[[queues.rules]]\nname = \"r\"\nkey_fields = [\"/a\"]\n"
		if name != "window_ms" {
			doc += "window_ms = 1000\n"
		}
		return doc + kv, strings.Count(doc, "\n") + 1
	case "webhooks[]":
		doc := "[server]\nmax_payload_bytes = 268435456\n[[webhooks]]\npath = \"/h\"\nqueue = \"q\"\njob_type = \"t\"\nrequire_key = false\n"
		return doc + kv, 8
	case "outboxes[]":
		doc := "[[outboxes]]\nname = \"o\"\ndialect = \"postgres\"\nurl_env = \"APP_DB\"\n"
		return doc + kv, 5
	case "webhooks[].signature":
		doc := "[[webhooks]]\npath = \"/h\"\nqueue = \"q\"\njob_type = \"t\"\n[webhooks.signature]\nscheme = \"stripe\"\nsecret_env = \"X\"\n"
		return doc + kv, 8
	}
	return "", 0
}

// TestIntRangesRefused sets every whole-number key just past both ends of
// its range, and to values that would wrap in a narrower type, and expects
// each refused with the file, line and key; its bounds themselves pass.
func TestIntRangesRefused(t *testing.T) {
	for _, s := range specs {
		if s.kind != kindInt {
			continue
		}
		r := intRanges[s.path]
		bad := []int64{r.hi + 1, 4294967297, 1 << 62, -1}
		if r.lo > 1 {
			bad = append(bad, r.lo-1)
		}
		for _, n := range bad {
			if n >= r.lo && n <= r.hi {
				continue
			}
			doc, line := intKeyDoc(s.path, fmt.Sprint(n))
			if doc == "" {
				t.Errorf("%s: no test document; add its table to intKeyDoc", s.path)
				break
			}
			_, err := Parse("sepp.toml", []byte(doc))
			key := strings.ReplaceAll(s.path, "[]", "[0]")
			want := fmt.Sprintf("sepp.toml:%d: %s: ", line, key)
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s = %d: got %v, want an error starting %q", s.path, n, err, want)
			}
		}
		for _, n := range []int64{r.lo, r.hi} {
			if (s.path == "queues[].backoff_initial_ms" && n > DefaultBackoffMaxMs) ||
				(s.path == "queues[].backoff_max_ms" && n < DefaultBackoffInitialMs) {
				continue // initial <= max is checked too
			}
			if n == 0 {
				continue
			}
			doc, _ := intKeyDoc(s.path, fmt.Sprint(n))
			if _, err := Parse("sepp.toml", []byte(doc)); err != nil {
				t.Errorf("%s = %d (a bound of its range): %v", s.path, n, err)
			}
		}
	}
}

func TestPoolSizeDoesNotWrap(t *testing.T) {
	_, err := Parse("sepp.toml", []byte("[storage]\nbackend = \"postgres\"\nurl = \"postgres://u@h/db\"\npool_size = 4294967297\n"))
	want := "sepp.toml:4: storage.pool_size: must be from 1 to 1000, got 4294967297"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %q...", err, want)
	}
}

func TestListenAddressChecked(t *testing.T) {
	defer func(f func(context.Context, string) ([]string, error)) { lookupHost = f }(lookupHost)
	lookupHost = func(_ context.Context, host string) ([]string, error) {
		if host == "sepp.example" {
			return []string{"192.0.2.1"}, nil
		}
		return nil, errors.New("no such host")
	}
	for _, tc := range []struct {
		listen, want string
	}{
		{"999.1.1.1:80", `sepp.toml:2: server.listen: host "999.1.1.1" is not an IP address`},
		{"1.2.3:80", `sepp.toml:2: server.listen: host "1.2.3" is not an IP address`},
		{"nosuch.example:80", `sepp.toml:2: server.listen: host "nosuch.example" does not resolve (no such host)`},
		{"127.0.0.1:65536", `sepp.toml:2: server.listen: must end in a port number from 0 to 65535`},
		{"127.0.0.1:-1", `sepp.toml:2: server.listen: must end in a port number from 0 to 65535`},
		{"127.0.0.1", `sepp.toml:2: server.listen: must be host:port`},
		{"127.0.0.1:0", ""},
		{":50051", ""},
		{"[::1]:50051", ""},
		{"sepp.example:50051", ""},
	} {
		_, err := Parse("sepp.toml", []byte("[server]\nlisten = \""+tc.listen+"\"\n"))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.listen, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q...", tc.listen, err, tc.want)
		}
	}
	// The environment variable is checked the same way, naming itself.
	_, err := load("", nil, func(k string) (string, bool) {
		if k == EnvListen {
			return "999.1.1.1:80", true
		}
		return "", false
	})
	if err == nil || !strings.HasPrefix(err.Error(), `SEPP_LISTEN: host "999.1.1.1" is not an IP address`) {
		t.Errorf("SEPP_LISTEN: got %v", err)
	}
}

func TestQueueNamesVisible(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"pay\u200bments", `"pay\u200bments" contains the invisible format character U+200B at byte 3`},
		{"\u202eabc", `"\u202eabc" contains the invisible format character U+202E at byte 0`},
		{"a\ufeffb", `"a\ufeffb" contains the invisible format character U+FEFF at byte 1`},
		{"a\x1bb", `"a\x1bb" contains the control character U+001B at byte 1`},
		{"a\u0085b", `"a\u0085b" contains the control character U+0085 at byte 1`},
		{"a\u2028b", `"a\u2028b" contains the line or paragraph separator U+2028 at byte 1`},
		{"émails-日本", ""},
		{"with space", ""},
	} {
		err := CheckQueueName(tc.name)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%q: got %v, want %q...", tc.name, err, tc.want)
		}
	}
	// In the file: [[queues]] name and a webhook's queue.
	for _, tc := range []struct{ doc, want string }{
		{"[[queues]]\nname = \"a\u200bb\"\n", `sepp.toml:2: queues[0].name: "a\u200bb" contains the invisible format character U+200B at byte 1`},
		{"[[webhooks]]\npath = \"/h\"\nqueue = \"a\u202eb\"\njob_type = \"t\"\nrequire_key = false\n", `sepp.toml:3: webhooks[0].queue: `},
	} {
		_, err := Parse("sepp.toml", []byte(tc.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !strings.Contains(err.Error(), "U+") {
			t.Errorf("got %v, want %q...", err, tc.want)
		}
	}
}

func TestWhere(t *testing.T) {
	c, err := Parse("sepp.toml", []byte("[server]\nstrict = true\nlisten = \"127.0.0.1:7\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Where("server.listen"); got != "sepp.toml:3: server.listen: " {
		t.Errorf("from the file: %q", got)
	}
	if got := c.Where("storage.path"); got != "storage.path: " {
		t.Errorf("a default: %q", got)
	}
	c, err = load("", nil, func(k string) (string, bool) { return "127.0.0.1:8", k == EnvListen })
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Where("server.listen"); got != "SEPP_LISTEN: " {
		t.Errorf("from the environment: %q", got)
	}
}
