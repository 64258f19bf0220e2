package config

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that every rejection is one
// *Error naming the file, and that an accepted config passes its own
// validation and resolves every queue to usable settings.
func FuzzParse(f *testing.F) {
	f.Add(fullFile)
	f.Add("")
	f.Add("[server]\nlisten = 127.0.0.1:50051\n")
	f.Add("[server]\nstrict = \"yes\"\nmax_batch_size = \"big\"\n")
	f.Add("[storage]\ndedup_window_ms = -5\nbackend = \"postgres\"\n")
	f.Add("[[queues]]\nname = \"a\"\n[[queues]]\nname = \"a\"\nkey_reuse = \"foo\"\n")
	f.Add("queues = [{ name = \"a\", backoff_initial_ms = 5 }, { name = \"b\", max_attempts = 0 }]\n")
	f.Add("server = { listen = \":1\" }\nstorage.path = \"x\"\n[queues.x]\n[[server]]\n")
	f.Add("[[queues]]\nname = \"a\"\njob_types = [\"x\", \"\", 3]\n[queues.sub]\n")
	f.Add("\ufeff[server]\r\nlisten = \":1\"\r\n")
	f.Add(webhookFile)
	f.Add("[[webhooks]]\npath = \"/h/\"\n[webhooks.signature]\nsecret = \"x\"\n[[webhooks]]\nsignature = { scheme = \"stripe\", timestamp_tolerance_ms = 0 }\n")

	f.Fuzz(func(t *testing.T, doc string) {
		c, err := Parse("f.toml", []byte(doc))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error is %T, not *Error: %v", err, err)
			}
			if e.File != "f.toml" || e.Msg == "" || !strings.HasPrefix(err.Error(), "f.toml") {
				t.Fatalf("bad error %#v", e)
			}
			return
		}
		if err := c.validate("", nil); err != nil {
			t.Fatalf("accepted config fails validate: %v", err)
		}
		check := func(q QueueConfig) {
			if q.DedupWindowMs <= 0 || q.DedupWindowMs > MaxMs || q.MaxAttempts < 1 || q.LeaseMs <= 0 ||
				q.BackoffInitialMs <= 0 || q.BackoffMaxMs < q.BackoffInitialMs || q.BackoffMaxMs > MaxMs ||
				(q.KeyReuse != KeyReuseReturnOriginal && q.KeyReuse != KeyReuseRejectMismatch) {
				t.Fatalf("unusable resolved queue %+v", q)
			}
			if q.DedupWindow() <= 0 || q.Lease() <= 0 || q.BackoffMax() <= 0 {
				t.Fatalf("duration overflow in %+v", q)
			}
		}
		for _, q := range c.Queues {
			if !c.Declared(q.Name) {
				t.Fatalf("%q not declared", q.Name)
			}
			check(c.Queue(q.Name))
		}
		check(c.Queue("\x00not declared"))
		if c.Storage.DedupWindow() <= 0 || c.Storage.SweepInterval() <= 0 ||
			c.Storage.CompletedRetention() <= 0 || c.Storage.DeadRetention() <= 0 {
			t.Fatalf("bad storage durations %+v", c.Storage)
		}
	})
}
