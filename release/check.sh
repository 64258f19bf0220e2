#!/usr/bin/env bash
# CI's check of a release, from a fresh clone: runs the release command
# (release/build.sh) into a temporary folder for the version of the
# manifests, checks SHA256SUMS and every archive, then installs each client
# artifact the way a user would, into an empty folder outside the repository,
# and runs the idempotency page's example with each against a server started
# from the released linux/amd64 binary. The first run prints
# "enqueued <id>"; every later one, in any language, "already enqueued
# earlier as <the same id>".
#
#   bash release/check.sh        from anywhere; installs what Debian lacks
#
# The examples name localhost:50051, as the documentation does, so the
# server listens there: this waits up to a minute for the port to be free
# and must not run beside clients/doc-examples.sh, which uses it too.
# Cargo's target directory (CARGO_TARGET_DIR, else the one below) is kept between runs in
# ${XDG_CACHE_HOME:-~/.cache}/sepp-ci/cargo-target, npm's cache in ~/.npm.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

fail() { echo "release/check.sh: $*" >&2; exit 1; }
say() { echo "release/check.sh: $*"; }
t0=$SECONDS
part_start=$SECONDS
part() { # part LABEL: ends the part that began at the previous call
  say "$1: $((SECONDS - part_start))s"
  part_start=$SECONDS
}

work="$(mktemp -d)"
server=""
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -KILL "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# --- what a fresh Debian machine lacks --------------------------------------
py=/usr/bin/python3 # Debian's: its python3-httpx, python3-protobuf and python3-build are for it
debs=(python3-build python3-setuptools python3-wheel python3-venv python3-httpx python3-protobuf file
  # the crates clients/rust/ci.sh installs: the packaged Cargo.lock names the
  # optional ones too, so cargo package needs them to resolve
  librust-tokio-dev librust-reqwest-dev librust-serde-dev librust-serde-derive-dev
  librust-serde-json-dev librust-base64-dev librust-bytes-dev librust-log-dev
  librust-rustls-dev librust-tokio-rustls-dev librust-rustls-pemfile-dev
  librust-hyper-rustls-dev librust-rustls-native-certs-dev librust-ring-dev)
cargo="$(command -v cargo || true)"
[ -n "$cargo" ] || { [ -x "$HOME/.cargo/bin/cargo" ] && cargo="$HOME/.cargo/bin/cargo"; } || true
[ -n "$cargo" ] || { debs+=(cargo); cargo=/usr/bin/cargo; }
node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if ! command -v npm >/dev/null || [ "$(node_major)" -lt 20 ]; then debs+=(nodejs npm); fi
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  [ "$(id -u)" -eq 0 ] && sudo=() || sudo=(sudo)
  installed=""
  for try in 1 2 3 4 5 6; do
    # Another installer may hold the dpkg lock; a stale package list needs an update.
    if "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$work/apt.log" 2>&1; then
      installed=1
      break
    fi
    [ "$try" = 1 ] && "${sudo[@]}" apt-get update -qq >/dev/null 2>&1 || true
    sleep 5
  done
  [ -n "$installed" ] || { cat "$work/apt.log" >&2; fail "apt-get install ${missing[*]} failed"; }
fi
[ "$(node_major)" -ge 20 ] || fail "Node 20 or later is needed (the TypeScript client's engines), found $(node --version 2>/dev/null || echo none)"
part "installing what was missing"

# --- the release command -----------------------------------------------------
version="$(sed -n 's/^## \[\([0-9][^]]*\)\] - [0-9].*/\1/p' CHANGELOG.md | head -1)"
[ -n "$version" ] || fail "CHANGELOG.md has no released section (## [X.Y.Z] - YYYY-MM-DD)"
tag="v$version"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sepp-ci/cargo-target}"

# It refuses a version the manifests do not state, and, on an untagged
# commit, to guess one. Both are decided before anything is built.
if bash release/build.sh v0.0.0 "$work/refused" >"$work/refused.log" 2>&1; then
  fail "release/build.sh built v0.0.0, which no manifest states"
fi
grep -q 'disagree' "$work/refused.log" || { cat "$work/refused.log" >&2; fail "release/build.sh v0.0.0 failed, but not at the version check"; }
if ! git describe --tags --exact-match >/dev/null 2>&1; then
  if bash release/build.sh "" "$work/refused" >"$work/refused.log" 2>&1; then fail "release/build.sh built an untagged commit without a VERSION"; fi
  grep -q 'HEAD has no tag' "$work/refused.log" || { cat "$work/refused.log" >&2; fail "release/build.sh without VERSION failed, but not for want of a tag"; }
fi
part "release/build.sh refuses a wrong or missing version"

# A release is built from its tag: in a clone of this commit, tag it (as
# docs/releasing.md says; -f, should the tag name an older commit there) and
# run the release command without a version, so the tag is what it reads.
git clone -q --no-checkout "$repo" "$work/tagged"
git -C "$work/tagged" checkout -q --detach "$(git rev-parse HEAD)"
git -C "$work/tagged" -c user.name=ci -c user.email=ci@localhost tag -f -a "$tag" -m "Sepp $version" >/dev/null
dist="$work/dist"
bash "$work/tagged/release/build.sh" "" "$dist"
part "release/build.sh from the tag $tag (the whole release)"

# --- the folder ----------------------------------------------------------------
(cd "$dist" && sha256sum --quiet -c SHA256SUMS) || fail "sha256sum -c SHA256SUMS failed"
expected="SHA256SUMS
sepp-$version.tgz
sepp-client-$version.tar.gz
sepp-rs-$version.crate
sepp_${version}_darwin_amd64.tar.gz
sepp_${version}_darwin_arm64.tar.gz
sepp_${version}_docker-context.tar.gz
sepp_${version}_linux_amd64.tar.gz
sepp_${version}_linux_arm64.tar.gz
sepp_client-$version-py3-none-any.whl"
got="$(cd "$dist" && LC_ALL=C ls | LC_ALL=C sort)"
[ "$got" = "$(LC_ALL=C sort <<<"$expected")" ] || fail "the release folder holds
$got
want
$expected"
[ "$(grep -c . "$dist/SHA256SUMS")" = 9 ] || fail "SHA256SUMS does not cover the 9 artifacts"

declare -A kind=(
  [linux_amd64]="ELF 64-bit LSB executable, x86-64"
  [linux_arm64]="ELF 64-bit LSB executable, ARM aarch64"
  [darwin_amd64]="Mach-O 64-bit x86_64 executable"
  [darwin_arm64]="Mach-O 64-bit arm64 executable"
)
for platform in linux_amd64 linux_arm64 darwin_amd64 darwin_arm64; do
  name="sepp_${version}_$platform"
  mkdir -p "$work/bin/$platform"
  tar -xzf "$dist/$name.tar.gz" -C "$work/bin/$platform"
  listing="$(cd "$work/bin/$platform" && find . -type f | LC_ALL=C sort | tr '\n' ' ')"
  [ "$listing" = "./$name/CHANGELOG.md ./$name/LICENSE ./$name/README.md ./$name/sepp " ] ||
    fail "$name.tar.gz holds $listing, want $name/ with sepp, LICENSE, README.md and CHANGELOG.md"
  cmp -s "$work/bin/$platform/$name/LICENSE" LICENSE || fail "$name.tar.gz: LICENSE is not the repository's"
  desc="$(file -b "$work/bin/$platform/$name/sepp")"
  [[ "$desc" == "${kind[$platform]}"* ]] || fail "$name.tar.gz: sepp is $desc, want ${kind[$platform]}"
  case "$platform" in linux_*) [[ "$desc" == *"statically linked"* ]] || fail "$name: sepp is not static: $desc" ;; esac
done
sepp="$work/bin/linux_amd64/sepp_${version}_linux_amd64/sepp"
[ "$("$sepp" version)" = "sepp $tag" ] || fail "sepp version of the released binary printed $("$sepp" version), want sepp $tag"
part "SHA256SUMS, the four archives, sepp version"

# The image's build context: the Dockerfile at its root, building what its
# builder stage runs (deploy/build.sh) with the VERSION it defaults to.
mkdir "$work/context"
tar -xzf "$dist/sepp_${version}_docker-context.tar.gz" -C "$work/context"
grep -qx "ARG VERSION=$tag" "$work/context/Dockerfile" || fail "the context's Dockerfile does not default VERSION to $tag"
ctx_version="$(sed -n 's/^ARG VERSION=//p' "$work/context/Dockerfile")"
(cd "$work/context" && sh deploy/build.sh "$work/context-sepp" "$ctx_version")
[ "$("$work/context-sepp" version)" = "sepp $tag" ] || fail "the context's build printed $("$work/context-sepp" version)"
part "docker build context (its builder stage's command, without Docker)"

# --- each client, installed as a user would ------------------------------------
# TypeScript: an empty npm project; the client's dependencies come from the
# registry.
app_ts="$work/app-typescript"
mkdir "$app_ts"
(cd "$app_ts" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "$dist/sepp-$version.tgz" >/dev/null)
[ "$(cd "$app_ts" && node -p 'JSON.parse(require("fs").readFileSync("node_modules/sepp/package.json")).version')" = "$version" ] ||
  fail "npm installed another version of sepp"
cmp -s "$app_ts/node_modules/sepp/LICENSE" LICENSE || fail "the npm package has no LICENSE"
cp clients/typescript/examples/idempotency.mjs "$app_ts/"
part "TypeScript: npm install sepp-$version.tgz"

# Python: a venv that sees Debian's httpx and protobuf; the wheel, and the sdist built
# offline by pip with Debian's setuptools.
for what in wheel sdist; do
  app="$work/app-python-$what"
  mkdir "$app"
  "$py" -m venv --system-site-packages "$app/.venv"
  case "$what" in
  wheel) "$app/.venv/bin/pip" install -q --no-index --no-deps "$dist/sepp_client-$version-py3-none-any.whl" ;;
  sdist) "$app/.venv/bin/pip" install -q --no-index --no-deps --no-build-isolation "$dist/sepp-client-$version.tar.gz" ;;
  esac
  (cd "$app" && .venv/bin/python - "$version" "$app" <<'PY') || fail "the Python $what did not install as sepp-client $version under its venv"
import sys, sepp
from importlib import metadata
version, app = sys.argv[1], sys.argv[2]
assert sepp.__file__.startswith(app + "/.venv/"), sepp.__file__
assert sepp.__version__ == version, sepp.__version__
assert metadata.version("sepp-client") == version
assert metadata.metadata("sepp-client")["License"] == "Apache-2.0"
assert any(f.name == "LICENSE" for f in metadata.files("sepp-client")), "no LICENSE"
PY
  cp clients/python/examples/idempotency.py "$app/"
done
part "Python: pip install of the wheel and of the sdist, each in a venv"

# Rust: the unpacked .crate, a new project that depends on it by path, with
# the registry settings of clients/rust/.cargo/config.toml (the Rust README's
# "Building without a crate registry").
tar -xzf "$dist/sepp-rs-$version.crate" -C "$work"
cmp -s "$work/sepp-rs-$version/LICENSE" LICENSE || fail "the crate has no LICENSE"
app_rs="$work/app-rust"
mkdir -p "$app_rs/src" "$app_rs/.cargo"
cp "$repo/clients/rust/.cargo/config.toml" "$app_rs/.cargo/config.toml"
cat >"$app_rs/Cargo.toml" <<EOF
[package]
name = "idempotency-example"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
sepp-rs = { path = "../sepp-rs-$version" }
tokio = { version = "1", features = ["rt-multi-thread", "macros"] }

[workspace]
EOF
cp clients/rust/examples/idempotency.rs "$app_rs/src/main.rs"
(cd "$app_rs" && "$cargo" build --quiet)
part "Rust: cargo build of a project depending on the unpacked crate"

# --- one server, every example -------------------------------------------------
port_taken() { (exec 3<>/dev/tcp/127.0.0.1/50051) 2>/dev/null; }
for _ in $(seq 60); do port_taken || break; sleep 1; done
port_taken && fail "something still listens on 127.0.0.1:50051 after a minute (clients/doc-examples.sh?); the examples name that address"
SEPP_LISTEN=127.0.0.1:50051 SEPP_STORAGE_PATH="$work/data" "$sepp" serve --log-level info >"$work/server.log" 2>&1 &
server=$!
line=""
for _ in $(seq 100); do
  line="$(grep -m1 'msg="sepp serving"' "$work/server.log" || true)"
  [ -n "$line" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; fail "the released sepp serve exited at start"; }
  sleep 0.1
done
[ -n "$line" ] || { cat "$work/server.log" >&2; fail "the released sepp serve did not log \"sepp serving\" within 10s"; }
[[ " $line " == *" version=$tag "* ]] || fail "the start line does not show version=$tag: $line"
say "the released server: $line"

run() {
  case "$1" in
  python-wheel | python-sdist) (cd "$work/app-$1" && .venv/bin/python idempotency.py) ;;
  rust) (cd "$app_rs" && "$cargo" run --quiet) ;;
  typescript) (cd "$app_ts" && node idempotency.mjs) ;;
  esac
}
first=""
for lang in python-wheel rust typescript python-sdist rust typescript; do
  out="$(run "$lang")" || fail "the $lang example failed"
  say "$lang: $out"
  if [ -z "$first" ]; then
    [[ "$out" =~ ^enqueued\ ([0-9a-f-]{36})$ ]] || fail "the first run ($lang) did not print enqueued <id>"
    first="${BASH_REMATCH[1]}"
  elif [ "$out" != "already enqueued earlier as $first" ]; then
    fail "$lang did not see the job $first"
  fi
done

kill -TERM "$server"
status=0
wait "$server" || status=$?
server=""
[ "$status" = 0 ] || { cat "$work/server.log" >&2; fail "the released sepp serve exited $status after SIGTERM"; }
part "the examples against the released server"
say "OK: release $tag built, summed and installed; one job, $first, seen from the Python wheel and sdist, the crate and the npm package (${SECONDS}s in all)"
