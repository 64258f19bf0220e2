package main

import (
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func TestParseFaults(t *testing.T) {
	for _, tc := range []struct {
		in, backend, want, err string
	}{
		{"all", backendEmbedded, "kill,pause,partition-client,loss,disk-full,log-delete,relay-abort", ""},
		{"", backendPostgres, "kill,pause,partition-client,loss,partition-db,pg-restart,clock-skew,relay-abort", ""},
		{"kill, pause", backendPostgres, "kill,pause", ""},
		{"pg-restart", backendEmbedded, "", "does not apply to the embedded backend"},
		{"disk-full", backendPostgres, "", "does not apply to the postgres backend"},
		{"meteor", backendEmbedded, "", `unknown fault "meteor"`},
	} {
		got, err := parseFaults(tc.in, tc.backend)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseFaults(%q, %s) = %v, %v; want an error with %q", tc.in, tc.backend, got, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("parseFaults(%q, %s) = %v, %v; want %s", tc.in, tc.backend, got, err, tc.want)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, args := range [][]string{
		{},                                  // no -out
		{"-out", "x", "-backend", "sqlite"}, // unknown backend
		{"-out", "x", "-nodes", "3"},        // the embedded store has one node
		{"-out", "x", "-clients", "1"},      // a producer and a worker at least
		{"-out", "x", "-broken", "fsync-lies"},
		{"-out", "x", "-outbox=false", "-faults", "kill,relay-abort"},                                // no relays to abort
		{"-out", "x", "-backend", "postgres", "-postgres-restart", "true", "-app-db", "sepp_faults"}, // the store's database
	} {
		if _, err := parseOptions(args, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) accepted", args)
		}
	}
}

// TestNodeConfig: the config a node gets parses as TOML and declares every
// queue of the campaign with the policy the state section reports.
func TestNodeConfig(t *testing.T) {
	for _, backend := range []string{backendEmbedded, backendPostgres} {
		o, err := parseOptions([]string{"-out", t.TempDir(), "-backend", backend, "-postgres-restart", "true"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		c := &cluster{opts: o}
		n := &node{i: 0, addr: "10.231.1.2:50051", hostIP: "10.231.1.1", dataDir: "/data"}
		var cfg struct {
			Schedules []struct {
				Name    string `toml:"name"`
				Cron    string `toml:"cron"`
				Queue   string `toml:"queue"`
				CatchUp string `toml:"catch_up"`
			} `toml:"schedules"`
			Outboxes []struct {
				Name    string `toml:"name"`
				Dialect string `toml:"dialect"`
				URLEnv  string `toml:"url_env"`
			} `toml:"outboxes"`
			Storage struct {
				Backend string `toml:"backend"`
				URL     string `toml:"url"`
			} `toml:"storage"`
			Queues []struct {
				Name          string `toml:"name"`
				DedupWindowMs int64  `toml:"dedup_window_ms"`
				OnDuplicate   string `toml:"on_duplicate"`
				WhenRunning   string `toml:"when_running"`
				DebounceMs    int64  `toml:"debounce_ms"`
				Rules         []struct {
					WindowMs int64  `toml:"window_ms"`
					Limit    int    `toml:"limit"`
					Action   string `toml:"action"`
				} `toml:"rules"`
				Concurrency *struct {
					Limit   int  `toml:"limit"`
					Ordered bool `toml:"ordered"`
				} `toml:"concurrency"`
				Rate *struct {
					Limit    int   `toml:"limit"`
					PeriodMs int64 `toml:"period_ms"`
				} `toml:"rate"`
			} `toml:"queues"`
		}
		if err := toml.Unmarshal([]byte(c.nodeConfig(n)), &cfg); err != nil {
			t.Fatalf("%s: %v\n%s", backend, err, c.nodeConfig(n))
		}
		// The campaign's queues, then the schedule's.
		if cfg.Storage.Backend != backend || len(cfg.Queues) != len(campaignQueues)+1 {
			t.Fatalf("%s: backend %q, %d queues", backend, cfg.Storage.Backend, len(cfg.Queues))
		}
		if s := cfg.Schedules; len(s) != 1 || s[0].Cron != "@every 1s" || s[0].CatchUp != "all" || s[0].Queue != scheduleQueue ||
			cfg.Queues[len(campaignQueues)].Name != scheduleQueue {
			t.Fatalf("%s: schedules %+v", backend, s)
		}
		cfg.Queues = cfg.Queues[:len(campaignQueues)]
		if backend == backendPostgres && !strings.Contains(cfg.Storage.URL, "@10.231.1.1:5432/sepp_faults") {
			t.Fatalf("node's database URL %q does not go through its forwarder", cfg.Storage.URL)
		}
		// Every node relays the app database's outbox, reached through its
		// forwarder as the store's database is.
		if len(cfg.Outboxes) != 1 || cfg.Outboxes[0].Dialect != "postgres" || cfg.Outboxes[0].URLEnv != appDBEnv {
			t.Fatalf("%s: outboxes %+v", backend, cfg.Outboxes)
		}
		if u := o.nodeAppURL(n.hostIP); !strings.Contains(u, "@10.231.1.1:5432/sepp_faults_app") {
			t.Fatalf("node's app database URL %q does not go through its forwarder", u)
		}
		for i, q := range cfg.Queues {
			p := campaignQueues[i]
			if q.Name != p.Queue || q.DedupWindowMs != p.DedupWindowMS || q.OnDuplicate != p.OnDuplicate ||
				q.WhenRunning != p.WhenRunning || q.DebounceMs != p.DebounceMS {
				t.Errorf("queue %d: config %+v, policy %+v", i, q, p)
			}
			if p.RuleWindowMS > 0 != (len(q.Rules) == 1) ||
				(len(q.Rules) == 1 && (q.Rules[0].WindowMs != p.RuleWindowMS || q.Rules[0].Limit != p.RuleLimit || q.Rules[0].Action != p.RuleAction)) {
				t.Errorf("queue %s: rules %+v, policy %+v", p.Queue, q.Rules, p)
			}
			if c := q.Concurrency; (p.ConcurrencyLimit > 0) != (c != nil) || (c != nil && (c.Limit != p.ConcurrencyLimit || c.Ordered != p.ConcurrencyOrdered)) {
				t.Errorf("queue %s: concurrency %+v, policy %+v", p.Queue, c, p)
			}
			if r := q.Rate; (p.RateLimit > 0) != (r != nil) || (r != nil && (r.Limit != p.RateLimit || r.PeriodMs != p.RatePeriodMS)) {
				t.Errorf("queue %s: rate %+v, policy %+v", p.Queue, r, p)
			}
		}
	}
}

// TestNoOutboxNoRelayAbort: without the outbox, every kind but
// relay-abort.
func TestNoOutboxNoRelayAbort(t *testing.T) {
	o, err := parseOptions([]string{"-out", "x", "-outbox=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.faults, ","); got != "kill,pause,partition-client,loss,disk-full,log-delete" {
		t.Errorf("faults without the outbox: %s", got)
	}
}

// TestNemesisDealsEveryKind: each round of faults has every kind once, in
// an order its random source decides.
func TestNemesisDealsEveryKind(t *testing.T) {
	kinds := defaultFaults(backendPostgres)
	nm := &nemesis{kinds: kinds, rng: rand.New(rand.NewPCG(1, 0))}
	for round := 0; round < 3; round++ {
		seen := map[string]int{}
		for range kinds {
			seen[nm.next()]++
		}
		for _, k := range kinds {
			if seen[k] != 1 {
				t.Fatalf("round %d dealt %q %d times: %v", round, k, seen[k], seen)
			}
		}
	}
}
