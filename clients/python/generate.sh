#!/usr/bin/env bash
# Generates the Python messages of the API from the .proto files with protoc
# (Debian's protobuf-compiler) into the sepp package, where they are
# committed:
#
#   bash clients/python/generate.sh          # regenerate src/sepp/v1 and src/sepp/_rpc
#   bash clients/python/generate.sh OUTDIR   # the same files, under OUTDIR instead of src
#
# proto/sepp/v1/*.proto, the API every client speaks, becomes the package
# sepp.v1 (its proto package, so the generated modules' imports of each other,
# "from sepp.v1 import job_pb2", resolve inside this package). The one
# message the client needs from outside the API, google.rpc.ErrorInfo, comes
# from proto/sepp/_rpc/error_details.proto in this folder (it says why).
# ci.sh runs this into a temporary folder and fails when the committed files
# differ.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${1:-$here/src}"
mkdir -p "$out"

if ! command -v protoc >/dev/null; then
  echo "generate.sh: protoc not found: apt-get install protobuf-compiler" >&2
  exit 1
fi

# Clear what an earlier run generated, so a .proto file removed since leaves
# no module behind. The hand-written __init__.py files stay.
for dir in "$out/sepp/v1" "$out/sepp/_rpc"; do
  if [[ -d "$dir" ]]; then
    find "$dir" -maxdepth 1 \( -name '*_pb2.py' -o -name '*_pb2.pyi' \) -delete
  fi
done

cd "$repo"
protoc -I proto --python_out="$out" --pyi_out="$out" proto/sepp/v1/*.proto
protoc -I clients/python/proto --python_out="$out" --pyi_out="$out" clients/python/proto/sepp/_rpc/*.proto
