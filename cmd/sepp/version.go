package main

import (
	"runtime/debug"
	"strings"
)

func init() { version = resolveVersion(version, readBuildInfo()) }

// readBuildInfo is debug.ReadBuildInfo without the ok: nil when the binary
// carries none.
func readBuildInfo() *debug.BuildInfo {
	if info, ok := debug.ReadBuildInfo(); ok {
		return info
	}
	return nil
}

// resolveVersion is the version the binary reports (sepp version, the start
// log line). A release build stamps it with -ldflags "-X main.version=v0.1.0"
// (release/build.sh, deploy/build.sh) and that stamp wins. Without one, a
// plain go build or go install of a tagged commit gets the tag from Go's own
// stamp of the module version; any other build is "dev" plus the commit it
// was built from, and "-modified" when the tree had uncommitted changes, so
// a bug report always names the source. go run and go test stamp no commit:
// those say just "dev".
func resolveVersion(stamped string, info *debug.BuildInfo) string {
	if stamped != "dev" || info == nil {
		return stamped
	}
	if v := info.Main.Version; isRelease(v) {
		return v
	}
	var rev string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "dev-" + rev
	if modified {
		v += "-modified"
	}
	return v
}

// isRelease reports whether a module version Go stamped is a tag: not
// "(devel)", not a pseudo-version (v0.0.0-20261203142216-abcdef123456, the
// form Go gives an untagged commit) and not a dirty build ("+dirty").
func isRelease(v string) bool {
	if !strings.HasPrefix(v, "v") || strings.Contains(v, "+") {
		return false
	}
	// A pseudo-version ends in -yyyymmddhhmmss-commit (possibly after a
	// pre-release: v0.1.1-0.2026..., v0.1.0-rc.1.0.2026...).
	parts := strings.Split(v, "-")
	if len(parts) >= 3 {
		ts := parts[len(parts)-2]
		if i := strings.LastIndexByte(ts, '.'); i >= 0 {
			ts = ts[i+1:]
		}
		if len(ts) == 14 && strings.Trim(ts, "0123456789") == "" {
			return false
		}
	}
	return true
}
