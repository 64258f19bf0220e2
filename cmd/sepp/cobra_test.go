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
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	seppclient "github.com/sepp-dev/sepp"
	seppv1 "github.com/sepp-dev/sepp/gen/sepp/v1"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// binRun runs the real binary with args and an empty, non-terminal stdin,
// and returns stdout, stderr and the exit status.
func binRun(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(buildSepp(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real binary; skipped with -short")
	}
}

// TestCLIMistakes: each mistake in a command line gets a message that names
// it and the exit status of its kind; help goes to stdout.
func TestCLIMistakes(t *testing.T) {
	skipShort(t)
	srv := testserver.Start(t, testserver.Options{})
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		stdoutNone bool
	}{
		{"typo subcommand", []string{"job", "gte", "x"}, 2, nil,
			[]string{`unknown command "gte" for "sepp job"`, "Did you mean this?", "\tget"}, true},
		{"typo command", []string{"queus"}, 2, nil, []string{`unknown command "queus" for "sepp"`, "queues"}, true},
		{"typo command with flags", []string{"enqeue", "--queue", "a", "--type", "b"}, 2, nil,
			[]string{`unknown command "enqeue" for "sepp"`, "Did you mean this?\n\tenqueue\n", "Run 'sepp --help' for usage."}, true},
		{"typo subcommand with flags", []string{"jobs", "lst", "--queue", "emails"}, 2, nil,
			[]string{`unknown command "lst" for "sepp jobs"`, "Did you mean this?\n\tlist\n", "Run 'sepp jobs --help' for usage."}, true},
		{"typo command after global flags", []string{"--addr", srv.URL, "--timeout=3s", "enqeue", "-queue", "a"}, 2, nil,
			[]string{`unknown command "enqeue" for "sepp"`, "\tenqueue"}, true},
		{"a group with flags and no command", []string{"jobs", "--queue", "emails"}, 2, nil, []string{"unknown flag: --queue"}, true},
		{"enqueue without --type", []string{"enqueue", "--queue", "q"}, 2, nil, []string{`"type"`, "sepp enqueue --help"}, true},
		{"unknown flag", []string{"jobs", "list", "--stat", "dead"}, 2, nil, []string{"unknown flag: --stat"}, true},
		{"job get without id", []string{"job", "get"}, 2, nil, []string{"accepts 1 arg(s), received 0"}, true},
		{"bad --state", []string{"jobs", "list", "--state", "zombie", "--addr", srv.URL}, 2, nil, []string{`--state "zombie"`}, true},
		{"-h on stdout", []string{"job", "-h"}, 0, []string{"get", "cancel", "Usage:"}, nil, false},
		{"--help of a subcommand", []string{"job", "get", "--help"}, 0, []string{"sepp job get JOB_ID", "--addr"}, nil, false},
		{"root help has exit codes", []string{"--help"}, 0, []string{"Exit status:", "5  permission", "enqueue-batch"}, nil, false},
		{"legacy help on stdout", []string{"bench", "enqueue", "-h"}, 0, []string{"-dup"}, nil, false},
		{"help of a legacy command", []string{"help", "serve"}, 0, []string{"-check-config"}, nil, false},
		{"a group without its command", []string{"dlq"}, 2, nil, []string{"purge", "requeue"}, true},
		{"version", []string{"--version"}, 0, []string{"sepp dev"}, nil, false},
		{"completion", []string{"completion", "bash"}, 0, []string{"bash completion"}, nil, false},
		{"flags before the command", []string{"--addr", srv.URL, "--json", "queues"}, 0, []string{`"queues": [`}, nil, false},
		{"single-dash long flag", []string{"jobs", "list", "-queue", "none", "-addr", srv.URL}, 0, []string{"JOB ID"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := binRun(t, nil, tc.args...)
			if code != tc.code {
				t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.code, out, errOut)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("%v: stdout lacks %q:\n%s", tc.args, w, out)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, errOut)
				}
			}
			if tc.stdoutNone && out != "" {
				t.Errorf("%v: stdout not empty:\n%s", tc.args, out)
			}
		})
	}
}

// apiJSON parses out as the API's JSON of m, strictly (unknown fields fail),
// and checks it uses the camelCase names.
func apiJSON(t *testing.T, what, out string, m proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal([]byte(out), m); err != nil {
		t.Fatalf("%s: not the API's JSON: %v\n%s", what, err, out)
	}
	if strings.Contains(out, `"job_id"`) || strings.Contains(out, `"idempotency_key"`) {
		t.Fatalf("%s: snake_case keys:\n%s", what, out)
	}
}

// jsonErr parses an error printed under --json.
func jsonErr(t *testing.T, what, stderr string) jsonError {
	t.Helper()
	var e jsonError
	dec := json.NewDecoder(strings.NewReader(stderr))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Code == "" || e.Reason == "" || e.Message == "" || e.Metadata == nil {
		t.Fatalf("%s: not a JSON error {code, reason, message, metadata}: %v\n%s", what, err, stderr)
	}
	return e
}

// TestCLIJSONAndExitCodes: --json prints the API's JSON, errors too, and
// the exit status says what kind of failure it was.
func TestCLIJSONAndExitCodes(t *testing.T) {
	skipShort(t)
	srv := testserver.Start(t, testserver.Options{})
	addr := "--addr=" + srv.URL

	out, errOut, code := binRun(t, nil, "--json", addr, "jobs", "list", "--queue", "emails")
	var page seppv1.ListJobsResponse
	if code != 0 || !strings.Contains(out, `"jobs": []`) {
		t.Fatalf("empty jobs list --json: exit %d\n%s%s", code, out, errOut)
	}
	apiJSON(t, "jobs list", out, &page)

	out, _, code = binRun(t, nil, "enqueue", addr, "--queue", "emails", "--type", "receipt", "--key", "r-1",
		"--payload", `{"order":"8a3f"}`, "--header", "trace=abc", "--json")
	var ack seppv1.EnqueueResponse
	apiJSON(t, "enqueue", out, &ack)
	if code != 0 || ack.JobId == "" || ack.Deduplicated || !strings.Contains(out, `"jobId"`) {
		t.Fatalf("enqueue --json: exit %d\n%s", code, out)
	}

	out, _, code = binRun(t, nil, "job", "get", ack.JobId, addr, "--json")
	var got seppv1.GetJobResponse
	apiJSON(t, "job get", out, &got)
	if code != 0 || got.Job.GetJobId() != ack.JobId || string(got.Job.GetPayload()) != `{"order":"8a3f"}` ||
		got.Job.GetIdempotencyKey() != "r-1" || !strings.Contains(out, `"idempotencyKey": "r-1"`) {
		t.Fatalf("job get --json: exit %d\n%s", code, out)
	}

	// For people: the payload in full, pretty-printed, and the headers.
	out, _, code = binRun(t, nil, "job", "get", ack.JobId, addr)
	for _, w := range []string{"payload:\n  {\n    \"order\": \"8a3f\"\n  }", "trace=abc", "attempts", "last_error"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Fatalf("job get lacks %q: exit %d\n%s", w, code, out)
		}
	}

	out, _, code = binRun(t, nil, "key", "lookup", "--queue", "emails", "r-1", addr, "--json")
	var l seppv1.LookupIdempotencyKeyResponse
	apiJSON(t, "key lookup", out, &l)
	if code != 0 || !l.Found || l.JobId != ack.JobId {
		t.Fatalf("key lookup --json: exit %d\n%s", code, out)
	}
	out, _, code = binRun(t, nil, "key", "lookup", "--queue", "emails", "never", addr, "--json")
	if code != 3 || !strings.Contains(out, `"found": false`) {
		t.Fatalf("key lookup of an unknown key: exit %d, want 3\n%s", code, out)
	}

	out, _, code = binRun(t, nil, "queues", addr, "--json")
	var qs seppv1.ListQueuesResponse
	apiJSON(t, "queues", out, &qs)
	if code != 0 || len(qs.Queues) != 1 || qs.Queues[0].Available != 1 || !strings.Contains(out, `"dedupRecords"`) {
		t.Fatalf("queues --json: exit %d\n%s", code, out)
	}

	// Not found: exit 3, and the error as JSON.
	_, errOut, code = binRun(t, nil, "job", "get", "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d", addr, "--json")
	if e := jsonErr(t, "job not found", errOut); code != 3 || e.Reason != "JOB_NOT_FOUND" || e.Code != "not_found" {
		t.Fatalf("job not found: exit %d, want 3\n%s", code, errOut)
	}
	_, errOut, code = binRun(t, nil, "job", "get", "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d", addr)
	if code != 3 || !strings.Contains(errOut, "JOB_NOT_FOUND") {
		t.Fatalf("job not found without --json: exit %d\n%s", code, errOut)
	}
	// A refused enqueue: exit 1, with the reason.
	_, errOut, code = binRun(t, nil, "enqueue", addr, "--queue", "q", "--type", "t", "--key", strings.Repeat("k", 257), "--json")
	if e := jsonErr(t, "long key", errOut); code != 1 || e.Reason != "IDEMPOTENCY_KEY_TOO_LONG" {
		t.Fatalf("long key: exit %d\n%s", code, errOut)
	}
	// A usage error under --json is JSON too.
	_, errOut, code = binRun(t, nil, "enqueue", "--queue", "q", "--json")
	if e := jsonErr(t, "usage", errOut); code != 2 || e.Reason != "USAGE" || !strings.Contains(e.Message, `"type"`) {
		t.Fatalf("usage error under --json: exit %d\n%s", code, errOut)
	}

	// Server down: exit 4.
	down := "--addr=http://127.0.0.1:1"
	_, errOut, code = binRun(t, nil, "queues", down, "--timeout=3s")
	if code != 4 || !strings.Contains(errOut, "sepp serve") {
		t.Fatalf("server down: exit %d, want 4\n%s", code, errOut)
	}
	_, errOut, code = binRun(t, nil, "job", "get", "x", down, "--timeout=3s", "--json")
	if e := jsonErr(t, "server down", errOut); code != 4 || e.Reason != "UNAVAILABLE" {
		t.Fatalf("server down --json: exit %d, want 4\n%s", code, errOut)
	}
}

// TestCLIAuthExitCode: a call without a token to a server with [auth] exits 5.
func TestCLIAuthExitCode(t *testing.T) {
	skipShort(t)
	secret, snippet, err := newToken("ops", []string{"admin"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, testserver.Options{Config: snippet})
	_, errOut, code := binRun(t, nil, "queues", "--addr", srv.URL)
	if code != 5 || !strings.Contains(errOut, "UNAUTHENTICATED") {
		t.Fatalf("no token: exit %d, want 5\n%s", code, errOut)
	}
	_, errOut, code = binRun(t, nil, "queues", "--addr", srv.URL, "--json")
	if e := jsonErr(t, "no token", errOut); code != 5 || e.Reason != "UNAUTHENTICATED" {
		t.Fatalf("no token --json: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := binRun(t, []string{"SEPP_TOKEN=" + secret}, "queues", "--addr", srv.URL); code != 0 {
		t.Fatalf("with SEPP_TOKEN: exit %d\n%s", code, errOut)
	}
}

// TestCLIDestructiveCommandsAsk: dlq purge, key release and queue pause
// refuse on a non-interactive stdin without --yes (exit 2, saying so) and do
// nothing; --dry-run says what would be done and does nothing; --yes does it.
func TestCLIDestructiveCommandsAsk(t *testing.T) {
	skipShort(t)
	srv, c := startMailServer(t)
	addr := "--addr=" + srv.URL
	ctx := context.Background()
	for i := range 3 {
		if _, err := c.Enqueue(ctx, seppclient.EnqueueRequest{Queue: "mail", JobType: "t", IdempotencyKey: seppclient.Key(fmt.Sprint("k", i))}); err != nil {
			t.Fatal(err)
		}
		r, err := c.Reserve(ctx, seppclient.ReserveRequest{Queues: []string{"mail"}})
		if err != nil || len(r) != 1 {
			t.Fatalf("reserve: %v %v", r, err)
		}
		if _, err := c.Fail(ctx, r[0].Job.ID, r[0].LeaseToken, "boom", seppclient.FailOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dead := func() int64 {
		qs, err := c.ListQueues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if q.Name == "mail" {
				return q.Dead
			}
		}
		return -1
	}
	if n := dead(); n != 3 {
		t.Fatalf("%d dead jobs, want 3", n)
	}

	for _, args := range [][]string{
		{"dlq", "purge", "--queue", "mail"},
		{"key", "release", "--queue", "mail", "k0"},
		{"queue", "pause", "mail"},
	} {
		out, errOut, code := binRun(t, nil, append(args, addr)...)
		if code != 2 || !strings.Contains(errOut, "pass --yes") || out != "" {
			t.Fatalf("%v without --yes: exit %d, want 2\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
		}
	}
	out, errOut, code := binRun(t, nil, "dlq", "purge", "--queue", "mail", "--dry-run", addr)
	if code != 0 || !strings.Contains(out, "would purge 3 dead jobs from queue mail") {
		t.Fatalf("dlq purge --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = binRun(t, nil, "dlq", "purge", "--all", "--dry-run", "--json", addr)
	var dry struct {
		DryRun     bool   `json:"dryRun"`
		WouldPurge string `json:"wouldPurge"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &dry) != nil || !dry.DryRun || dry.WouldPurge != "3" {
		t.Fatalf("dlq purge --all --dry-run --json: exit %d\n%s", code, out)
	}
	page, err := c.ListJobs(ctx, seppclient.ListJobsRequest{Queue: "mail", State: seppclient.JobStateDead})
	if err != nil || len(page.Jobs) != 3 {
		t.Fatalf("dead jobs: %v %v", page, err)
	}
	out, _, code = binRun(t, nil, "dlq", "purge", page.Jobs[0].ID, "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d", "--dry-run", addr)
	if code != 3 || !strings.Contains(out, "would purge 1 dead job of the 2 given") { // 3: one id is no dead job
		t.Fatalf("dlq purge ID... --dry-run: exit %d\n%s", code, out)
	}
	out, _, code = binRun(t, nil, "key", "release", "--queue", "mail", "k0", "--dry-run", addr)
	if code != 0 || !strings.Contains(out, "would release key") {
		t.Fatalf("key release --dry-run: exit %d\n%s", code, out)
	}
	out, _, code = binRun(t, nil, "queue", "pause", "mail", "--dry-run", addr)
	if code != 0 || !strings.Contains(out, "would pause") {
		t.Fatalf("queue pause --dry-run: exit %d\n%s", code, out)
	}
	// Nothing changed.
	if n := dead(); n != 3 {
		t.Fatalf("%d dead jobs after the refusals and dry runs, want 3", n)
	}
	if l, err := c.LookupIdempotencyKey(ctx, "mail", "k0"); err != nil || !l.Found {
		t.Fatalf("k0 after the refusals and dry runs: %+v %v", l, err)
	}
	if qs, _ := c.ListQueues(ctx); len(qs) != 1 || qs[0].Paused {
		t.Fatalf("queue after the refusals and dry runs: %+v", qs)
	}

	out, _, code = binRun(t, nil, "dlq", "purge", "--queue", "mail", "--yes", addr, "--json")
	var purged seppv1.PurgeDeadJobsResponse
	apiJSON(t, "dlq purge", out, &purged)
	if code != 0 || purged.Purged != 3 || dead() != 0 {
		t.Fatalf("dlq purge --yes: exit %d\n%s", code, out)
	}
}

// TestCLIEnqueueBatch: 100,000 lines, half of them repeating the keys of the
// other half, make 50,000 jobs and 50,000 hits, exactly.
func TestCLIEnqueueBatch(t *testing.T) {
	skipShort(t)
	srv := testserver.Start(t, testserver.Options{})
	const n = 100000
	var b strings.Builder
	for i := range n {
		k := i % (n / 2)
		switch k % 3 {
		case 0:
			fmt.Fprintf(&b, `{"queue":"imports","jobType":"row","idempotencyKey":"row-%d","payload":{"row":%d}}`+"\n", k, k)
		case 1:
			fmt.Fprintf(&b, `{"jobType":"row","idempotencyKey":"row-%d","payload":"text %d","headers":{"src":"file"},"priority":2}`+"\n", k, k)
		default:
			fmt.Fprintf(&b, `{"idempotencyKey":"row-%d","payloadBase64":"AAEC"}`+"\n", k)
		}
	}
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := binRun(t, nil, "enqueue-batch", "--file", file, "--queue", "imports", "--type", "row",
		"--addr", srv.URL, "--json", "--progress")
	var sum batchSummary
	if code != 0 || json.Unmarshal([]byte(out), &sum) != nil {
		t.Fatalf("enqueue-batch: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if sum.Lines != n || sum.Created != n/2 || sum.Hits != n/2 || sum.Errors != 0 {
		t.Fatalf("enqueue-batch: %+v, want %d lines, %d created, %d hits", sum, n, n/2, n/2)
	}
	if !strings.Contains(errOut, "\renqueue-batch: 100000/100000 jobs sent") || !strings.Contains(errOut, "1000/100000") {
		t.Fatalf("no progress on stderr with --progress:\n%.500s", errOut)
	}
	ctx := context.Background()
	c, err := seppclient.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	qs, err := c.ListQueues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Available != n/2 {
		t.Fatalf("the store after enqueue-batch: %+v %v, want %d jobs", qs, err, n/2)
	}

	// Again from stdin, for people: all hits; bad lines are reported by
	// line number, without progress (stderr is not a terminal).
	bad := `{"queue":"imports","jobType":"row","idempotencyKey":"row-1","payload":{"row":1}}` + "\n\n" +
		`{"queue":"imports","jobType":"row","idempotencyKey":"` + strings.Repeat("k", 300) + `"}` + "\n" +
		`{"queue":"imports","jobTyp":"row"}` + "\n" + `not json` + "\n"
	cmd := exec.Command(buildSepp(t), "enqueue-batch", "-f", "-", "--addr", srv.URL)
	cmd.Stdin = strings.NewReader(bad)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("bad lines: %v\n%s%s", err, o.String(), e.String())
	}
	for _, w := range []string{"lines    4", "created  0", "hits     1 (deduplicated)", "errors   3",
		"  line 3: IDEMPOTENCY_KEY_TOO_LONG: idempotency key is 300 bytes", "entity or event id\n  line 4: INVALID_LINE:", `unknown field "jobTyp"`, "\n  line 5: INVALID_LINE"} {
		if !strings.Contains(o.String(), w) {
			t.Errorf("summary lacks %q:\n%s", w, o.String())
		}
	}
	if strings.Contains(e.String(), "\r") || !strings.Contains(e.String(), "3 of 4 lines failed") {
		t.Errorf("stderr:\n%s", e.String())
	}

	// --atomic: a refused line refuses its call, which writes nothing.
	atomicFile := filepath.Join(t.TempDir(), "atomic.jsonl")
	os.WriteFile(atomicFile, []byte(`{"queue":"a","jobType":"t","idempotencyKey":"a-1"}`+"\n"+
		`{"queue":"a","jobType":"t","idempotencyKey":""}`+"\n"), 0o644)
	out, errOut, code = binRun(t, nil, "enqueue-batch", "--file", atomicFile, "--atomic", "--addr", srv.URL, "--json")
	if code != 1 || json.Unmarshal([]byte(out), &sum) != nil || sum.Created != 0 || sum.Errors != 1 ||
		len(sum.FirstErrors) != 1 || sum.FirstErrors[0].Line != 2 {
		t.Fatalf("atomic: exit %d\n%s%s", code, out, errOut)
	}
	if l, err := c.LookupIdempotencyKey(ctx, "a", "a-1"); err != nil || l.Found {
		t.Fatalf("the refused atomic call wrote a-1: %+v %v", l, err)
	}
}

// helpSections returns the section headings of a cobra help text ("Usage:",
// "Flags:", ...) and whether every flag line is in cobra's style
// ("  -h, --help   ..." or "      --config file   ..."), not the flag
// package's ("  -config file" over an indented "    \tusage" line).
func helpSections(help string) (sections []string, cobraFlags bool) {
	heading := regexp.MustCompile(`^[A-Z][A-Za-z ]*:$`)
	cobraFlag := regexp.MustCompile(`^  (-[a-zA-Z], |    )--[a-z0-9-]+( [a-zA-Z=.]+)?  `)
	cobraFlags = true
	inFlags := false
	for _, line := range strings.Split(help, "\n") {
		switch {
		case heading.MatchString(line):
			sections = append(sections, line)
			inFlags = strings.HasSuffix(line, "Flags:")
		case line == "":
			inFlags = false
		case inFlags && !cobraFlag.MatchString(line):
			cobraFlags = false
		case strings.HasPrefix(line, "    \t"):
			cobraFlags = false
		}
	}
	return sections, cobraFlags
}

// TestCLIHelpOneStyle: every command's help is cobra's: the legacy commands
// (serve, migrate, token create, webhook test, bench ...), which parse Go
// flags, show them in cobra's sections and flag lines, as enqueue does,
// for --help, -h and "sepp help CMD" alike; the root's flags (--addr, --json
// ...), which they do not take, are not listed for them.
func TestCLIHelpOneStyle(t *testing.T) {
	skipShort(t)
	help := func(args ...string) string {
		t.Helper()
		out, errOut, code := binRun(t, nil, args...)
		if code != 0 || errOut != "" {
			t.Fatalf("%v: exit %d\nstderr:\n%s", args, code, errOut)
		}
		return out
	}
	want, ok := helpSections(help("enqueue", "--help"))
	if !ok || !slices.Equal(want, []string{"Usage:", "Flags:", "Global Flags:"}) {
		t.Fatalf("enqueue --help: sections %q (cobra flag lines: %v)", want, ok)
	}
	serve := help("serve", "--help")
	if got := help("help", "serve"); got != serve {
		t.Errorf("sepp help serve differs from sepp serve --help:\n%s\n---\n%s", got, serve)
	}
	if got := help("serve", "-h"); got != serve {
		t.Errorf("sepp serve -h differs from sepp serve --help:\n%s\n---\n%s", got, serve)
	}
	for _, w := range []string{"\nUsage:\n  sepp serve [--config FILE] [--check-config] [flags]\n", "\nFlags:\n",
		"      --check-config ", "      --config file ", "  -h, --help ", `(default "info")`} {
		if !strings.Contains(serve, w) {
			t.Errorf("sepp serve --help lacks %q:\n%s", w, serve)
		}
	}
	root := newRoot(&cliEnv{})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.HasSubCommands() {
			for _, s := range c.Commands() {
				walk(s)
			}
			return
		}
		path := strings.Fields(c.CommandPath())[1:]
		out := help(append(path, "--help")...)
		got, ok := helpSections(out)
		if !ok || len(got) < 2 || got[0] != "Usage:" || got[1] != "Flags:" || len(got) > 3 {
			t.Errorf("%v --help: sections %q, cobra flag lines %v, want those of enqueue (%q):\n%s", path, got, ok, want, out)
		}
		if c.DisableFlagParsing && (len(got) != 2 || strings.Contains(out, "--json               print the API's JSON")) {
			t.Errorf("%v --help lists the root's flags, which it does not take:\n%s", path, out)
		}
		if !strings.Contains(out, "\nUsage:\n  "+c.CommandPath()) || !strings.Contains(out, "  -h, --help ") {
			t.Errorf("%v --help: no usage line or -h:\n%s", path, out)
		}
	}
	walk(root)
}

// TestCLINumericFlagsChecked: a numeric flag out of its range is refused by
// the CLI before any call, as a usage error (exit 2) naming the flag and
// the range, not as the server's error about its field (page_size).
func TestCLINumericFlagsChecked(t *testing.T) {
	skipShort(t)
	srv := testserver.Start(t, testserver.Options{})
	addr := "--addr=" + srv.URL
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs", "list", "--limit", "-1"}, "sepp: --limit -1: want 1 to 1000 (jobs per page)\nRun 'sepp jobs list --help' for usage.\n"},
		{[]string{"jobs", "list", "--limit", "0"}, "sepp: --limit 0: want 1 to 1000 (jobs per page)\n"},
		{[]string{"dlq", "list", "--limit", "1001"}, "sepp: --limit 1001: want 1 to 1000 (jobs per page)\nRun 'sepp dlq list --help' for usage.\n"},
		{[]string{"enqueue", "--queue", "q", "--type", "t", "--priority", "3000000000"},
			"sepp: --priority 3000000000: want -2147483648 to 2147483647 (higher runs first)\n"},
		{[]string{"enqueue", "--queue", "q", "--type", "t", "--max-attempts", "-1"},
			"sepp: --max-attempts -1: want 0 to 2147483647 (0: the queue's max_attempts)\n"},
		{[]string{"queues", "--timeout", "0s"}, "sepp: --timeout 0s: want more than 0, like 10s\n"},
		{[]string{"enqueue-batch", "--file", "-", "--batch-size", "0"}, "sepp: --batch-size 0: want at least 1\n"},
		{[]string{"webhook", "test", "--path", "/hooks/x", "--timeout", "-1s"}, "sepp: --timeout -1s: want more than 0, like 10s\n"},
		{[]string{"bench", "worker", "--queues", "q", "-c", "0"}, "sepp: -c 0: want 1 or more (worker goroutines)\n"},
	} {
		out, errOut, code := binRun(t, nil, append(tc.args, addr)...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, tc.want) {
			t.Errorf("%v: exit %d, want 2\nstdout:\n%s\nstderr:\n%s\nwant stderr starting %q", tc.args, code, out, errOut, tc.want)
		}
	}
	_, errOut, code := binRun(t, nil, "jobs", "list", "--limit", "-1", addr, "--json")
	if e := jsonErr(t, "--limit -1 --json", errOut); code != 2 || e.Reason != "USAGE" || !strings.HasPrefix(e.Message, "--limit -1: ") {
		t.Errorf("--limit -1 --json: exit %d\n%s", code, errOut)
	}
	// Nothing reached the server (no queue q), and the limits themselves
	// are accepted.
	out, errOut, code := binRun(t, nil, "queues", addr, "--json")
	if code != 0 || !strings.Contains(out, `"queues": []`) {
		t.Errorf("queues after the refused enqueues: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = binRun(t, nil, "jobs", "list", "--limit", "1000", addr, "--json")
	if code != 0 || !strings.Contains(out, `"jobs": []`) {
		t.Errorf("--limit 1000: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCLIQueuePauseUnknown: the real binary's queue pause and resume of a
// queue the server does not know (not declared, no jobs) exit 3 with the
// server's UNKNOWN_QUEUE and what to do, and leave nothing listed; --create
// pauses it; a declared queue or one with jobs needs no --create.
func TestCLIQueuePauseUnknown(t *testing.T) {
	skipShort(t)
	srv := testserver.Start(t, testserver.Options{Config: "[[queues]]\nname = \"mail\"\n"})
	addr := "--addr=" + srv.URL
	const refused = `sepp: UNKNOWN_QUEUE: queue "nosuchqueue" is not declared and has no jobs; declare it in [[queues]] or pass --create (create: true) to pause it before its first job` + "\n"
	out, errOut, code := binRun(t, nil, "queue", "pause", "nosuchqueue", "--yes", addr)
	if code != 3 || out != "" || errOut != refused {
		t.Fatalf("queue pause nosuchqueue --yes: exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	_, errOut, code = binRun(t, nil, "queue", "resume", "nosuchqueue", addr)
	if code != 3 || !strings.Contains(errOut, `sepp: UNKNOWN_QUEUE: queue "nosuchqueue" is not declared and has no jobs, so it is not paused`) {
		t.Fatalf("queue resume nosuchqueue: exit %d, want 3\n%s", code, errOut)
	}
	_, errOut, code = binRun(t, nil, "queue", "pause", "nosuchqueue", "--yes", addr, "--json")
	if e := jsonErr(t, "pause --json", errOut); code != 3 || e.Reason != "UNKNOWN_QUEUE" || e.Code != "not_found" || e.Metadata["queue"] != "nosuchqueue" {
		t.Fatalf("queue pause nosuchqueue --json: exit %d\n%s", code, errOut)
	}
	out, errOut, code = binRun(t, nil, "queue", "pause", "nosuchqueue", "--dry-run", addr)
	if code != 3 || out != "" || !strings.Contains(errOut, "dry run: queue \"nosuchqueue\" is not declared and has no jobs; pausing it would be refused") {
		t.Fatalf("queue pause nosuchqueue --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, _ := binRun(t, nil, "queues", addr); strings.Contains(out, "nosuchqueue") {
		t.Fatalf("the refused pauses left the queue listed:\n%s", out)
	}

	for _, args := range [][]string{
		{"queue", "pause", "later", "--create", "--dry-run"},
		{"queue", "pause", "later", "--create", "--yes"},
		{"queue", "resume", "later"}, // known now: its pause flag
		{"queue", "pause", "mail", "--yes"},
		{"enqueue", "--queue", "emails", "--type", "receipt"},
		{"queue", "pause", "emails", "--dry-run"},
		{"queue", "pause", "emails", "--yes"},
	} {
		if out, errOut, code := binRun(t, nil, append(args, addr)...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	out, _, _ = binRun(t, nil, "queues", addr, "--json")
	var qs seppv1.ListQueuesResponse
	apiJSON(t, "queues", out, &qs)
	paused := map[string]bool{}
	for _, q := range qs.Queues {
		paused[q.Name] = q.Paused
	}
	if len(paused) != 3 || paused["later"] || !paused["mail"] || !paused["emails"] {
		t.Fatalf("queues: %v, want later resumed, mail and emails paused", paused)
	}
}

// TestCLIDeadLetterMissingIDs: dlq requeue and purge by id still do the
// dead jobs named, and name each id that is no dead job (unknown, or in
// another state) on stderr with exit 3; --json carries them as
// missingJobIds; --dry-run says the same.
func TestCLIDeadLetterMissingIDs(t *testing.T) {
	skipShort(t)
	srv, c := startMailServer(t)
	addr := "--addr=" + srv.URL
	ctx := context.Background()
	var dead []string
	for range 2 {
		ack, err := c.Enqueue(ctx, seppclient.EnqueueRequest{Queue: "mail", JobType: "t"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Reserve(ctx, seppclient.ReserveRequest{Queues: []string{"mail"}})
		if err != nil || len(r) != 1 {
			t.Fatalf("reserve: %v %v", r, err)
		}
		if _, err := c.Fail(ctx, r[0].Job.ID, r[0].LeaseToken, "boom", seppclient.FailOptions{}); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, ack.JobID)
	}
	const unknown = "0193a5c4-7f1e-7b3a-9c2d-5e6f7a8b9c0d"
	const hint = "(sepp dlq list shows the dead jobs; sepp job get ID, what became of one)\n"

	out, errOut, code := binRun(t, nil, "dlq", "requeue", dead[0], unknown, addr)
	if code != 3 || out != "requeued  1\n" || errOut != "sepp: no dead job with id "+unknown+"\n"+hint {
		t.Fatalf("dlq requeue DEAD UNKNOWN: exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, errOut, code = binRun(t, nil, "dlq", "requeue", unknown, addr, "--json")
	var rq seppv1.RequeueDeadJobsResponse
	apiJSON(t, "dlq requeue --json", out, &rq)
	if code != 3 || errOut != "" || rq.Requeued != 0 || !slices.Equal(rq.MissingJobIds, []string{unknown}) {
		t.Fatalf("dlq requeue UNKNOWN --json: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// dead[0] is available now: no dead job either.
	out, errOut, code = binRun(t, nil, "dlq", "purge", dead[0], dead[1], "--dry-run", addr)
	if code != 3 || out != "dry run: would purge 1 dead job of the 2 given; nothing done\n" || errOut != "sepp: no dead job with id "+dead[0]+"\n"+hint {
		t.Fatalf("dlq purge --dry-run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, errOut, code = binRun(t, nil, "dlq", "purge", dead[0], dead[1], unknown, "--yes", addr, "--json")
	var pg seppv1.PurgeDeadJobsResponse
	apiJSON(t, "dlq purge --json", out, &pg)
	if code != 3 || errOut != "" || pg.Purged != 1 || !slices.Equal(pg.MissingJobIds, []string{dead[0], unknown}) {
		t.Fatalf("dlq purge --json: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if _, err := c.GetJob(ctx, dead[1]); !errors.Is(err, seppclient.ErrJobNotFound) {
		t.Fatalf("the dead job named with missing ones was not purged: %v", err)
	}
	// All named jobs dead: exit 0, missingJobIds [].
	out, errOut, code = binRun(t, nil, "dlq", "requeue", "--queue", "mail", addr, "--json")
	if code != 0 || errOut != "" || !strings.Contains(out, `"missingJobIds": []`) {
		t.Fatalf("dlq requeue --queue --json: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
