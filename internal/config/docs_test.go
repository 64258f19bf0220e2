package config

import (
	"bufio"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// configurationPage is the user documentation of every key.
const configurationPage = "../../docs/configuration.md"

// TestDocumentedKeys keeps docs/configuration.md and the schema (specs, the
// one list of keys) in step: every section has a heading of its own
// ("## `[server]`", "### `[[queues.rules]]`"), every key is a row of the
// table under its section's heading, and every row of those tables is a key
// of the schema.
func TestDocumentedKeys(t *testing.T) {
	documented := documentedKeys(t)
	for _, s := range specs {
		if s.kind == kindTable || s.kind == kindTableArray {
			h := sectionHeading(s.sectionPath())
			if _, ok := documented[h]; !ok {
				t.Errorf("docs/configuration.md has no heading for %s: add one, \"## `%s`\" (or ### under its parent's), with a table of its keys", h, h)
			}
			continue
		}
		parent, name := splitPath(s.path)
		h := sectionHeading(parent)
		if !slices.Contains(documented[h], name) {
			t.Errorf("docs/configuration.md does not document %s: add a row | `%s` | type | default | what it does | to the table under `%s` (%s)", s.path, name, h, s.about)
		}
	}
	headings := slices.Sorted(maps.Keys(documented))
	for _, h := range headings {
		for _, name := range documented[h] {
			if !sectionHasKey(h, name) {
				t.Errorf("docs/configuration.md documents `%s` under `%s`, a key the schema (schema.go) does not have: remove the row, or add the key to specs", name, h)
			}
		}
	}
}

// sectionHeading is how the page names a section path: "[server]",
// "[[queues]]", "[[queues.rules]]", "[webhooks.signature]".
func sectionHeading(p string) string {
	if strings.HasSuffix(p, "[]") {
		return "[[" + strings.ReplaceAll(strings.TrimSuffix(p, "[]"), "[]", "") + "]]"
	}
	return "[" + strings.ReplaceAll(p, "[]", "") + "]"
}

// sectionHasKey reports whether the section the page calls heading has the
// key name in specs.
func sectionHasKey(heading, name string) bool {
	for _, s := range specs {
		if s.kind == kindTable || s.kind == kindTableArray {
			continue
		}
		if parent, n := splitPath(s.path); n == name && sectionHeading(parent) == heading {
			return true
		}
	}
	return false
}

var (
	// sectionTitle is a heading that names a section: ## `[server]`.
	sectionTitle = regexp.MustCompile("^#{2,4} `(\\[\\[?[a-z0-9_.]+\\]\\]?)`\\s*$")
	// keyRow is a table row whose first cell is a key: | `listen` | ...
	keyRow = regexp.MustCompile("^\\| `([a-z0-9_]+)` \\|")
)

// documentedKeys maps each section heading of the page to the keys of the
// table rows under it, up to the next heading.
func documentedKeys(t *testing.T) map[string][]string {
	f, err := os.Open(filepath.FromSlash(configurationPage))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if strings.HasPrefix(line, "#") {
			section = ""
			if m := sectionTitle.FindStringSubmatch(line); m != nil {
				section = m[1]
				if _, ok := out[section]; !ok {
					out[section] = nil
				}
			}
			continue
		}
		if m := keyRow.FindStringSubmatch(line); m != nil && section != "" {
			out[section] = append(out[section], m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no section headings like ## `[server]`", configurationPage)
	}
	return out
}

func TestSectionHeading(t *testing.T) {
	for p, want := range map[string]string{
		"server":               "[server]",
		"queues[]":             "[[queues]]",
		"queues[].rules[]":     "[[queues.rules]]",
		"auth.tokens[]":        "[[auth.tokens]]",
		"webhooks[].signature": "[webhooks.signature]",
	} {
		if got := sectionHeading(p); got != want {
			t.Errorf("sectionHeading(%q) = %q, want %q", p, got, want)
		}
	}
}
