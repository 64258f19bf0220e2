#!/usr/bin/env bash
# CI for the TypeScript client (clients/typescript), runnable from any cwd on
# a fresh Debian machine of this project's kind: installs what is missing
# (Node 20+ and Chromium from Debian, npm packages from the lockfile),
# checks that the generated code matches proto/, builds, and runs every test
# with `node --test` against real `sepp serve` processes that the tests start.
# SEPP_BIN names the server binary; without it the tests build one with go.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$here"

apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "ci.sh: installing ${missing[*]}"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"; then
      apt-get update
      DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
    fi
  fi
}

node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if ! command -v node >/dev/null || [ "$(node_major)" -lt 20 ] || ! command -v npm >/dev/null; then
  apt_install nodejs npm
fi
if [ "$(node_major)" -lt 20 ]; then
  echo "ci.sh: Node 20 or later is needed, found $(node --version 2>/dev/null || echo none)" >&2
  exit 1
fi
# The browser test drives Debian's Chromium through playwright-core.
[ -x /usr/bin/chromium ] || apt_install chromium

npm ci --no-audit --no-fund

# Generated code must match the protos: generate into a temporary directory
# (buf's -o puts the template's out paths under it) and compare with the
# committed src/gen, so the check needs no git and never touches the tree.
gen_tmp="$(mktemp -d)"
trap 'rm -rf "$gen_tmp"' EXIT
(cd "$repo" && GOWORK=off go tool -modfile=tools/go.mod buf generate --template clients/typescript/buf.gen.yaml -o "$gen_tmp")
if ! diff -r "$gen_tmp/clients/typescript/src/gen" src/gen >"$gen_tmp/diff"; then
  echo "ci.sh: src/gen differs from what ../../proto and ./proto generate; run 'npm run generate' in clients/typescript and commit src/gen:" >&2
  head -50 "$gen_tmp/diff" >&2
  exit 1
fi

# Build the package (dist/) and the tests (build-test/), then run them.
npx tsc -p tsconfig.json
npx tsc -p tsconfig.test.json
if [ -z "${SEPP_BIN:-}" ]; then
  tmp="$(mktemp -d)"
  echo "ci.sh: SEPP_BIN unset; building sepp into $tmp"
  (cd "$repo" && go build -o "$tmp/sepp" ./cmd/sepp)
  export SEPP_BIN="$tmp/sepp"
fi
node --test --test-concurrency=1 build-test/test/*.test.js
