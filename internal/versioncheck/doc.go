// Package versioncheck holds the release check that go test ./... runs: the
// server, the Go SDK and the three clients are released together under one
// version and one licence. It has no code of its own; the check is its test.
//
// The one version is the newest released section of CHANGELOG.md
// (## [X.Y.Z] - YYYY-MM-DD). Every version a client or dashboard manifest,
// lockfile or source file states for Sepp's own packages must equal it. The
// server and the Go SDK state none: the tag vX.Y.Z is their version, and
// release/build.sh stamps it into the binary. release/build.sh runs this
// test with SEPP_RELEASE_VERSION set to the version it builds, so a release
// whose manifests say another version is refused (docs/releasing.md).
package versioncheck
