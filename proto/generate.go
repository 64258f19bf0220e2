// Package proto holds Sepp's API definition. Generated Go lives in gen/ and is
// committed; `go generate ./proto` rebuilds it with the tool versions pinned in
// tools/go.mod.
package proto

//go:generate env GOWORK=off go tool -modfile=../tools/go.mod buf generate
