"""Generated gRPC code for the netpeer.v1 API (scripts/gen-proto.sh; do not edit)."""
