#!/usr/bin/env bash
# Keyed-enqueue throughput of every client against one server, side by side:
# 100,000 enqueues (unique keys, 256-byte payloads) from 32 concurrent callers
# in one process, per client, in rounds whose order rotates, so no client is
# always first on a fresh store. Prints one line per run and a Markdown table
# of the medians (jobs/s and the ratio to the Go client of the same rounds).
#
#   bash bench/clients/run.sh [-n 100000] [-c 32] [-rounds 3]
#
# Needs the clients built (clients/*/ci.sh, or npm ci + tsc in
# clients/typescript; the Rust example is built here with --release) and
# SEPP_BIN, or it builds the server.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
n=100000 c=32 rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="$2"; shift 2 ;;
    -c) c="$2"; shift 2 ;;
    -rounds) rounds="$2"; shift 2 ;;
    *) echo "usage: $0 [-n N] [-c C] [-rounds R]" >&2; exit 2 ;;
  esac
done
work="$(mktemp -d)"
trap 'kill "${server:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
bin="${SEPP_BIN:-}"
if [ -z "$bin" ]; then
  bin="$work/sepp"
  (cd "$repo" && go build -o "$bin" ./cmd/sepp)
fi
cargo_bin="$(command -v cargo || echo /root/.cargo/bin/cargo)"
(cd "$repo/clients/rust" && "$cargo_bin" build --quiet --locked --release --example bench_enqueue)

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr="http://127.0.0.1:$port"
SEPP_LISTEN="127.0.0.1:$port" SEPP_STORAGE_PATH="$work/data" "$bin" serve --log-level warn >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do
  (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
  sleep 0.1
done

# run CLIENT prints the jobs/s of one run.
run() {
  case "$1" in
    go) "$bin" bench enqueue -addr "$addr" -n "$n" -c "$c" -payload 256 | awk '/^rate:/ {print $2}' ;;
    typescript) (cd "$repo/clients/typescript" && node bench/enqueue.mjs --addr "$addr" -n "$n" -c "$c") |
      /usr/bin/python3 -c 'import json,sys; print(round(json.loads(sys.stdin.read().strip().splitlines()[-1])["jobs_per_sec"]))' ;;
    python) (cd "$repo/clients/python" && PYTHONPATH=src /usr/bin/python3 bench_enqueue.py --addr "$addr" -n "$n" -c "$c") |
      /usr/bin/python3 -c 'import json,sys; print(round(json.loads(sys.stdin.read().strip().splitlines()[-1])["jobs_per_sec"]))' ;;
    rust) "$repo/clients/rust/target/release/examples/bench_enqueue" --addr "$addr" -n "$n" -c "$c" |
      /usr/bin/python3 -c 'import json,sys; print(round(json.loads(sys.stdin.read().strip().splitlines()[-1])["jobs_per_sec"]))' ;;
  esac
}

clients=(go typescript python rust)
results="$work/results"
: >"$results"
echo "machine: $(nproc) cores, $(uname -srm); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  for i in "${!clients[@]}"; do
    cl="${clients[$(( (i + r - 1) % ${#clients[@]} ))]}"
    rate="$(run "$cl")"
    echo "round $r  $cl  $rate jobs/s  (load $(cut -d' ' -f1 /proc/loadavg))"
    echo "$r $cl $rate" >>"$results"
  done
done
/usr/bin/python3 - "$results" "$n" "$c" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r, cl, rate in rows:
    by.setdefault(cl, []).append(float(rate))
go = statistics.median(by["go"])
print()
print(f"| client | runs (jobs/s) | median | vs Go |")
print(f"| --- | --- | ---: | ---: |")
for cl in ["go", "typescript", "python", "rust"]:
    m = statistics.median(by[cl])
    print(f"| {cl} | {', '.join(f'{x:,.0f}' for x in by[cl])} | {m:,.0f} | {m/go:.2f}x |")
PY
