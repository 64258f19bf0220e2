package doccheck

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// architecturePage is the page whose folder table must name every Go file.
const architecturePage = "docs/architecture.md"

// notDescribed are folders whose Go files the folder table need not name:
// gen/ is generated from proto/ and never read by hand, and folders with a
// go.mod of their own (bench/, tools/) are other modules, described by their
// row as a whole.
var notDescribed = []string{"gen"}

// TestFolderTableNamesEveryGoFile fails for every non-test .go file of the
// main module that the folder table of docs/architecture.md does not name.
// A file belongs to the row of its own folder, or else of the nearest
// parent folder the table has a row for (the repository root's row, package
// sepp, holds only the files at the root: a new folder needs a row of its
// own), and must be named there by its base name (`auth.go`). It also fails for a .go file a row names that
// exists nowhere under the row's folder, so a renamed or removed file does
// not stay described.
//
// The files are those present under the repository root (tracked or not:
// a file being added is checked before its commit), but tests, gen/,
// folders that are modules of their own (a go.mod: bench/, tools/), hidden
// folders, testdata, node_modules and target. The fault campaign under
// test/faults/ is included: it is part of the main module, go test ./...
// builds it and CI runs it.
func TestFolderTableNamesEveryGoFile(t *testing.T) {
	root := repoRoot(t)
	rows := folderTable(t, root)
	files := goFiles(t, root)
	if len(files) == 0 {
		t.Fatalf("found no Go files under %s", root)
	}
	for _, f := range files {
		dir, base := path.Split(f)
		dir = strings.TrimSuffix(dir, "/")
		r := rowFor(rows, dir)
		if r == nil {
			t.Errorf("%s is in no row of the folder table of %s: add a row for `%s/` that says what %s holds",
				f, architecturePage, dir, base)
			continue
		}
		if !names(r.text, base) {
			or := ""
			if r.folder != dir {
				or = fmt.Sprintf(", or a row of its own for `%s/`", dir)
			}
			t.Errorf("%s is not named in the folder table of %s: add `%s` to the row of %s (line %d)%s, saying what it holds",
				f, architecturePage, base, r.label(), r.line, or)
		}
	}
	for _, r := range rows {
		for _, name := range goNames(r.text) {
			if !existsUnder(root, r.folder, name) {
				t.Errorf("%s:%d: the row of %s names %s, which is not under %s: remove it from the row, or fix the name",
					architecturePage, r.line, r.label(), name, r.label())
			}
		}
	}
	t.Logf("checked %d Go files against %d rows of the folder table", len(files), len(rows))
}

// row is one row of the folder table.
type row struct {
	line   int
	folder string // slash-separated, no trailing slash; "" is the repository root
	text   string // the row's second cell: what the folder owns
}

func (r *row) label() string {
	if r.folder == "" {
		return "the repository root"
	}
	return "`" + r.folder + "/`"
}

var firstCode = regexp.MustCompile("`([^`]+)`")

// folderTable reads the rows of the `| folder | owns |` table. A row's
// folder is the first code span of its first cell (`internal/server/`), or
// the repository root when that cell starts with "repository root".
func folderTable(t *testing.T, root string) []row {
	text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(architecturePage)))
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(text)))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !in {
			in = strings.ReplaceAll(line, " ", "") == "|folder|owns|"
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.SplitN(strings.Trim(line, "|"), "|", 2)
		if len(cells) < 2 || strings.Trim(cells[0], " -") == "" {
			continue // the delimiter row
		}
		first := strings.TrimSpace(cells[0])
		folder := ""
		if !strings.HasPrefix(first, "repository root") {
			m := firstCode.FindStringSubmatch(first)
			if m == nil {
				t.Fatalf("%s:%d: the folder table's first cell %q names no folder in backticks", architecturePage, n, first)
			}
			folder = strings.Trim(path.Clean(m[1]), "/")
		}
		rows = append(rows, row{line: n, folder: folder, text: cells[1]})
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no `| folder | owns |` table", architecturePage)
	}
	return rows
}

// rowFor is the row of dir, or of its nearest parent that has one, but the
// root's: the root's row describes package sepp, not the folders under it.
func rowFor(rows []row, dir string) *row {
	for d := dir; ; d = path.Dir(d) {
		if d == "." {
			d = ""
		}
		if d == "" && dir != "" {
			return nil
		}
		for i := range rows {
			if rows[i].folder == d {
				return &rows[i]
			}
		}
		if d == "" {
			return nil
		}
	}
}

// goName is a Go file name as a row writes it, alone or at the end of a
// path: `auth.go`, `cmd/sepp/faults_on.go`.
var goName = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.go\b`)

// names reports whether text names the file base: base appears, not as the
// tail of a longer name (`on.go` is not named by `faults_on.go`).
func names(text, base string) bool {
	for _, m := range goName.FindAllString(text, -1) {
		if m == base || strings.HasSuffix(m, "/"+base) {
			return true
		}
	}
	return false
}

// goNames lists the .go names a row's text holds, once each.
func goNames(text string) []string {
	var out []string
	for _, m := range goName.FindAllString(text, -1) {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// existsUnder reports whether the name a row of folder gives is a file: a
// path relative to the folder or to the root, or a base name found anywhere
// under the folder.
func existsUnder(root, folder, name string) bool {
	for _, p := range []string{path.Join(folder, name), name} {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err == nil {
			return true
		}
	}
	if strings.Contains(name, "/") {
		return false
	}
	found := false
	filepath.WalkDir(filepath.Join(root, filepath.FromSlash(folder)), func(p string, d os.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipAll
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "target" || strings.HasPrefix(d.Name(), ".") && p != root) {
			return filepath.SkipDir
		}
		found = !d.IsDir() && d.Name() == name
		return nil
	})
	return found
}

// goFiles lists the non-test .go files of the main module present under
// root, slash-separated and relative to it.
func goFiles(t *testing.T, root string) []string {
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if p == root {
				return nil
			}
			if strings.HasPrefix(name, ".") || name == "testdata" || slices.Contains(skipped, name) || slices.Contains(notDescribed, rel) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestNames(t *testing.T) {
	text := "`server.go`: `New`; `cmd/sepp/faults_on.go` (hooks), `ui/ui.go` and config.go."
	for _, c := range []struct {
		base string
		want bool
	}{
		{"server.go", true}, {"faults_on.go", true}, {"ui.go", true}, {"config.go", true},
		{"on.go", false}, {"faults.go", false}, {"go.go", false}, {"i.go", false},
	} {
		if got := names(text, c.base); got != c.want {
			t.Errorf("names(%q) = %v, want %v", c.base, got, c.want)
		}
	}
	if got, want := fmt.Sprint(goNames(text)), "[server.go cmd/sepp/faults_on.go ui/ui.go config.go]"; got != want {
		t.Errorf("goNames = %s, want %s", got, want)
	}
}
