#!/usr/bin/env bash
# Regenerates the Python gRPC code in netpeer/v1/ from schema/netpeer/v1/*.proto.
# With --check, regenerates into a temporary directory and fails if the
# committed code differs (CI runs this).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
out=.
if [ "${1:-}" = "--check" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out/netpeer/v1"
"$PY" -m grpc_tools.protoc -I schema --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
    schema/netpeer/v1/netpeer.proto
if [ "${1:-}" = "--check" ]; then
  for f in netpeer_pb2.py netpeer_pb2.pyi netpeer_pb2_grpc.py; do
    if ! cmp -s "$out/netpeer/v1/$f" "netpeer/v1/$f"; then
      echo "netpeer/v1/$f is out of date with schema/: run scripts/gen-proto.sh and commit" >&2
      exit 1
    fi
  done
  echo "generated gRPC code matches schema/"
fi
