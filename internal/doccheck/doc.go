// Package doccheck holds the documentation check that go test ./... runs:
// every relative link in the repository's Markdown files must name a file or
// folder that exists. It has no code of its own; the check is its test.
package doccheck
