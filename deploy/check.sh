#!/usr/bin/env bash
# CI's check of the container image's build, without a Docker engine: builds
# the binary with deploy/build.sh, the command the Dockerfile runs, checks it
# is static (the image's final stage has no libc), then starts it as the
# image does (SEPP_STORAGE_PATH and SEPP_LISTEN, a config file) and checks
# that /healthz and /readyz answer 200, over HTTP/1.1 and h2c, and that it
# stops cleanly on SIGTERM.
#
#   bash deploy/check.sh        run from anywhere in the repository
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "deploy/check.sh: $*" >&2; exit 1; }

# The Dockerfile must build with deploy/build.sh, or this check proves
# nothing about the image.
grep -q '^ *sh deploy/build.sh /out/sepp ' Dockerfile ||
	fail "the Dockerfile no longer runs deploy/build.sh: keep one build command for the image and CI"

tmp="$(mktemp -d)"
pid=""
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

sh deploy/build.sh "$tmp/sepp" check
[ "$("$tmp/sepp" version)" = "sepp check" ] || fail "the version set with -ldflags -X did not take: $("$tmp/sepp" version)"

if ! command -v file >/dev/null 2>&1; then
	if command -v apt-get >/dev/null 2>&1; then
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq file) >/dev/null 2>&1 || true
	fi
fi
if command -v file >/dev/null 2>&1; then
	desc="$(file -L "$tmp/sepp")"
	case "$desc" in
	*"statically linked"*) ;;
	*) fail "the binary is not static: $desc" ;;
	esac
elif command -v ldd >/dev/null 2>&1; then
	# ldd exits non-zero on a static binary.
	out="$(ldd "$tmp/sepp" 2>&1 || true)"
	case "$out" in
	*"not a dynamic executable"* | *"statically linked"*) ;;
	*) fail "the binary is not static: $out" ;;
	esac
else
	fail "neither file nor ldd is installed: cannot check that the binary is static"
fi

# The Kubernetes examples' sepp.toml (their ConfigMaps) pass --check-config
# with the environment their pods set.
for manifest in deploy/kubernetes/sepp.yaml deploy/kubernetes/sepp-postgres.yaml; do
	awk '/^  sepp.toml: \|/ {on=1; next} on && /^    / {print substr($0, 5); next} on && /^ *$/ {print ""; next} on {exit}' \
		"$manifest" >"$tmp/k8s.toml"
	grep -q '^\[' "$tmp/k8s.toml" || fail "$manifest: no sepp.toml found in its ConfigMap"
	SEPP_LISTEN=0.0.0.0:50051 SEPP_STORAGE_PATH="$tmp/k8s-data" SEPP_STORAGE_URL=postgres://sepp@postgres:5432/sepp \
		SEPP_TOKEN_ADMIN=a SEPP_TOKEN_WORKERS=b "$tmp/sepp" serve --check-config --config "$tmp/k8s.toml" >/dev/null ||
		fail "$manifest: its sepp.toml fails sepp serve --check-config"
done

# As in the image: the environment sets the data directory and the address;
# the config accepts connections without tokens (as a mounted config with
# allow_unauthenticated = true would).
mkdir "$tmp/data"
cat >"$tmp/sepp.toml" <<'TOML'
[server]
allow_unauthenticated = true
TOML
SEPP_STORAGE_PATH="$tmp/data" SEPP_LISTEN=127.0.0.1:0 "$tmp/sepp" serve --config "$tmp/sepp.toml" 2>"$tmp/log" &
pid=$!

addr=""
for _ in $(seq 100); do
	addr="$(sed -n 's/.*msg="sepp serving" addr=\([^ ]*\).*/\1/p' "$tmp/log" | head -1)"
	[ -n "$addr" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/log" >&2; fail "sepp serve exited at start"; }
	sleep 0.1
done
[ -n "$addr" ] || { cat "$tmp/log" >&2; fail "sepp serve did not say where it listens within 10s"; }
ls "$tmp/data" | grep -q . || fail "the store did not write to SEPP_STORAGE_PATH"

for path in /healthz /readyz; do
	for proto in --http1.1 --http2-prior-knowledge; do
		body="$(curl -sS --max-time 5 "$proto" -w ' %{http_code}' "http://$addr$path")" ||
			fail "GET $path ($proto) failed"
		[ "$body" = "ok
 200" ] || fail "GET $path ($proto): got $(printf %q "$body"), want \"ok\" and 200"
	done
done

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
[ "$status" = 0 ] || { cat "$tmp/log" >&2; fail "sepp serve exited $status after SIGTERM"; }
grep -q 'msg=stopped' "$tmp/log" || { cat "$tmp/log" >&2; fail "no \"stopped\" line after SIGTERM"; }
echo "deploy/check.sh: OK (static binary; /healthz and /readyz answer 200 on $addr; clean stop)"
