#!/usr/bin/env bash
# CI for the Python client: installs what a fresh Debian machine lacks (the
# Debian packages the client and its tests use, for /usr/bin/python3), checks
# that the committed protobuf modules are what protoc makes of the protos
# now, and runs every test against a real `sepp serve` the tests start
# themselves.
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
# protobuf-compiler is the protoc the generated modules come from;
# python3-protobuf their runtime. python3-psycopg (the outbox writer's
# tests), python3-fastapi and python3-uvicorn (the Idempotency-Key
# middleware's tests) are for the tests only: the client does not import them.
for pkg in python3 python3-httpx python3-protobuf protobuf-compiler python3-pytest python3-pytest-asyncio \
  python3-psycopg python3-fastapi python3-uvicorn util-linux iproute2 openssl; do
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

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# The generated modules are committed, so they must be what generate.sh
# makes of the protos now: regenerate into a scratch folder and compare,
# files added or removed included.
protoc --version
bash "$here/generate.sh" "$scratch/gen"
stale=0
for pkg in sepp/v1 sepp/_rpc; do
  if ! diff -r -x '__init__.py' -x '__pycache__' "$scratch/gen/$pkg" "$here/src/$pkg" >"$scratch/gen.diff"; then
    cat "$scratch/gen.diff"
    stale=1
  fi
done
if ((stale)); then
  echo "ci.sh: src/sepp/v1 or src/sepp/_rpc differs from what the .proto files generate:" \
    "run 'bash clients/python/generate.sh' and commit the result" >&2
  exit 1
fi
echo "ci.sh: the generated modules are up to date"

if [[ -z "${SEPP_BIN:-}" ]]; then
  bindir="$scratch/bin"
  mkdir -p "$bindir"
  echo "ci.sh: SEPP_BIN unset: building the server (go build ./cmd/sepp)"
  (cd "$repo" && go build -o "$bindir/sepp" ./cmd/sepp)
  export SEPP_BIN="$bindir/sepp"
fi

cd "$here"
export PYTHONDONTWRITEBYTECODE=1
"$PY" --version
"$PY" -c 'import httpx; print("httpx", httpx.__version__)'
"$PY" -c 'import google.protobuf as p; from google.protobuf.internal import api_implementation as a; print("protobuf", p.__version__, a.Type())'
"$PY" -c 'import psycopg, fastapi, uvicorn; print("psycopg", psycopg.__version__, "fastapi", fastapi.__version__, "uvicorn", uvicorn.__version__)'
# The outbox tests use PostgreSQL at SEPP_TEST_POSTGRES_URL and fail when it
# cannot be reached; unset, they try postgres://root@127.0.0.1:5432/test and
# skip when nothing answers there.
echo "ci.sh: SEPP_TEST_POSTGRES_URL=${SEPP_TEST_POSTGRES_URL:-(unset)}"
# Not exec: the EXIT trap removes the scratch folder after the tests.
"$PY" -m pytest -p no:cacheprovider -q tests
