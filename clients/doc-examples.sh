#!/usr/bin/env bash
# The idempotency page's three examples (Rust, Python, TypeScript), run as
# written against one fresh `sepp serve` on localhost:50051, the address they
# name. The first run of the key prints "enqueued <id>"; every later run, in
# any language, prints "already enqueued earlier as <the same id>".
#
# Needs each client built (clients/*/ci.sh does that) and SEPP_BIN, or it
# builds the server. Fails if port 50051 is taken.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap 'kill "${server:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

bin="${SEPP_BIN:-}"
if [ -z "$bin" ]; then
  bin="$work/sepp"
  (cd "$repo" && go build -o "$bin" ./cmd/sepp)
fi
if (exec 3<>/dev/tcp/127.0.0.1/50051) 2>/dev/null; then
  echo "doc-examples: something already listens on 127.0.0.1:50051; stop it first" >&2
  exit 1
fi
SEPP_LISTEN=127.0.0.1:50051 SEPP_STORAGE_PATH="$work/data" "$bin" serve --log-level warn >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do
  (exec 3<>/dev/tcp/127.0.0.1/50051) 2>/dev/null && break
  sleep 0.1
done

cargo_bin="$(command -v cargo || echo /root/.cargo/bin/cargo)"
run() {
  case "$1" in
    python) PYTHONPATH="$repo/clients/python/src" /usr/bin/python3 "$repo/clients/python/examples/idempotency.py" ;;
    rust) (cd "$repo/clients/rust" && "$cargo_bin" run --quiet --locked --example idempotency) ;;
    typescript) (cd "$repo/clients/typescript" && node examples/idempotency.mjs) ;;
  esac
}

first=""
for lang in python rust typescript python rust typescript; do
  out="$(run "$lang")"
  echo "$lang: $out"
  if [ -z "$first" ]; then
    [[ "$out" =~ ^enqueued\ ([0-9a-f-]{36})$ ]] || { echo "doc-examples: first run did not enqueue" >&2; exit 1; }
    first="${BASH_REMATCH[1]}"
  elif [ "$out" != "already enqueued earlier as $first" ]; then
    echo "doc-examples: $lang did not see the job $first" >&2
    exit 1
  fi
done
echo "doc-examples: one job, $first, seen by all three languages"
