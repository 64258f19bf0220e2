#!/usr/bin/env bash
# CI for the Rust client (sepp-rs): installs what a fresh Debian machine
# lacks, checks that the committed wire code (src/gen) is what the .proto
# files generate, then runs `cargo test` (unit tests, integration tests
# against a real `sepp serve`, doc tests; the examples, bench_enqueue
# included, are built by `cargo test` too).
#
# Uses $SEPP_BIN when set; otherwise the tests build sepp with `go build`.
# Reuses target/ when present, so a warm run only rebuilds what changed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# The crates come from Debian's packages (no crate registry is reachable):
# .cargo/config.toml points cargo at /usr/share/cargo/registry.
# The rustls feature (tests/tls.rs) needs its crates too, and the openssl CLI
# makes the test certificates. The generator (codegen/) needs prost-build and
# protoc; the crate itself only prost and prost-types.
debs=(librust-tokio-dev librust-reqwest-dev librust-serde-dev librust-serde-derive-dev
      librust-serde-json-dev librust-base64-dev librust-bytes-dev librust-log-dev
      librust-prost-dev librust-prost-types-dev librust-fastrand-dev
      librust-prost-build-dev protobuf-compiler
      librust-rustls-dev librust-tokio-rustls-dev librust-rustls-pemfile-dev
      librust-hyper-rustls-dev librust-rustls-native-certs-dev librust-ring-dev openssl)
missing=()
for p in "${debs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

cargo_bin=""
if command -v cargo >/dev/null 2>&1; then
  cargo_bin="$(command -v cargo)"
elif [ -x "$HOME/.cargo/bin/cargo" ]; then
  cargo_bin="$HOME/.cargo/bin/cargo"
elif [ -x /root/.cargo/bin/cargo ]; then
  cargo_bin=/root/.cargo/bin/cargo
else
  # Debian's own toolchain.
  dpkg -s cargo >/dev/null 2>&1 || missing+=(cargo)
  cargo_bin=/usr/bin/cargo
fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "ci.sh: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi

echo "ci.sh: $("$cargo_bin" --version), SEPP_BIN=${SEPP_BIN:-<unset: the tests build it>}"

# The wire code is generated and committed, so that users build without
# protoc; it must be what the .proto files generate now. Write it again into
# a temporary folder and compare.
fresh="$(mktemp -d)"
trap 'rm -rf "$fresh"' EXIT
"$cargo_bin" run --quiet --locked --manifest-path codegen/Cargo.toml -- "$fresh/gen"
if ! diff -ru src/gen "$fresh/gen"; then
  echo "ci.sh: src/gen differs from what the .proto files generate: run" >&2
  echo "  cargo run --locked --manifest-path codegen/Cargo.toml" >&2
  echo "in clients/rust and commit src/gen" >&2
  exit 1
fi
echo "ci.sh: src/gen is what the .proto files generate"
# With the rustls feature, so tests/tls.rs runs (through a TLS terminator in
# front of the real server). Each test starts its own servers; the crash
# tests are the slow ones.
# CI's full tier (SEPP_CI_FULL=1) also runs the tests marked #[ignore]: the
# crash test's second variant.
extra=()
[ "${SEPP_CI_FULL:-0}" = 1 ] && extra=(-- --include-ignored)
"$cargo_bin" test --locked --features rustls "${extra[@]}"
