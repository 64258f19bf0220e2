#!/usr/bin/env bash
# Builds every artifact of a release into one folder, from the committed tree
# (git archive HEAD), never from uncommitted files (docs/releasing.md):
#
#   sepp_X.Y.Z_{linux,darwin}_{amd64,arm64}.tar.gz   the server and CLI, static,
#       each in a folder sepp_X.Y.Z_OS_ARCH/ with LICENSE, README.md and
#       CHANGELOG.md, as nats-server ships its archives
#   sepp_X.Y.Z_docker-context.tar.gz   the container image's build context: the
#       tree with the Dockerfile at its root, whose VERSION defaults to vX.Y.Z
#   sepp-X.Y.Z.tgz                     the TypeScript client (npm pack)
#   sepp-client-X.Y.Z.tar.gz, sepp_client-X.Y.Z-py3-none-any.whl
#                                      the Python client (sdist, wheel)
#   sepp-rs-X.Y.Z.crate                the Rust client (cargo package)
#   SHA256SUMS                         sha256sum -c SHA256SUMS checks them all
#
#   release/build.sh [VERSION [OUT]]    make release [VERSION=vX.Y.Z] [OUT=dir]
#
# VERSION is vX.Y.Z (or X.Y.Z); without it, the tag of HEAD
# (git describe --tags --exact-match). It must be the version of every client
# manifest and the newest release of CHANGELOG.md: internal/versioncheck's
# test decides, with SEPP_RELEASE_VERSION set. OUT defaults to dist/ (ignored
# by git); it must be empty, absent, or an earlier output of this script.
#
# Needs go, git, node and npm, cargo with Debian's librust-*-dev crates (the
# Rust client's .cargo/config.toml), and for /usr/bin/python3 the Debian
# packages python3-build, python3-setuptools and python3-wheel. Cargo's
# target directory is CARGO_TARGET_DIR, else
# ${XDG_CACHE_HOME:-~/.cache}/sepp-release/cargo-target, outside the tree.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

fail() { echo "release/build.sh: $*" >&2; exit 1; }
say() { echo "release/build.sh: $*"; }

# The commit of the release, read once: others may commit while it builds.
commit="$(git rev-parse HEAD)"
version="${1:-}"
if [ -z "$version" ]; then
  version="$(git describe --tags --exact-match "$commit" 2>/dev/null)" ||
    fail "HEAD has no tag: tag the release (git tag -a vX.Y.Z -m 'Sepp X.Y.Z') or name the version (make release VERSION=vX.Y.Z)"
fi
[[ "$version" =~ ^v?([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)$ ]] ||
  fail "version $version is not vX.Y.Z (or vX.Y.Z-pre.N)"
num="${BASH_REMATCH[1]}" # 0.1.0: the clients' version and the file names
tag="v$num"              # v0.1.0: the Go module's tag, stamped into sepp

out="${2:-$repo/dist}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [ -n "$(ls -A "$out")" ]; then
  [ -f "$out/SHA256SUMS" ] || fail "$out is not empty and holds no earlier release (no SHA256SUMS): name an empty folder"
  find "$out" -mindepth 1 -delete
fi

python=/usr/bin/python3 # Debian's, which has python3-build
cargo="$(command -v cargo || true)"
[ -n "$cargo" ] || cargo="$HOME/.cargo/bin/cargo"
missing=()
for tool in go git node npm "$cargo" "$python" sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
"$python" -c 'import build, setuptools, wheel' 2>/dev/null || missing+=("python3-build python3-setuptools python3-wheel (Debian)")
[ ${#missing[@]} -eq 0 ] || fail "missing: ${missing[*]} (release/check.sh installs them on Debian)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sepp-release/cargo-target}"

t0=$SECONDS
# timed LABEL COMMAND...: runs it, then says how long it took. Never call it
# (or a step) in a condition: bash would then ignore set -e inside the step.
timed() {
  local label="$1" start=$SECONDS
  shift
  "$@"
  say "$label: $((SECONDS - start))s"
}

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
short="${commit:0:12}"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  say "note: the tree has uncommitted changes; the release is built from HEAD ($short) without them"
fi
say "building $tag from $short into $out"
git archive --format=tar "$commit" | tar -x -C "$stage"
# Clamp the archives' times to the commit's, so a rebuild of one commit gives
# the same archives (SOURCE_DATE_EPOCH does it for the wheel).
epoch="$(git log -1 --format=%ct "$commit")"
mtime="@$epoch"
export SOURCE_DATE_EPOCH="$epoch"

check_version() {
  # One version, decided by the one check (internal/versioncheck).
  if ! (cd "$stage" && SEPP_RELEASE_VERSION="$tag" go test -count=1 ./internal/versioncheck >"$stage/versioncheck.log" 2>&1); then
    cat "$stage/versioncheck.log" >&2
    fail "the manifests, CHANGELOG.md and $tag disagree (above); docs/releasing.md says what to bump"
  fi
}
timed "version check" check_version

archive() { # archive DIR NAME.tar.gz: a reproducible tar.gz of DIR's folder
  local dir="$1" name="$2"
  tar -C "$(dirname "$dir")" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" \
    -cf - "$(basename "$dir")" | gzip -n -9 >"$out/$name"
}

build_binaries() {
  local os arch dir
  for os in linux darwin; do
    for arch in amd64 arm64; do
      dir="$stage/archives/sepp_${num}_${os}_${arch}"
      mkdir -p "$dir"
      (cd "$stage" && GOOS="$os" GOARCH="$arch" sh deploy/build.sh "$dir/sepp" "$tag")
      cp "$stage/LICENSE" "$stage/README.md" "$stage/CHANGELOG.md" "$dir/"
      archive "$dir" "sepp_${num}_${os}_${arch}.tar.gz"
    done
  done
}
timed "sepp binaries (4 platforms)" build_binaries

build_docker_context() {
  # The tree as tagged, the Dockerfile at its root, with its VERSION build
  # argument defaulting to this release rather than "dev".
  local ctx="$stage/docker-context"
  mkdir "$ctx"
  git archive --format=tar "$commit" | tar -x -C "$ctx"
  grep -q '^ARG VERSION=dev$' "$ctx/Dockerfile" || fail "the Dockerfile has no 'ARG VERSION=dev' line to set to $tag"
  sed -i "s/^ARG VERSION=dev\$/ARG VERSION=$tag/" "$ctx/Dockerfile"
  tar -C "$ctx" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" -cf - . |
    gzip -n -9 >"$out/sepp_${num}_docker-context.tar.gz"
}
timed "docker build context" build_docker_context

build_typescript() {
  # npm ci builds dist/ (prepare: tsc); npm pack takes dist/ and src/
  # (package.json files), README.md, LICENSE and package.json.
  (cd "$stage/clients/typescript" &&
    npm ci --no-audit --no-fund --loglevel=error >/dev/null &&
    npm pack --pack-destination "$out" --loglevel=error >/dev/null)
  [ -f "$out/sepp-$num.tgz" ] || fail "npm pack wrote no sepp-$num.tgz"
}
timed "TypeScript client (npm ci, npm pack)" build_typescript

build_python() {
  # Offline, with Debian's setuptools: no build isolation.
  if ! (cd "$stage/clients/python" && "$python" -m build --no-isolation --outdir "$out" . >"$stage/python-build.log" 2>&1); then
    cat "$stage/python-build.log" >&2
    fail "python3 -m build failed (above)"
  fi
}
timed "Python client (sdist, wheel)" build_python

build_rust() {
  # Offline against Debian's crates (clients/rust/.cargo/config.toml, found
  # from the working directory); the verification builds the packaged crate.
  (cd "$stage/clients/rust" && "$cargo" package --offline --allow-dirty --quiet)
  cp "$CARGO_TARGET_DIR/package/sepp-rs-$num.crate" "$out/"
}
timed "Rust client (cargo package, verified)" build_rust

(cd "$out" && sha256sum -- * >"$stage/SHA256SUMS" && mv "$stage/SHA256SUMS" SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
say "done in $((SECONDS - t0))s: $out"
(cd "$out" && ls -l)
