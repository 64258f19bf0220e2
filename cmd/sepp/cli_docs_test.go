package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	seppclient "github.com/sepp-dev/sepp"
	"github.com/sepp-dev/sepp/internal/testserver"
)

// The examples of docs/cli.md that TestCLIDocsExamples runs.
//
// Every ```console block of the page is run, in page order, against one
// server, so that the page's state builds up as it tells it: each line
// "$ sepp ..." is a command, run with the real binary (SEPP_ADDR is the test
// server's, TZ is UTC, the working directory is the test's own), and the
// lines up to the next "$ " are its output, stdout and stderr as a terminal
// shows them. An HTML comment before a block steers it:
//
//	<!-- cli-docs-test: skip (why) -->             the block is not run
//	<!-- cli-docs-test: setup dead-jobs Q N -->    N dead jobs on queue Q first
//	<!-- cli-docs-test: file NAME -->              (before any block) its text is the file NAME
const cliDocsMarker = "<!-- cli-docs-test: "

// docCommand is one "$ sepp ..." line of the page and the output it shows.
type docCommand struct {
	line int // in the page, 1-based
	args []string
	want []string
}

// docBlock is a fenced block of the page with the directives before it.
type docBlock struct {
	line       int // of the opening fence
	lang       string
	text       []string
	directives []string
}

// TestCLIDocsExamples runs the examples of docs/cli.md with the real binary
// and compares what it prints with the page, by shape: the same lines and
// words, with job ids, times, durations, secrets and hex tokens matched by
// kind. A job id the page shows is bound to the one the binary printed at
// that place, and stands for it in later commands.
func TestCLIDocsExamples(t *testing.T) {
	skipShort(t)
	page, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildSepp(t)
	srv := testserver.Start(t, testserver.Options{})
	dir := t.TempDir()
	ids := idBindings{}
	ran := 0
	for _, b := range docBlocks(t, string(page)) {
		skip := false
		for _, d := range b.directives {
			switch f := strings.Fields(d); f[0] {
			case "skip":
				skip = true
			case "file":
				if len(f) != 2 {
					t.Fatalf("docs/cli.md:%d: want <!-- cli-docs-test: file NAME -->", b.line)
				}
				if err := os.WriteFile(filepath.Join(dir, f[1]), []byte(strings.Join(b.text, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				skip = true
			case "setup":
				docSetup(t, srv, b.line, f[1:])
			default:
				t.Fatalf("docs/cli.md:%d: unknown directive %q", b.line, d)
			}
		}
		if skip || b.lang != "console" {
			continue
		}
		for _, c := range docCommands(t, b) {
			args := ids.rewrite(c.args)
			cmd := exec.Command(bin, args[1:]...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "SEPP_ADDR="+srv.URL, "TZ=UTC", "SEPP_TOKEN=", "SEPP_CA_FILE=", "SEPP_CERT_FILE=", "SEPP_KEY_FILE=")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out // one stream, as a terminal shows them
			if err := cmd.Run(); err != nil {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("docs/cli.md:%d: %v", c.line, err)
				}
			}
			got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				got = nil
			}
			if msg := ids.compare(c.want, got); msg != "" {
				t.Errorf("docs/cli.md:%d: $ %s\n%s\nthe binary printed:\n%s", c.line, strings.Join(c.args, " "), msg, out.String())
			}
			ran++
		}
	}
	if ran < 10 {
		t.Fatalf("ran %d commands of docs/cli.md: its examples are no longer found", ran)
	}
}

// docBlocks returns the fenced blocks of page, each with the
// cli-docs-test directives written just before it.
func docBlocks(t *testing.T, page string) []docBlock {
	var blocks []docBlock
	var pending []string
	var cur *docBlock
	for i, line := range strings.Split(page, "\n") {
		switch {
		case cur != nil && strings.HasPrefix(line, "```"):
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text = append(cur.text, line)
		case strings.HasPrefix(line, "```"):
			cur = &docBlock{line: i + 1, lang: strings.TrimPrefix(line, "```"), directives: pending}
			pending = nil
		case strings.HasPrefix(line, cliDocsMarker):
			d, ok := strings.CutSuffix(strings.TrimPrefix(line, cliDocsMarker), " -->")
			if !ok || strings.TrimSpace(d) == "" {
				t.Fatalf("docs/cli.md:%d: want %s... -->", i+1, cliDocsMarker)
			}
			pending = append(pending, d)
		case strings.TrimSpace(line) != "" && len(pending) > 0:
			t.Fatalf("docs/cli.md:%d: a cli-docs-test directive not followed by a block", i)
		}
	}
	if cur != nil || len(pending) > 0 {
		t.Fatal("docs/cli.md: an unclosed block, or a directive at the end")
	}
	return blocks
}

// docCommands splits a console block into its commands.
func docCommands(t *testing.T, b docBlock) []docCommand {
	var cmds []docCommand
	for i, line := range b.text {
		if rest, ok := strings.CutPrefix(line, "$ "); ok {
			args, err := shellWords(rest)
			if err != nil || len(args) == 0 || args[0] != "sepp" {
				t.Fatalf("docs/cli.md:%d: a command of a console block must be \"$ sepp ...\" (or the block skipped): %q %v", b.line+1+i, line, err)
			}
			cmds = append(cmds, docCommand{line: b.line + 1 + i, args: args})
			continue
		}
		if len(cmds) == 0 {
			t.Fatalf("docs/cli.md:%d: output before the first \"$ sepp\" of its block", b.line+1+i)
		}
		c := &cmds[len(cmds)-1]
		c.want = append(c.want, line)
	}
	return cmds
}

// shellWords splits s as a POSIX shell splits a simple command: words at
// blanks, '...' literal, "..." with \" and \\.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unclosed '")
			}
			w.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New(`unclosed "`)
			}
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// docValue matches the values that differ from run to run, by kind: job
// ids (which idBindings binds), times, durations, hex tokens and digests,
// and token secrets (43 characters of base64url on their own).
var docValue = regexp.MustCompile(`(?P<id>\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b)` +
	`|(?P<time>\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)\b)` +
	`|(?P<duration>\b\d+(?:\.\d+)?(?:ns|µs|us|ms|s|m|h)(?:\d+(?:\.\d+)?(?:ns|µs|us|ms|s|m|h))*\b)` +
	`|(?P<hex>\b[0-9a-f]{32,}\b)` +
	`|(?P<secret>(?:^|\s)[A-Za-z0-9_-]{43}$)`)

// shape is line with its varying values replaced by their kinds and its
// blanks collapsed (a table's columns are as wide as its values), and the
// job ids found, in order.
func shape(line string) (string, []string) {
	var found []string
	names := docValue.SubexpNames()
	s := docValue.ReplaceAllStringFunc(line, func(v string) string {
		m := docValue.FindStringSubmatch(v)
		for i := 1; i < len(m); i++ {
			if m[i] == "" {
				continue
			}
			if names[i] == "id" {
				found = append(found, v)
			}
			lead := v[:len(v)-len(strings.TrimLeft(v, " \t"))]
			return lead + "<" + names[i] + ">"
		}
		return v
	})
	return strings.Join(strings.Fields(s), " "), found
}

// idBindings maps the job ids the page shows to those the binary printed at
// the same places.
type idBindings map[string]string

// rewrite replaces the page's bound ids in args with the binary's; an id
// not bound yet (one the page makes up, like an unknown job) stands for
// itself from then on.
func (b idBindings) rewrite(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = docValue.ReplaceAllStringFunc(a, func(v string) string {
			m := docValue.FindStringSubmatch(v)
			if m[docValue.SubexpIndex("id")] == "" {
				return v
			}
			if _, ok := b[v]; !ok {
				b[v] = v
			}
			return b[v]
		})
	}
	return out
}

// compare returns "" when got has the shape of want, line by line, binding
// the ids of want to those of got; else what differs.
func (b idBindings) compare(want, got []string) string {
	for i := 0; i < max(len(want), len(got)); i++ {
		if i >= len(want) {
			return fmt.Sprintf("line %d: the page shows no more lines; the binary printed %q", i+1, got[i])
		}
		if i >= len(got) {
			return fmt.Sprintf("line %d: the page shows %q; the binary printed no more lines", i+1, want[i])
		}
		ws, wids := shape(want[i])
		gs, gids := shape(got[i])
		if ws != gs {
			return fmt.Sprintf("line %d differs:\n  page:   %q\n  binary: %q\n  (shapes %q and %q)", i+1, want[i], got[i], ws, gs)
		}
		for j, w := range wids {
			if bound, ok := b[w]; ok && bound != gids[j] {
				return fmt.Sprintf("line %d: the page's id %s stands for %s, but the binary printed %s", i+1, w, bound, gids[j])
			}
			for k, v := range b {
				if v == gids[j] && k != w {
					return fmt.Sprintf("line %d: the binary's id %s is the page's %s already, not %s", i+1, v, k, w)
				}
			}
			b[w] = gids[j]
		}
	}
	return ""
}

// docSetup makes the state a block of the page assumes and no command of
// the page can make.
func docSetup(t *testing.T, srv *testserver.Server, line int, args []string) {
	t.Helper()
	if len(args) != 3 || args[0] != "dead-jobs" {
		t.Fatalf("docs/cli.md:%d: unknown setup %q; known: dead-jobs QUEUE N", line, args)
	}
	n, err := strconv.Atoi(args[2])
	if err != nil {
		t.Fatalf("docs/cli.md:%d: setup dead-jobs %q: N must be a number", line, args[1:])
	}
	ctx := context.Background()
	c, err := seppclient.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range n {
		if _, err := c.Enqueue(ctx, seppclient.EnqueueRequest{Queue: args[1], JobType: "receipt", IdempotencyKey: seppclient.Key(fmt.Sprint("receipt-order-", i))}); err != nil {
			t.Fatal(err)
		}
		r, err := c.Reserve(ctx, seppclient.ReserveRequest{Queues: []string{args[1]}})
		if err != nil || len(r) != 1 {
			t.Fatalf("setup dead-jobs: reserve: %v %v", r, err)
		}
		if _, err := c.Fail(ctx, r[0].Job.ID, r[0].LeaseToken, "smtp: 550 mailbox unavailable", seppclient.FailOptions{Permanent: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShellWords: the command lines of docs/cli.md split as a shell splits
// them.
func TestShellWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`sepp queues`, []string{"sepp", "queues"}},
		{`sepp enqueue --payload '{"order":"8a3f"}'  --key k`, []string{"sepp", "enqueue", "--payload", `{"order":"8a3f"}`, "--key", "k"}},
		{`sepp x "a \"b\" c" d'e f'`, []string{"sepp", "x", `a "b" c`, "de f"}},
	} {
		got, err := shellWords(tc.in)
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("shellWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
