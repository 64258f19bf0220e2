#!/usr/bin/env bash
# CI for the Python client: installs what a fresh Debian machine lacks (the
# Debian packages the client and its tests use, for /usr/bin/python3) and runs
# every test against a real `sepp serve` the tests start themselves.
#
#   bash clients/python/ci.sh          # from any directory
#
# SEPP_BIN names the server binary; when unset, it is built from this
# repository (go build ./cmd/sepp) once, into a temporary directory.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
PY=/usr/bin/python3   # Debian's packages are installed for this interpreter

need=()
for pkg in python3 python3-httpx python3-pytest python3-pytest-asyncio util-linux iproute2 openssl; do
  if ! dpkg -s "$pkg" >/dev/null 2>&1; then
    need+=("$pkg")
  fi
done
if ((${#need[@]})); then
  echo "ci.sh: installing ${need[*]}"
  if [[ $(id -u) -eq 0 ]]; then sudo=(); else sudo=(sudo); fi
  # Another installer may hold the dpkg lock for a while.
  for _ in $(seq 1 60); do
    if "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"; then
      break
    fi
    echo "ci.sh: apt-get install failed (lock busy?); retrying in 5 s"
    sleep 5
  done
  for pkg in "${need[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || { echo "ci.sh: $pkg did not install" >&2; exit 1; }; done
fi

if [[ -z "${SEPP_BIN:-}" ]]; then
  bindir="$(mktemp -d)"
  trap 'rm -rf "$bindir"' EXIT
  echo "ci.sh: SEPP_BIN unset: building the server (go build ./cmd/sepp)"
  (cd "$repo" && go build -o "$bindir/sepp" ./cmd/sepp)
  export SEPP_BIN="$bindir/sepp"
fi

cd "$here"
export PYTHONDONTWRITEBYTECODE=1
"$PY" --version
"$PY" -c 'import httpx; print("httpx", httpx.__version__)'
exec "$PY" -m pytest -p no:cacheprovider -q tests
