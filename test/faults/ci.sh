#!/usr/bin/env bash
# The fault campaign as CI runs it (see docs/reliability.md): a short
# campaign on the embedded store and one on three PostgreSQL nodes, each with
# a fixed seed and a fault every few seconds, both of which must find no
# violation; then a deliberately broken build (Complete acknowledged before it
# is written), which the checker must catch.
#
#   sudo bash test/faults/ci.sh                  40 s each, 15 s to settle
#   sudo SEPP_CI_FULL=1 bash test/faults/ci.sh   100 s each, 90 s to settle
#
# SEPP_FAULTS_DURATION and SEPP_FAULTS_SETTLE set either by hand.
#
# Needs root (network namespaces, nftables, a tmpfs mount) and a PostgreSQL
# server it may restart (SEPP_TEST_POSTGRES_URL; pg_ctlcluster). Each run's
# history, checker report, nemesis log and node logs stay in
# $SEPP_FAULTS_OUT (default /tmp/sepp-faults-ci), and the summaries are
# printed here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

out="${SEPP_FAULTS_OUT:-/tmp/sepp-faults-ci}"
if [[ ${SEPP_CI_FULL:-0} == 1 ]]; then
  duration="${SEPP_FAULTS_DURATION:-100s}"
  settle="${SEPP_FAULTS_SETTLE:-90s}"
else
  # Long enough for the nemesis to deal every kind of fault once (a fault
  # every 3 s; eight kinds on PostgreSQL); the short settle leaves jobs
  # undelivered, which the report counts as warnings, not violations.
  duration="${SEPP_FAULTS_DURATION:-40s}"
  settle="${SEPP_FAULTS_SETTLE:-15s}"
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "test/faults/ci.sh: needs root (network namespaces, nftables, tmpfs)" >&2
  exit 1
fi
need=()
for pkg in nftables iproute2; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  echo "ci.sh: installing ${need[*]}"
  for try in $(seq 1 30); do
    if DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"; then break; fi
    # A fresh machine may have no package lists yet; another installer may
    # hold the lock.
    apt-get update -q || true
    echo "ci.sh: apt-get install failed; retrying in 5 s ($try)"
    sleep 5
  done
  for pkg in "${need[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || { echo "ci.sh: $pkg did not install" >&2; exit 1; }; done
fi

# What an earlier run left when it was killed: its tmpfs mounts, then the
# files. (A running campaign holds /run/sepp-faults.lock; the campaigns below
# refuse to start beside it.)
if [[ -d $out ]]; then
  findmnt -R -n -o TARGET "$out" 2>/dev/null | sort -r | xargs -r umount -l || true
fi
rm -rf "$out"
mkdir -p "$out"
go build -tags seppfaults -o "$out/sepp" ./cmd/sepp
go build -o "$out/campaign" ./test/faults/campaign

# PostgreSQL answers again after the campaign's restarts; started if not.
pg_up() {
  for i in $(seq 1 60); do
    pg_isready -h 127.0.0.1 -p 5432 -q && return 0
    if ((i == 20)); then
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start || true
    fi
    sleep 1
  done
  echo "PostgreSQL did not come back" >&2
  return 1
}

echo "== fault campaign: embedded store, $duration (settle at most $settle)"
"$out/campaign" -backend embedded -duration "$duration" -settle "$settle" -seed 1 -fault-every 3s -out "$out/embedded" -sepp "$out/sepp"

echo "== fault campaign: three nodes on PostgreSQL, $duration (settle at most $settle)"
status=0
"$out/campaign" -backend postgres -nodes 3 -duration "$duration" -settle "$settle" -seed 1 -fault-every 3s -out "$out/postgres" -sepp "$out/sepp" || status=$?
pg_up
if [[ $status -ne 0 ]]; then exit "$status"; fi

echo "== the deliberately broken build (ack-before-commit) must be caught"
status=0
# 20 s hold about six kills, each of which leaves completions acknowledged
# but never written: the build fails by hundreds (979 "completed twice" in
# 40 s). The checker needs no settling for that.
"$out/campaign" -backend embedded -duration 20s -settle 5s -seed 1 -faults kill -fault-every 3s \
  -broken ack-before-commit -out "$out/broken" -sepp "$out/sepp" >"$out/broken.log" 2>&1 || status=$?
grep -v '^  - ' "$out/broken.log" | tail -n 25
case $status in
  1) echo "the checker caught the broken build, as it must" ;;
  0) echo "FAIL: the checker found no violation in a build that acknowledges completions before writing them" >&2; exit 1 ;;
  *) echo "FAIL: the broken-build campaign did not run (exit $status); see $out/broken.log" >&2; exit 1 ;;
esac

echo "== kept in $out (history, checker report, nemesis log, node logs of each run):"
for run in embedded postgres broken; do
  h="$out/$run/history.jsonl"
  echo "$run: $(wc -l <"$h") history lines, sha256 $(sha256sum "$h" | cut -c1-64), $h"
done
for run in embedded postgres; do
  echo "-- the faults of the $run run ($out/$run/faults.jsonl):"
  cat "$out/$run/faults.jsonl"
done
