package server_test

import (
	"context"
	"database/sql"
	"net/http"
	"os"
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
// deploy/grafana/sepp.json name is served by a real server's /metrics once
// it has done what the metric counts: a shipped rule or panel on a metric
// that was renamed or never existed would stay silent.
func TestDeployMetricsExist(t *testing.T) {
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", dbPath+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ddl, err := outbox.Schema(outbox.SQLite, outbox.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range outbox.Statements(ddl) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DEPLOY_TEST_APP_DB", dbPath)
	srv := testserver.Start(t, testserver.Options{RealTime: true, Config: `
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
`})
	c, err := sepp.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// What the metrics count: enqueues and a hit, a delivery that dies, a
	// held job, an effect claim, a webhook request, an outbox row (valid
	// and refused), a sweep.
	for range 2 {
		if _, err := c.Enqueue(ctx, sepp.EnqueueRequest{Queue: "mail", JobType: "t", IdempotencyKey: sepp.Key("k")}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
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
	resp, err := http.Post(srv.URL+"/hooks/test", "application/json", strings.NewReader(`{}`))
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
	srv.Sweep(ctx)

	names := deployMetricNames(t)
	var missing []string
	testserver.Await(t, "every named metric served", func() bool {
		body := scrape(t, srv)
		missing = missing[:0]
		for _, n := range names {
			if !regexp.MustCompile(`(?m)^` + n + `(_bucket|_sum|_count)?[{ ]`).MatchString(body) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 && testing.Verbose() {
			t.Logf("missing: %v", missing)
		}
		return len(missing) == 0
	})
	if len(names) < 15 {
		t.Fatalf("only %d metric names found in deploy/: %v", len(names), names)
	}
}

// deployMetricNames are the sepp_ metrics the shipped rules and dashboard
// name, histogram suffixes removed.
func deployMetricNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, f := range []string{"../../deploy/prometheus/alerts.yml", "../../deploy/grafana/sepp.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\bsepp_[a-z_]+`).FindAllString(string(b), -1) {
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
