package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
	"github.com/sepp-dev/sepp/outbox"
)

// TestDeployMetricsExist: every metric that deploy/prometheus/alerts.yml and
// deploy/grafana/sepp.json name is served by a real sepp serve once it has
// done what the metric counts, both in its own /metrics and as the real
// Prometheus server stores it after scraping, with the alert rules loaded
// and evaluating without error: a shipped rule or panel on a metric that was
// renamed or never existed would stay silent.
//
// The Prometheus half needs the prometheus binary (Debian's prometheus
// package). Without it the test skips that half, unless
// SEPP_TEST_PROMETHEUS names the binary, as CI does, and then fails.
func TestDeployMetricsExist(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "app.db")
	db := sqliteOutbox(t, dbPath)
	cfg := filepath.Join(t.TempDir(), "sepp.toml")
	os.WriteFile(cfg, []byte(`
[storage]
sweep_interval_ms = 50

[[queues]]
name = "mail"
max_attempts = 1

[[queues]]
name = "gated"
[queues.concurrency]
limit = 1

[[webhooks]]
path = "/hooks/test"
queue = "mail"
job_type = "hook"
require_key = false

[[outboxes]]
name = "app"
dialect = "sqlite"
url_env = "DEPLOY_TEST_APP_DB"
poll_interval_ms = 20

[[schedules]]
name = "heartbeat"
cron = "@every 1s"
queue = "mail"
job_type = "beat"
`), 0o644)
	p := startNode(t, buildSepp(t), t.TempDir(), []string{"--config", cfg}, "DEPLOY_TEST_APP_DB="+dbPath)
	url := "http://" + p.addr
	c, err := sepp.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exerciseMetrics(t, c, db, url)

	names := deployMetricNames(t)
	if len(names) < 15 {
		t.Fatalf("only %d metric names found in deploy/: %v", len(names), names)
	}
	testserver.Await(t, "every named metric served", func() bool {
		missing := missingMetrics(names, func(n string) bool {
			return regexp.MustCompile(`(?m)^` + n + `(_bucket|_sum|_count)?[{ ]`).MatchString(httpGet(t, url+"/metrics"))
		})
		if len(missing) > 0 && testing.Verbose() {
			t.Logf("missing from /metrics: %v", missing)
		}
		return len(missing) == 0
	})

	checkMetricsDocumented(t, httpGet(t, url+"/metrics"))

	prom := prometheusBinary(t)
	if prom == "" {
		t.Skip("the prometheus binary is not installed (apt-get install prometheus): checked /metrics, not Prometheus")
	}
	promURL := startPrometheus(t, prom, p.addr)
	testserver.Await(t, "Prometheus stored every named metric", func() bool {
		var stored []string
		promQuery(t, promURL+"/api/v1/label/__name__/values", &stored)
		missing := missingMetrics(names, func(n string) bool {
			return slices.Contains(stored, n) || slices.Contains(stored, n+"_bucket")
		})
		if len(missing) > 0 && testing.Verbose() {
			t.Logf("missing from Prometheus: %v", missing)
		}
		return len(missing) == 0
	})
	want := strings.Count(readDeployFile(t, "prometheus/alerts.yml"), "- alert:")
	testserver.Await(t, "every alert rule evaluated without error", func() bool {
		var rules struct {
			Groups []struct {
				Rules []struct {
					Name           string `json:"name"`
					Health         string `json:"health"`
					LastError      string `json:"lastError"`
					LastEvaluation string `json:"lastEvaluation"`
				} `json:"rules"`
			} `json:"groups"`
		}
		promQuery(t, promURL+"/api/v1/rules", &rules)
		ok := 0
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.LastError != "" {
					t.Fatalf("rule %s: %s", r.Name, r.LastError)
				}
				if r.Health == "ok" {
					ok++
				}
			}
		}
		return ok == want
	})
}

// exerciseMetrics does what the named metrics count: enqueues and a hit, a
// delivery that dies, a held job, an effect claim, a webhook request, an
// outbox row (valid and refused); the server's sweeper and the schedule
// run on their own.
func exerciseMetrics(t *testing.T, c *sepp.Client, db *sql.DB, url string) {
	t.Helper()
	ctx := context.Background()
	for range 2 {
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "mail", JobType: "t", IdempotencyKey: sepp.Key("k")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "gated", JobType: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.Reserve(ctx, sepp.ReserveRequest{Queues: []string{"mail"}, MaxJobs: 1})
	if err != nil || len(res) != 1 {
		t.Fatalf("reserve: %v %v", res, err)
	}
	if _, err := c.Fail(ctx, res[0].Job.ID, res[0].LeaseToken, "boom", sepp.FailOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ClaimEffect(ctx, sepp.ClaimEffectRequest{Scope: "s", Key: "e"}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url+"/hooks/test", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := (outbox.Writer{Dialect: outbox.SQLite}).Enqueue(ctx, db, sepp.EnqueueRequest{Queue: "mail", JobType: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO sepp_outbox (id, queue, job_type, payload) VALUES ('bad', 'mail', 't', ?)`, strings.Repeat("x", 2<<20)); err != nil {
		t.Fatal(err)
	}
}

// sqliteOutbox creates an app database at path with the outbox table, its
// handle waiting for the relay's write lock as docs/outbox.md tells apps to.
func sqliteOutbox(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ddl, err := outbox.Schema(outbox.SQLite, outbox.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range outbox.Statements(ddl) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// checkMetricsDocumented: docs/observability.md's table of every metric
// lists exactly the sepp_ metrics a server that did everything serves.
func checkMetricsDocumented(t *testing.T, scraped string) {
	t.Helper()
	var served []string
	for _, m := range regexp.MustCompile(`(?m)^# HELP (sepp_[a-z_]+) `).FindAllStringSubmatch(scraped, -1) {
		served = append(served, m[1])
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(sepp_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}
	for _, n := range served {
		if !slices.Contains(documented, n) {
			t.Errorf("%s is served but not in docs/observability.md's table of metrics", n)
		}
	}
	for _, n := range documented {
		if !slices.Contains(served, n) {
			t.Errorf("docs/observability.md lists %s, which the server does not serve", n)
		}
	}
}

func missingMetrics(names []string, has func(string) bool) []string {
	var missing []string
	for _, n := range names {
		if !has(n) {
			missing = append(missing, n)
		}
	}
	return missing
}

func readDeployFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deployMetricNames are the sepp_ metrics the shipped rules and dashboard
// name, histogram suffixes removed.
func deployMetricNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, f := range []string{"prometheus/alerts.yml", "grafana/sepp.json"} {
		for _, m := range regexp.MustCompile(`\bsepp_[a-z_]+`).FindAllString(readDeployFile(t, f), -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				m = strings.TrimSuffix(m, suffix)
			}
			if !slices.Contains(names, m) {
				names = append(names, m)
			}
		}
	}
	slices.Sort(names)
	return names
}

// prometheusBinary is the prometheus server to run: SEPP_TEST_PROMETHEUS,
// which must exist, or prometheus on PATH, or "" when there is none.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SEPP_TEST_PROMETHEUS"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("SEPP_TEST_PROMETHEUS: %v", err)
		}
		return p
	}
	p, _ := exec.LookPath("prometheus")
	return p
}

// startPrometheus runs the real Prometheus server scraping the sepp server
// at target every second, with the shipped alert rules, and returns its URL.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: sepp
    static_configs:
      - targets: [%q]
`, rules, target)), 0o644)
	addr := freePort(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", log)
		}
	})
	url := "http://" + addr
	testserver.Await(t, "Prometheus ready", func() bool {
		resp, err := http.Get(url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url
}

// promQuery reads one Prometheus HTTP API answer's data into v.
func promQuery(t *testing.T, url string, v any) {
	t.Helper()
	var answer struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal([]byte(httpGet(t, url)), &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Status != "success" {
		t.Fatalf("%s: %s", url, answer.Error)
	}
	if err := json.Unmarshal(answer.Data, v); err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
