package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	seppclient "github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/store"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// cli runs the CLI in-process and returns stdout, stderr and the error.
func cli(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestCLIEnqueueLookupRelease(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	addr := "--addr=" + srv.URL

	out, _, err := cli(t, "enqueue", addr, "--queue", "emails", "--type", "receipt", "--key", "receipt-order-8a3f", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		JobID        string `json:"jobId"`
		Deduplicated bool   `json:"deduplicated"`
	}
	if err := json.Unmarshal([]byte(out), &first); err != nil || first.JobID == "" || first.Deduplicated {
		t.Fatalf("first enqueue --json: %q %v", out, err)
	}

	out, _, err = cli(t, "enqueue", addr, "--queue", "emails", "--type", "receipt", "--key", "receipt-order-8a3f")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"job_id", first.JobID, "deduplicated", "true", "original_enqueued_at"} {
		if !strings.Contains(out, want) {
			t.Fatalf("second enqueue table lacks %q:\n%s", want, out)
		}
	}

	out, _, err = cli(t, "key", "lookup", addr, "--queue", "emails", "receipt-order-8a3f")
	if err != nil || !strings.Contains(out, first.JobID) || !regexpLine(out, "hits", "1") || !regexpLine(out, "state", "available") {
		t.Fatalf("key lookup: %v\n%s", err, out)
	}
	out, _, err = cli(t, "job", "get", first.JobID, addr, "--json")
	if err != nil || !strings.Contains(out, `"jobId": "`+first.JobID+`"`) || !strings.Contains(out, `"idempotencyKey": "receipt-order-8a3f"`) {
		t.Fatalf("job get --json: %v\n%s", err, out)
	}
	out, _, err = cli(t, "key", "release", addr, "--queue", "emails", "receipt-order-8a3f", "--yes")
	if err != nil || !regexpLine(out, "released", "true") {
		t.Fatalf("key release: %v\n%s", err, out)
	}
	// Not found: the answer is printed, and the exit status is 3.
	out, _, err = cli(t, "key", "lookup", addr, "--queue", "emails", "receipt-order-8a3f", "--json")
	if err != exitCode(exitNotFound) || !strings.Contains(out, `"found": false`) {
		t.Fatalf("lookup after release: %v\n%s", err, out)
	}
	out, _, err = cli(t, "job", "cancel", first.JobID, addr)
	if err != nil || !regexpLine(out, "state", "cancelled") {
		t.Fatalf("job cancel: %v\n%s", err, out)
	}
}

// regexpLine reports whether out has a table line "key   value".
func regexpLine(out, key, value string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == key && f[1] == value {
			return true
		}
	}
	return false
}

func TestCLIErrors(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	addr := "--addr=" + srv.URL
	_, _, err := cli(t, "enqueue", addr, "--queue", "q", "--type", "t", "--key", strings.Repeat("k", 257))
	if err == nil || !strings.Contains(err.Error(), "IDEMPOTENCY_KEY_TOO_LONG") || !strings.Contains(err.Error(), "max_idempotency_key_bytes") {
		t.Fatalf("long key: %v", err)
	}
	_, _, err = cli(t, "job", "get", "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d", addr)
	if err == nil || !strings.Contains(err.Error(), "JOB_NOT_FOUND") {
		t.Fatalf("unknown job: %v", err)
	}
	_, stderr, err := cli(t, "enqueue", addr, "--queue", "q")
	if code, ok := err.(exitCode); !ok || code != 2 || !strings.Contains(stderr, "usage") {
		t.Fatalf("missing --type: %v %q", err, stderr)
	}
	_, _, err = cli(t, "job", "get", "x", "--addr=http://127.0.0.1:1", "--timeout=2s")
	if err == nil || !strings.Contains(err.Error(), "sepp serve") {
		t.Fatalf("no server: %v", err)
	}
	if _, _, err := cli(t, "frobnicate"); err != exitCode(2) {
		t.Fatalf("unknown command: %v", err)
	}
}

// TestCLIEmptyKeyFails: --key "" (a script's unset variable) reaches the
// server as an empty key and fails as one, with the exit status of any
// refused enqueue, and creates no job; without --key the job is unkeyed.
func TestCLIEmptyKeyFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real binary; skipped with -short")
	}
	srv := testserver.Start(t, testserver.Options{})
	bin := buildSepp(t)
	sepp := func(args ...string) (string, int) {
		out, err := exec.Command(bin, append(args, "--addr", srv.URL)...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	for _, args := range [][]string{{"--key", ""}, {"--key="}} {
		out, code := sepp(append([]string{"enqueue", "--queue", "emails", "--type", "receipt"}, args...)...)
		if code != 1 || !strings.Contains(out, "IDEMPOTENCY_KEY_EMPTY") {
			t.Fatalf("enqueue %q: exit %d, output:\n%s", args, code, out)
		}
	}
	// The same exit status as another refused key.
	if out, code := sepp("enqueue", "--queue", "emails", "--type", "receipt", "--key", strings.Repeat("k", 257)); code != 1 ||
		!strings.Contains(out, "IDEMPOTENCY_KEY_TOO_LONG") {
		t.Fatalf("long key: exit %d\n%s", code, out)
	}
	out, code := sepp("jobs", "list", "--queue", "emails", "--json")
	if code != 0 || strings.Contains(out, "jobId") {
		t.Fatalf("jobs after refused enqueues: exit %d\n%s", code, out)
	}
	if out, code := sepp("enqueue", "--queue", "emails", "--type", "receipt"); code != 0 || !regexpLine(out, "deduplicated", "false") {
		t.Fatalf("enqueue without --key: exit %d\n%s", code, out)
	}
	out, _ = sepp("jobs", "list", "--queue", "emails", "--json")
	if n := strings.Count(out, `"jobId"`); n != 1 {
		t.Fatalf("jobs after one unkeyed enqueue: %d\n%s", n, out)
	}
}

func TestServeCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("[storage]\ndedup_window_ms = 3600000\n\n[[queues]]\nname = \"payments\"\ndedup_window_ms = 604800000\n"), 0o644)
	out, _, err := cli(t, "serve", "--check-config", "--config", good)
	if err != nil || out != good+": OK\n" {
		t.Fatalf("good config: %q %v", out, err)
	}

	for _, tc := range []struct{ body, want string }{
		{"[server]\nlisten = \"127.0.0.1:1\"\nlistne = \"x\"\n", ":3: server.listne: unknown key"},
		{"[storage]\n\ndedup_window_ms = -5\n", ":3: storage.dedup_window_ms"},
		{"[[queues]]\nname = \"a\"\n\n[[queues]]\nname = \"a\"\n", ":5: queues[1].name"},
		{"[server]\nstrict = \"yes\"\n", ":2: server.strict"},
	} {
		bad := filepath.Join(dir, "bad.toml")
		os.WriteFile(bad, []byte(tc.body), 0o644)
		for _, args := range [][]string{{"serve", "--check-config", "--config", bad}, {"serve", "--config", bad}} {
			_, _, err := cli(t, args...)
			if err == nil || !strings.Contains(err.Error(), bad+tc.want) {
				t.Fatalf("%q with %v: %v; want %q", tc.body, args, err, bad+tc.want)
			}
		}
	}
}

func TestCLILongKeysFollowTheServer(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Config: "[storage]\nmax_idempotency_key_bytes = 512\n"})
	key := strings.Repeat("k", 300)
	if _, _, err := cli(t, "enqueue", "--addr="+srv.URL, "--queue", "q", "--type", "t", "--key", key); err != nil {
		t.Fatalf("300-byte key with a 512-byte server limit: %v", err)
	}
	out, _, err := cli(t, "key", "lookup", "--addr="+srv.URL, "--queue", "q", key)
	if err != nil || !regexpLine(out, "found", "true") {
		t.Fatalf("lookup of a 300-byte key: %v\n%s", err, out)
	}
}

// startMailServer starts a test server with one declared queue, "mail",
// whose jobs die at their first failure, and a client connected to it.
func startMailServer(t *testing.T) (*testserver.Server, *seppclient.Client) {
	t.Helper()
	srv := testserver.Start(t, testserver.Options{Config: "[[queues]]\nname = \"mail\"\nmax_attempts = 1\n"})
	c, err := seppclient.Connect(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

func TestCLIQueuesJobsAndDeadLetter(t *testing.T) {
	srv, c := startMailServer(t)
	addr := "--addr=" + srv.URL
	ctx := context.Background()
	ack, _ := c.Enqueue(ctx, seppclient.EnqueueRequest{Queue: "mail", JobType: "t", IdempotencyKey: seppclient.Key("k")})
	r, err := c.Reserve(ctx, seppclient.ReserveRequest{Queues: []string{"mail"}})
	if err != nil || len(r) != 1 {
		t.Fatalf("reserve: %v %v", r, err)
	}
	if _, err := c.Fail(ctx, r[0].Job.ID, r[0].LeaseToken, "smtp: 550 no such user", seppclient.FailOptions{}); err != nil {
		t.Fatal(err)
	}

	out, _, err := cli(t, "queues", addr)
	if err != nil || !strings.Contains(out, "mail") || !strings.Contains(out, "DEDUP RECORDS") {
		t.Fatalf("queues: %v\n%s", err, out)
	}
	out, _, err = cli(t, "dlq", "list", addr)
	if err != nil || !strings.Contains(out, ack.JobID) || !strings.Contains(out, "smtp: 550 no such user") {
		t.Fatalf("dlq list: %v\n%s", err, out)
	}
	out, _, err = cli(t, "jobs", "list", addr, "--queue", "mail", "--state", "dead", "--json")
	if err != nil || !strings.Contains(out, ack.JobID) {
		t.Fatalf("jobs list --json: %v\n%s", err, out)
	}
	out, _, err = cli(t, "dlq", "requeue", addr, "--queue", "mail")
	if err != nil || !regexpLine(out, "requeued", "1") {
		t.Fatalf("dlq requeue: %v\n%s", err, out)
	}
	out, _, err = cli(t, "queue", "pause", "mail", addr, "--yes")
	if err != nil || !regexpLine(out, "paused", "true") {
		t.Fatalf("queue pause: %v\n%s", err, out)
	}
	out, _, err = cli(t, "queues", addr, "--json")
	if err != nil || !strings.Contains(out, `"paused": true`) || !strings.Contains(out, `"available": "1"`) {
		t.Fatalf("queues --json after pause: %v\n%s", err, out)
	}
	if _, _, err := cli(t, "jobs", "list", addr, "--state", "zombie"); err == nil {
		t.Fatal("jobs list accepted an unknown state")
	}
	if _, stderr, err := cli(t, "dlq", "purge", addr); err != exitCode(2) || !strings.Contains(stderr, "usage") {
		t.Fatalf("dlq purge without a selector: %v %q", err, stderr)
	}
}

func TestMigrate(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sepp.toml")
	os.WriteFile(cfg, []byte("[storage]\npath = \""+filepath.Join(dir, "data")+"\"\n"), 0o644)
	out, _, err := cli(t, "migrate", "--config", cfg)
	if err != nil || out != "embedded store in "+filepath.Join(dir, "data")+": applied migrations 0001_layout, 0002_flow\n" {
		t.Fatalf("migrate: %v %q", err, out)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "data", "MANIFEST-*")); len(m) == 0 {
		t.Fatal("no Pebble database (MANIFEST-*) after migrate")
	}
	out, _, err = cli(t, "migrate", "--config", cfg)
	if err != nil || out != "embedded store in "+filepath.Join(dir, "data")+": schema up to date (2 migrations)\n" {
		t.Fatalf("migrate again: %v %q", err, out)
	}
}

// TestCLIMigratePostgres: the real binary's migrate, on a schema of its own,
// names the migrations it applied, in order, and then says the schema is up
// to date with how many it has.
func TestCLIMigratePostgres(t *testing.T) {
	skipShort(t)
	url := testserver.PostgresSchema(t, "cli_migrate")
	entries, err := os.ReadDir("../../internal/store/postgres/migrations")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".sql"))
	}
	if len(names) < 3 {
		t.Fatalf("migrations: %v", names)
	}
	cfg := filepath.Join(t.TempDir(), "sepp.toml")
	os.WriteFile(cfg, []byte("[storage]\nbackend = \"postgres\"\nurl = \""+url+"\"\n"), 0o644)
	out, errOut, code := binRun(t, nil, "migrate", "--config", cfg)
	want := ": applied migrations " + strings.Join(names, ", ") + "\n"
	if code != 0 || !strings.HasPrefix(out, "postgres store in postgres://") || !strings.HasSuffix(out, want) {
		t.Fatalf("migrate on a new schema: exit %d\nstdout:\n%s\nstderr:\n%s\nwant it to end %q", code, out, errOut, want)
	}
	out, errOut, code = binRun(t, nil, "migrate", "--config", cfg)
	want = fmt.Sprintf(": schema up to date (%d migrations)\n", len(names))
	if code != 0 || !strings.HasSuffix(out, want) {
		t.Fatalf("migrate again: exit %d\nstdout:\n%s\nstderr:\n%s\nwant it to end %q", code, out, errOut, want)
	}
}

// TestRemovedSQLiteEngine: backend = "sqlite", the earlier embedded engine,
// is refused with what to do instead, and a data directory that engine wrote
// is refused by the embedded store, with the file that gave it away, instead
// of being served as a new, empty store beside the jobs it holds.
func TestRemovedSQLiteEngine(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	sqlite := filepath.Join(dir, "sqlite.toml")
	os.WriteFile(sqlite, []byte("[storage]\nbackend = \"sqlite\"\npath = \""+data+"\"\n"), 0o644)
	_, stderr, err := cli(t, "migrate", "--config", sqlite)
	if err == nil || !strings.Contains(err.Error()+stderr, `storage.backend: "sqlite", the earlier embedded engine, was removed; set "embedded"`) {
		t.Fatalf("backend = \"sqlite\": %v %q", err, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the refused config created %s: %v", data, err)
	}

	os.MkdirAll(data, 0o755)
	os.WriteFile(filepath.Join(data, store.SQLiteDatabaseFile), []byte("an earlier release's database"), 0o644)
	embedded := filepath.Join(dir, "embedded.toml")
	os.WriteFile(embedded, []byte("[storage]\npath = \""+data+"\"\n"), 0o644)
	_, stderr, err = cli(t, "migrate", "--config", embedded)
	if err == nil || !strings.Contains(err.Error()+stderr, "open the embedded store in "+data+": this directory holds a SQLite store (sepp.db)") ||
		!strings.Contains(err.Error()+stderr, "drain its jobs with the release that wrote it, then point path at a new directory") {
		t.Fatalf("the embedded engine on a SQLite directory: %v %q", err, stderr)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 1 {
		t.Fatalf("the refused Open wrote into the SQLite directory: %v", entries)
	}
}
