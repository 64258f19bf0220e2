#!/usr/bin/env bash
# CI for the dashboard (dashboard/), runnable from any cwd on a fresh Debian
# machine of this project's kind: installs what is missing (Node 20+,
# Chromium), builds the TypeScript client it depends on (file:../clients/
# typescript) if it is not built, installs from the lockfile, rebuilds the
# assets that `sepp serve` embeds (internal/server/ui/dist) and fails if they
# differ from the committed ones, then runs the Playwright test against a
# real `sepp serve` ($SEPP_BIN, or one built here with go).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
dist="internal/server/ui/dist"
cd "$here"

apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "dashboard/ci.sh: installing ${missing[*]}"
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
[ -x /usr/bin/chromium ] || apt_install chromium

# The client is a file: dependency, used from its dist/ (its own ci.sh, run
# before this one in .ci/run, builds it; a lone run builds it here).
client="$repo/clients/typescript"
if [ ! -f "$client/dist/browser.js" ] || [ ! -d "$client/node_modules" ]; then
  (cd "$client" && npm ci --no-audit --no-fund && npx tsc -p tsconfig.json)
fi

npm ci --no-audit --no-fund

# The committed assets must be what the sources build.
npm run --silent build
if [ -d "$repo/.git" ] || git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
  if ! git -C "$repo" diff --exit-code --stat -- "$dist" || [ -n "$(git -C "$repo" status --porcelain -- "$dist")" ]; then
    echo "dashboard/ci.sh: $dist differs from what dashboard/ builds: run 'cd dashboard && npm run build' and commit it" >&2
    git -C "$repo" status --porcelain -- "$dist" >&2
    exit 1
  fi
fi

if [ -z "${SEPP_BIN:-}" ]; then
  tmp="$(mktemp -d)"
  echo "dashboard/ci.sh: SEPP_BIN unset; building sepp into $tmp"
  (cd "$repo" && go build -o "$tmp/sepp" ./cmd/sepp)
  export SEPP_BIN="$tmp/sepp"
fi
npm test
