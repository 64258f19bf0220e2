package config

import (
	"strings"
	"testing"
	"time"
)

func TestQueueRules(t *testing.T) {
	c, err := Parse("sepp.toml", []byte(`
[[queues]]
name = "payments"

[[queues.rules]]
name = "same-amount"
key_fields = ["/account", "/amount"]
window_ms = 60000

[[queues.rules]]
name = "same-card"
key_fields = ["/card"]
window_ms = 1000
`))
	if err != nil {
		t.Fatal(err)
	}
	rules := c.Queue("payments").Rules
	if len(rules) != 2 || rules[0].Name != "same-amount" || rules[0].Window() != time.Minute ||
		strings.Join(rules[0].KeyFields, ",") != "/account,/amount" || rules[1].Name != "same-card" {
		t.Fatalf("rules: %+v", rules)
	}
	head := "[[queues]]\nname = \"payments\"\n\n[[queues.rules]]\n"
	for _, tc := range []struct{ name, file, want string }{
		{"no name", head + "key_fields = [\"/a\"]\nwindow_ms = 1000\n", `sepp.toml:4: queues[0].rules[0].name: is required`},
		{"duplicate", head + "name = \"r\"\nkey_fields = [\"/a\"]\nwindow_ms = 1000\n[[queues.rules]]\nname = \"r\"\nkey_fields = [\"/b\"]\nwindow_ms = 1000\n",
			`queues[0].rules[1].name: duplicate rule "r" in queue "payments"`},
		{"no fields", head + "name = \"r\"\nwindow_ms = 1000\n", `queues[0].rules[0].key_fields: is required`},
		{"bad pointer", head + "name = \"r\"\nkey_fields = [\"amount\"]\nwindow_ms = 1000\n", `queues[0].rules[0].key_fields: "amount" is not a JSON pointer (RFC 6901): it must start with "/"`},
		{"no window", head + "name = \"r\"\nkey_fields = [\"/a\"]\n", `queues[0].rules[0].window_ms: is required`},
		{"negative window", head + "name = \"r\"\nkey_fields = [\"/a\"]\nwindow_ms = -5\n", `queues[0].rules[0].window_ms: must be > 0, got -5`},
		{"unknown key", head + "name = \"r\"\nkey_fields = [\"/a\"]\nwindow_ms = 1000\nwindow = 5\n", `queues[0].rules[0].window: unknown key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("sepp.toml", []byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestOnDuplicateModes(t *testing.T) {
	c, err := Parse("sepp.toml", []byte("[[queues]]\nname = \"d\"\non_duplicate = \"debounce\"\ndebounce_ms = 5000\ndebounce_max_wait_ms = 60000\n\n[[queues]]\nname = \"r\"\non_duplicate = \"replace\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if q := c.Queue("d"); q.OnDuplicate != OnDuplicateDebounce || q.DebounceMs != 5000 || q.DebounceMaxWaitMs != 60000 {
		t.Fatalf("debounce queue: %+v", q)
	}
	if q := c.Queue("r"); q.OnDuplicate != OnDuplicateReplace {
		t.Fatalf("replace queue: %+v", q)
	}
	head := "[[queues]]\nname = \"q\"\n"
	for _, tc := range []struct{ name, file, want string }{
		{"unknown", head + "on_duplicate = \"drop\"\n", `queues[0].on_duplicate: must be "return_original", "reject", "replace" or "debounce", got "drop"`},
		{"debounce without delay", head + "on_duplicate = \"debounce\"\n", `queues[0].debounce_ms: is required with on_duplicate = "debounce"`},
		{"delay without debounce", head + "debounce_ms = 5\n", `queues[0].debounce_ms: is only used with on_duplicate = "debounce"`},
		{"negative wait", head + "on_duplicate = \"debounce\"\ndebounce_ms = 5\ndebounce_max_wait_ms = -1\n", `queues[0].debounce_max_wait_ms: must be > 0, got -1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("sepp.toml", []byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDedupPolicy(t *testing.T) {
	c, err := Parse("sepp.toml", []byte(`
[[queues]]
name = "payments"
on_duplicate = "debounce"
debounce_ms = 5000
key_reuse = "reject_mismatch"
release_key_on = ["dead"]

[[queues.rules]]
name = "same"
key_fields = ["/a"]
window_ms = 1000
`))
	if err != nil {
		t.Fatal(err)
	}
	want := `on_duplicate=debounce debounce_ms=5000 key_reuse=reject_mismatch release_key_on=["dead"] rule={"key_fields":["/a"],"name":"same","window_ms":1000}`
	if got := c.Queue("payments").DedupPolicy(); got != want {
		t.Fatalf("policy %q, want %q", got, want)
	}
	if got := c.Queue("other").DedupPolicy(); got != "" {
		t.Fatalf("default queue's policy %q, want empty", got)
	}
}
