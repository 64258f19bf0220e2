#!/bin/sh
# The one build command of the container image: the Dockerfile runs it in
# its builder stage and deploy/check.sh runs it in CI, so both build the
# binary the same way. A static binary (CGO_ENABLED=0), without paths of the
# build machine (-trimpath) or debug symbols (-s -w), with its version set
# (sepp version prints it). release/build.sh runs it too, once per platform:
# GOOS and GOARCH come from the environment, as for any go build, so the flags
# live here only.
#
#   sh deploy/build.sh OUT [VERSION]     run from the repository root
#   GOOS=darwin GOARCH=arm64 sh deploy/build.sh OUT [VERSION]
set -eu
out="${1:?usage: deploy/build.sh OUT [VERSION]}"
version="${2:-dev}"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$out" ./cmd/sepp
