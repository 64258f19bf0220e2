#!/usr/bin/env bash
# Runs the exactly-once example as real processes: builds sepp and the
# example's programs (the app, the worker, the mail sink and the chaos
# driver), then runs the driver, which starts them, sends the orders, kills
# processes at random, and prints the counts; it exits 1 unless each is one
# per order. Flags go to the driver (-orders, -chaos, -seed, -keep, -v).
#
#   bash examples/exactly-once/run.sh
#   SEPP_BIN=/path/to/sepp bash examples/exactly-once/run.sh -orders 500 -chaos 40s
#
# PostgreSQL: SEPP_TEST_POSTGRES_URL (default
# postgres://root@127.0.0.1:5432/test?sslmode=disable); the run creates a
# database of its own there and drops it at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
if [ -n "${SEPP_BIN:-}" ]; then
  cp "$SEPP_BIN" "$bin/sepp"
else
  go build -o "$bin/sepp" ./cmd/sepp
fi
go build -o "$bin/" ./examples/exactly-once/app ./examples/exactly-once/worker \
  ./examples/exactly-once/mailsink ./examples/exactly-once/chaos
"$bin/chaos" -bin "$bin" "$@"
