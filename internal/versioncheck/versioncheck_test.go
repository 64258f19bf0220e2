package versioncheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// root is the repository root, seen from this package's folder.
var root = filepath.Join("..", "..")

// changelog is the file whose newest released section names the version.
const changelog = "CHANGELOG.md"

// statement is one place that states a version of Sepp's own packages.
type statement struct {
	where   string // file, and the field or line in it
	version string
}

// TestOneVersion fails for every manifest, lockfile entry or source
// constant whose version of a Sepp package differs from the newest release
// in CHANGELOG.md, and, when SEPP_RELEASE_VERSION is set (release/build.sh
// sets it), when that release is not the version being built.
func TestOneVersion(t *testing.T) {
	want := newestRelease(t)
	if v := os.Getenv("SEPP_RELEASE_VERSION"); v != "" && strings.TrimPrefix(v, "v") != want {
		t.Errorf("building version %s, but the newest release in %s is %s: bump the manifests and add a ## [%s] section (docs/releasing.md), or build %s",
			v, changelog, want, strings.TrimPrefix(v, "v"), "v"+want)
	}
	stated := manifestVersions(t)
	stated = append(stated, sourceVersions(t)...)
	if !hasStatement(stated, "clients/python/src/sepp/__init__.py", "__version__") {
		t.Errorf("clients/python/src/sepp/__init__.py: no __version__ = \"X.Y.Z\" found; the Python package states its version there")
	}
	for _, s := range stated {
		if s.version != want {
			t.Errorf("%s says %s, but the newest release in %s is %s: every client manifest, lockfile and version constant says the one version (docs/releasing.md)",
				s.where, s.version, changelog, want)
		}
	}
	t.Logf("checked %d statements of a version against %s", len(stated), want)
}

// TestOneLicence fails when a manifest names a licence other than
// Apache-2.0, or when a client's copy of LICENSE (packagers take it from
// the package's own folder, and npm pack skips a symlink) is not the
// repository's LICENSE.
func TestOneLicence(t *testing.T) {
	const want = "Apache-2.0"
	licence := read(t, "LICENSE")
	if !bytes.Contains(licence, []byte("Apache License")) || !bytes.Contains(licence, []byte("Version 2.0, January 2004")) {
		t.Errorf("LICENSE is not the Apache License 2.0")
	}
	for _, dir := range []string{"clients/typescript", "clients/python", "clients/rust"} {
		if copy := read(t, dir+"/LICENSE"); !bytes.Equal(copy, licence) {
			t.Errorf("%s/LICENSE differs from LICENSE: copy it again (cp LICENSE %s/)", dir, dir)
		}
	}
	for _, f := range []string{"clients/typescript/package.json", "dashboard/package.json"} {
		var pkg struct{ License string }
		decodeJSON(t, f, &pkg)
		if pkg.License != want {
			t.Errorf("%s: \"license\" is %q, want %q", f, pkg.License, want)
		}
	}
	var py struct {
		Project struct{ License struct{ Text string } }
	}
	decodeTOML(t, "clients/python/pyproject.toml", &py)
	if py.Project.License.Text != want {
		t.Errorf("clients/python/pyproject.toml: project.license is %q, want {text = %q}", py.Project.License.Text, want)
	}
	var cargo struct {
		Package struct{ License string }
	}
	decodeTOML(t, "clients/rust/Cargo.toml", &cargo)
	if cargo.Package.License != want {
		t.Errorf("clients/rust/Cargo.toml: package.license is %q, want %q", cargo.Package.License, want)
	}
}

// releaseHeading is a released section of a Keep a Changelog file:
// "## [0.1.0] - 2026-12-03". "## [Unreleased]" has no date.
var releaseHeading = regexp.MustCompile(`^## \[([^\]]+)\] - \d{4}-\d{2}-\d{2}\b`)

// newestRelease is the version of the first released section of
// CHANGELOG.md (the newest comes first).
func newestRelease(t *testing.T) string {
	sc := bufio.NewScanner(bytes.NewReader(read(t, changelog)))
	for n := 1; sc.Scan(); n++ {
		if m := releaseHeading.FindStringSubmatch(sc.Text()); m != nil {
			if !semver.MatchString(m[1]) {
				t.Fatalf("%s:%d: %q is not a version X.Y.Z", changelog, n, m[1])
			}
			return m[1]
		}
	}
	t.Fatalf("%s has no released section (## [X.Y.Z] - YYYY-MM-DD)", changelog)
	return ""
}

// semver is X.Y.Z with an optional pre-release (0.2.0-rc.1).
var semver = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// manifestVersions reads the version of Sepp's packages from every
// manifest and lockfile: the TypeScript client, the dashboard (which is
// built into the server) and its lock's entry for the client it links, the
// Python client, and the Rust crate with its Cargo.lock entry.
func manifestVersions(t *testing.T) []statement {
	var out []statement
	for _, f := range []string{"clients/typescript/package.json", "dashboard/package.json"} {
		var pkg struct{ Version string }
		decodeJSON(t, f, &pkg)
		out = append(out, statement{f + ": \"version\"", pkg.Version})
	}
	// The lockfiles' entries of Sepp's packages: the root package ("") and
	// the client the dashboard links.
	locks := []struct {
		file    string
		entries []string
	}{
		{"clients/typescript/package-lock.json", []string{""}},
		{"dashboard/package-lock.json", []string{"", "../clients/typescript"}},
	}
	for _, l := range locks {
		f := l.file
		var lock struct {
			Version  string
			Packages map[string]struct{ Version string }
		}
		decodeJSON(t, f, &lock)
		out = append(out, statement{f + ": \"version\"", lock.Version})
		for _, e := range l.entries {
			p, ok := lock.Packages[e]
			if !ok {
				t.Errorf("%s: no \"packages\" entry %q: run npm install --package-lock-only", f, e)
				continue
			}
			out = append(out, statement{fmt.Sprintf("%s: packages[%q].version", f, e), p.Version})
		}
	}
	var py struct{ Project struct{ Version string } }
	decodeTOML(t, "clients/python/pyproject.toml", &py)
	out = append(out, statement{"clients/python/pyproject.toml: project.version", py.Project.Version})
	var cargo struct{ Package struct{ Version string } }
	decodeTOML(t, "clients/rust/Cargo.toml", &cargo)
	out = append(out, statement{"clients/rust/Cargo.toml: package.version", cargo.Package.Version})
	var cargoLock struct {
		Package []struct{ Name, Version string }
	}
	decodeTOML(t, "clients/rust/Cargo.lock", &cargoLock)
	found := 0
	for _, p := range cargoLock.Package {
		if p.Name == "sepp-rs" {
			found++
			out = append(out, statement{"clients/rust/Cargo.lock: package sepp-rs", p.Version})
		}
	}
	if found != 1 {
		t.Errorf("clients/rust/Cargo.lock: %d entries for sepp-rs, want 1: run cargo update -p sepp-rs --offline", found)
	}
	return out
}

// versionConstant is a name with "version" in it given a literal X.Y.Z:
// __version__ = "0.1.0", export const VERSION = "0.1.0",
// pub const VERSION: &str = "0.1.0".
var versionConstant = regexp.MustCompile(`(?i)\b(\w*version\w*)\s*(?::\s*[&'\w]+\s*)?=\s*["'](\d+\.\d+\.\d+[^"']*)["']`)

// sourceVersions finds the version constants in the clients' sources
// (generated code aside).
func sourceVersions(t *testing.T) []statement {
	var out []statement
	exts := map[string]bool{".py": true, ".ts": true, ".mts": true, ".js": true, ".mjs": true, ".rs": true}
	for _, dir := range []string{"clients/python/src", "clients/typescript/src", "clients/rust/src"} {
		err := filepath.WalkDir(filepath.Join(root, filepath.FromSlash(dir)), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "gen" || d.Name() == "__pycache__") {
				return fs.SkipDir
			}
			if d.IsDir() || !exts[filepath.Ext(p)] {
				return nil
			}
			text, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			for n, line := range strings.Split(string(text), "\n") {
				if m := versionConstant.FindStringSubmatch(line); m != nil {
					out = append(out, statement{fmt.Sprintf("%s:%d: %s", filepath.ToSlash(rel), n+1, m[1]), m[2]})
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func hasStatement(stated []statement, file, name string) bool {
	for _, s := range stated {
		if strings.HasPrefix(s.where, file+":") && strings.HasSuffix(s.where, ": "+name) {
			return true
		}
	}
	return false
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path.Clean(name))))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeJSON(t *testing.T, name string, v any) {
	t.Helper()
	if err := json.Unmarshal(read(t, name), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func decodeTOML(t *testing.T, name string, v any) {
	t.Helper()
	if err := toml.Unmarshal(read(t, name), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
