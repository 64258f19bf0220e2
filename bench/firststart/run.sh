#!/usr/bin/env bash
# First start on a fresh clone: clones this repository into a temporary
# directory and times `go run ./cmd/sepp serve` there, with an empty Go build
# cache (GOCACHE) but the machine's module cache (GOMODCACHE, "warm"), from
# the command until the server answers its health check. CGO_ENABLED=0 shows
# that no C compiler is involved. Each round is timed twice: with a build
# cache that is empty, and with one that holds only the standard library
# (as on a machine that has built any Go program before).
#
#   bash bench/firststart/run.sh [rounds]
set -euo pipefail
rounds=${1:-3}
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
port=50991
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
git clone -q "$repo" "$work/sepp"
echo "commit $(git -C "$work/sepp" rev-parse --short HEAD), $(go version | cut -d' ' -f3), nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
for mode in empty std; do
	rm -rf "$work/cache" "$work/data"
	if [ "$mode" = std ]; then
		GOCACHE="$work/cache" CGO_ENABLED=0 go build std
	fi
	start=$(date +%s.%N)
	(cd "$work/sepp" && GOCACHE="$work/cache" CGO_ENABLED=0 SEPP_LISTEN="127.0.0.1:$port" SEPP_STORAGE_PATH="$work/data" \
		exec go run ./cmd/sepp serve >"$work/serve.log" 2>&1) &
	pid=$!
	until curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' -d '{}' \
		"http://127.0.0.1:$port/grpc.health.v1.Health/Check"; do
		if ! kill -0 "$pid" 2>/dev/null; then cat "$work/serve.log"; exit 1; fi
		sleep 0.2
	done
	end=$(date +%s.%N)
	printf 'round %d: answered after %.1f s (build cache: %s)\n' "$r" "$(echo "$end - $start" | bc)" "$mode"
	pkill -TERM -P "$pid" || true
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	sleep 1
done
done
