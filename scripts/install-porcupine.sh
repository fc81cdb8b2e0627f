#!/usr/bin/env bash
# Build lincheck, netpeer's linearizability checker (tests/linearizability/checker: netpeer's
# sequential model as a Go program over Porcupine, github.com/anishathalye/porcupine), once per
# version of its source, and cache it. Porcupine comes from the Go module proxy; nothing of it is
# kept in the repository.
#
#   LINCHECK_BIN=$(bash scripts/install-porcupine.sh)   # last stdout line = the bin directory
#   "$LINCHECK_BIN/lincheck" check history.jsonl
#
# Result: ${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}/lincheck/porcupine-<version>-<source hash>/
#   bin/lincheck   the checker
#   .stamp         recipe + module version + source hash; a mismatch rebuilds
#
# Environment:
#   PORCUPINE_VERSION  module version (default below)
#   NETPEER_CACHE_DIR  cache root (default $HOME/.cache/netpeer)
#   GO                 go binary to use (default: `go` on PATH, else /usr/local/go/bin/go)
# Go's own module and build caches (GOMODCACHE, GOCACHE) are used as usual.
set -euo pipefail

DEFAULT_VERSION=v1.3.1
MODULE=github.com/anishathalye/porcupine
# Bump when the build recipe changes in a way that must invalidate cached binaries.
RECIPE=1

log() { printf 'install-porcupine: %s\n' "$*" >&2; }
die() { printf 'install-porcupine: error: %s\n' "$*" >&2; exit 1; }

ver="${PORCUPINE_VERSION:-$DEFAULT_VERSION}"
[[ "$ver" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] \
    || die "PORCUPINE_VERSION must be a Go module version such as $DEFAULT_VERSION, got '$ver'"

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/linearizability/checker" && pwd)"
[[ -f "$src/go.mod" ]] || die "the checker's source is missing: no $src/go.mod"
hash="$(cd "$src" && cat go.mod $(ls *.go | sort) | sha256sum | cut -c1-12)"
cache_root="${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}"
prefix="$cache_root/lincheck/porcupine-$ver-$hash"
bin="$prefix/bin"

stamp_value() { printf 'recipe=%s module=%s@%s source=%s\n' "$RECIPE" "$MODULE" "$ver" "$hash"; }

cached_ok() {
    [[ -x "$bin/lincheck" && -f "$bin/lincheck" ]] || return 1
    [[ -f "$prefix/.stamp" && "$(cat "$prefix/.stamp")" == "$(stamp_value)" ]] || return 1
    { "$bin/lincheck" 2>&1 || true; } | grep -q '^lincheck: usage' || return 1
}

if cached_ok; then
    log "lincheck (Porcupine $ver, source $hash) already built: $bin"
    printf '%s\n' "$bin"
    exit 0
fi

# --- Go toolchain and one builder at a time ------------------------------------------------
. "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"
find_go "lincheck (Porcupine $ver)"
build_lock cached_ok "$bin" "lincheck (Porcupine $ver)"

log "building lincheck against $MODULE@$ver from the Go module proxy..."
start=$(date +%s.%N)
work="$(mktemp -d "${TMPDIR:-/tmp}/netpeer-lincheck-build.XXXXXX")"
stage="$prefix/bin.new.$$"
cleanup() {
    rm -rf "$work" "$stage"
    if [[ ! -d "$bin" ]]; then rm -f "$prefix/.lock" "$prefix/.stamp"; rmdir "$prefix" 2>/dev/null || true; fi
}
trap cleanup EXIT

# Independent of the caller's Go settings, but keep the caller's caches and proxy. The source is
# copied so that nothing is written into the repository (go.sum included).
export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
unset GOOS GOARCH GOBIN
cp "$src"/go.mod "$src"/*.go "$work"/
[[ -f "$src/go.sum" ]] && cp "$src/go.sum" "$work/"
log "fetching $MODULE@$ver..."
if ! (cd "$work" && "$go_bin" get "$MODULE@$ver" >"$work/get.log" 2>&1); then
    die "cannot fetch $MODULE@$ver from the Go module proxy: $(tail -n 3 "$work/get.log" | tr '\n' ' ')"
fi
need_go="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$work/go.mod" | head -n1)"
have_go="$("$go_bin" env GOVERSION)"; have_go="${have_go#go}"
if [[ -n "$need_go" ]] && [[ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]]; then
    die "lincheck needs Go >= $need_go, but $go_bin is go$have_go"
fi

rm -rf "$stage" && mkdir -p "$stage"
log "compiling (-p 2)..."
(cd "$work" && "$go_bin" vet . && "$go_bin" build -p 2 -trimpath -ldflags "-s -w" -o "$stage/lincheck" .) \
    || die "go build of lincheck failed (see messages above)"
{ "$stage/lincheck" 2>&1 || true; } | grep -q '^lincheck: usage' || die "the built lincheck does not run"

rm -rf "$bin"
mv "$stage" "$bin"
stamp_value >"$prefix/.stamp"

log "built lincheck in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s: $bin"
printf '%s\n' "$bin"
