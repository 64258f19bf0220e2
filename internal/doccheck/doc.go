// Package doccheck holds the documentation checks that go test ./... runs:
// every relative link in the repository's Markdown files must name a file or
// folder that exists (links_test.go), and the folder table of
// docs/architecture.md must name every Go file of the module in the row of
// its folder (folders_test.go). It has no code of its own; the checks are its
// tests.
package doccheck
