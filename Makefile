# Every target is a plain go command; read them to run them by hand.

.PHONY: generate lint test race bench ci release ci-full

## generate: rebuild gen/ from proto/ with the tool versions pinned in tools/go.mod
generate:
	go generate ./proto

## lint: gofmt, go vet and buf lint
lint:
	test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))"
	go vet ./...
	GOWORK=off go tool -modfile=tools/go.mod buf lint proto

## test: the whole suite (the README's test command)
test:
	go test ./...

## race: the race detector on the server, store and SDK (the packages listed in .ci/race-packages)
race:
	go test -race $$(grep -v '^#' .ci/race-packages)

## bench: keyed enqueue throughput, 100k jobs, 32 producers, 256-byte payloads
bench:
	go run ./cmd/sepp bench enqueue -n 100000 -c 32 -payload 256

## release: every release artifact and SHA256SUMS into dist/ (docs/releasing.md);
##          VERSION defaults to the tag of HEAD: make release [VERSION=v0.1.0] [OUT=dir]
release:
	bash release/build.sh "$(VERSION)" "$(OUT)"

## ci: what CI runs (the default tier)
ci:
	bash .ci/run

## ci-full: CI's full tier: longer fault campaigns and fuzzing, every client crash test variant
ci-full:
	SEPP_CI_FULL=1 bash .ci/run
