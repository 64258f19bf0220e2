package doccheck

import (
	"bufio"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestRelativeLinksExist fails, with file:line, on every relative link in a
// Markdown file of the repository whose target does not exist. Web links
// (any URL with a scheme: http, https, mailto, ...) and links to an anchor of
// the same page are not checked; a #fragment is dropped before the target is
// looked up, so only the file is checked, not the heading.
func TestRelativeLinksExist(t *testing.T) {
	root := repoRoot(t)
	files := markdownFiles(t, root)
	if !slices.Contains(files, "README.md") {
		t.Fatalf("found no README.md under %s: is this the repository root?", root)
	}
	checked := 0
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(text)) {
			target, ok := localTarget(f, l.target)
			if !ok {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
				t.Errorf("%s:%d: link to %s: %s does not exist", f, l.line, l.target, target)
			}
		}
	}
	t.Logf("checked %d relative links in %d Markdown files", checked, len(files))
}

// repoRoot is the folder of the go.mod above this package.
func repoRoot(t *testing.T) string {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// skipped are folders whose Markdown is not the repository's own: installed
// dependencies and build output of the clients in other languages.
var skipped = []string{"node_modules", "target"}

// markdownFiles lists the repository's *.md files, slash-separated and
// relative to root: the files git tracks (what CI checks out), or, outside a
// git checkout, every file under root but hidden folders and testdata.
func markdownFiles(t *testing.T, root string) []string {
	var files []string
	keep := func(rel string) {
		for _, part := range strings.Split(path.Dir(rel), "/") {
			if slices.Contains(skipped, part) {
				return
			}
		}
		files = append(files, rel)
	}
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--", "*.md")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		for _, rel := range strings.Split(string(out), "\x00") {
			if rel != "" {
				keep(rel)
			}
		}
		return files
	}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || slices.Contains(skipped, name)) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			keep(filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

type link struct {
	line   int
	target string
}

var (
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")
	// codeSpan is inline code, which holds no links.
	codeSpan = regexp.MustCompile("(`+)[^`]*?(`+)")
	// inline is the target of [text](target) and ![alt](target), with an
	// optional "title" after it.
	inline = regexp.MustCompile(`\]\(\s*(<[^>\n]*>|[^)\s]+)`)
	// reference is a link reference definition: [label]: target.
	reference = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>\n]*>|\S+)`)
)

// links returns the targets of the inline links, images and link reference
// definitions of a Markdown text, outside code, with their lines.
func links(text string) []link {
	var out []link
	var open string // the fence of the code block we are in, if any
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case open == "":
				open = m[1]
			case m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(line) == m[1]:
				open = ""
			}
			continue
		}
		if open != "" {
			continue
		}
		line = stripCode(line)
		for _, m := range inline.FindAllStringSubmatch(line, -1) {
			out = append(out, link{n, strings.Trim(m[1], "<>")})
		}
		if m := reference.FindStringSubmatch(line); m != nil {
			out = append(out, link{n, strings.Trim(m[1], "<>")})
		}
	}
	return out
}

// stripCode blanks the code spans of a line, each opened and closed by a
// run of backticks of the same length.
func stripCode(line string) string {
	return codeSpan.ReplaceAllStringFunc(line, func(s string) string {
		m := codeSpan.FindStringSubmatch(s)
		if len(m[1]) != len(m[2]) {
			return s
		}
		return "code"
	})
}

var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// localTarget resolves a link found in file (slash-separated, relative to
// the repository root) to the path it names, relative to the root. It
// reports false for links that name no file of the repository: web links and
// anchors in the same page.
func localTarget(file, target string) (string, bool) {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "", false
	}
	target, _, _ = strings.Cut(target, "#")
	target, _, _ = strings.Cut(target, "?")
	if target == "" {
		return "", false
	}
	if t, err := url.PathUnescape(target); err == nil {
		target = t
	}
	if strings.HasPrefix(target, "/") { // GitHub reads these from the repository root
		return path.Clean(strings.TrimPrefix(target, "/")), true
	}
	return path.Join(path.Dir(file), target), true
}

func TestLinks(t *testing.T) {
	text := strings.Join([]string{
		"See [Errors](errors.md#in-go) and ![plot](benchmarks-suite.png \"the plot\").",
		"`[not](a-link.md)` but [`code` text](../bench/rpcceiling/main.go).",
		"```go",
		"m[k](x.md)",
		"```",
		"[ref]: <scaling.md>",
		"[web](https://example.com/x.md), [mail](mailto:a@example.com), [top](#top)",
	}, "\n")
	want := []link{
		{1, "errors.md#in-go"}, {1, "benchmarks-suite.png"},
		{2, "../bench/rpcceiling/main.go"},
		{6, "scaling.md"},
		{7, "https://example.com/x.md"}, {7, "mailto:a@example.com"}, {7, "#top"},
	}
	if got := links(text); !slices.Equal(got, want) {
		t.Errorf("links:\n got %v\nwant %v", got, want)
	}
}

func TestLocalTarget(t *testing.T) {
	for _, c := range []struct {
		file, target, want string
		ok                 bool
	}{
		{"docs/workers.md", "lifecycle.md#failing-a-job-retries-and-backoff", "docs/lifecycle.md", true},
		{"docs/benchmarks.md", "../bench/rpcceiling/main.go", "bench/rpcceiling/main.go", true},
		{"README.md", "docs/workers.md", "docs/workers.md", true},
		{"README.md", "/docs/my%20page.md", "docs/my page.md", true},
		{"docs/errors.md", "#in-go", "", false},
		{"docs/errors.md", "https://connectrpc.com/docs", "", false},
		{"docs/errors.md", "mailto:ops@example.com", "", false},
	} {
		got, ok := localTarget(c.file, c.target)
		if got != c.want || ok != c.ok {
			t.Errorf("localTarget(%q, %q) = %q, %v; want %q, %v", c.file, c.target, got, ok, c.want, c.ok)
		}
	}
}
