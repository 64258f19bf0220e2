package main

import (
	"runtime/debug"
	"testing"
)

func TestResolveVersion(t *testing.T) {
	t.Parallel()
	vcs := func(main string, rev string, modified string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/sepp-dev/sepp", Version: main}}
		if rev != "" {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: "vcs.revision", Value: rev})
		}
		if modified != "" {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return info
	}
	const rev = "2453c8d1f0e9a8b7c6d5e4f3a2b1c0d9e8f7a6b5"
	for _, tc := range []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{"a release build's -X stamp wins", "v0.1.0", vcs("v0.0.0-20261203142216-2453c8d1f0e9", rev, "false"), "v0.1.0"},
		{"deploy/check.sh's stamp", "check", nil, "check"},
		{"go build of a tagged commit", "dev", vcs("v0.1.0", rev, "false"), "v0.1.0"},
		{"a tagged pre-release", "dev", vcs("v0.2.0-rc.1", rev, "false"), "v0.2.0-rc.1"},
		{"an untagged commit", "dev", vcs("v0.0.0-20261203142216-2453c8d1f0e9", rev, "false"), "dev-2453c8d1f0e9"},
		{"a commit after a tag", "dev", vcs("v0.1.1-0.20261203142216-2453c8d1f0e9", rev, "false"), "dev-2453c8d1f0e9"},
		{"after a pre-release tag", "dev", vcs("v0.2.0-rc.1.0.20261203142216-2453c8d1f0e9", rev, "false"), "dev-2453c8d1f0e9"},
		{"uncommitted changes", "dev", vcs("v0.1.0+dirty", rev, "true"), "dev-2453c8d1f0e9-modified"},
		{"go run: no vcs stamp", "dev", vcs("(devel)", "", ""), "dev"},
		{"no build info", "dev", nil, "dev"},
	} {
		if got := resolveVersion(tc.stamped, tc.info); got != tc.want {
			t.Errorf("%s: resolveVersion(%q, ...) = %q, want %q", tc.name, tc.stamped, got, tc.want)
		}
	}
}
