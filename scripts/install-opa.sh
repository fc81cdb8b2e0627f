#!/usr/bin/env bash
# Build OPA (the Open Policy Agent CLI, github.com/open-policy-agent/opa) from its Go module, once, and
# cache it. examples/policy/opa/ evaluates its Rego over `tofu show -json` with it (tests/policy).
#
#   OPA_BIN=$(bash scripts/install-opa.sh)   # last stdout line = the bin directory
#   "$OPA_BIN/opa" eval -d examples/policy/opa -i plan.json data.netpeer.deny
#
# Result: ${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}/opa/vX.Y.Z/bin/opa, with a .stamp (recipe + version);
# a mismatch rebuilds. No registry ships an OPA binary that this machine may fetch, so it is compiled;
# the build runs under `nice` (it shares the cores with whatever else runs) with -p 2.
#
# Environment:
#   OPA_VERSION         module version (default below; only exact versions are served)
#   NETPEER_CACHE_DIR   cache root (default $HOME/.cache/netpeer)
#   NETPEER_GOCACHE     Go build cache (default $NETPEER_CACHE_DIR/go-build, shared with OpenTofu's build)
#   NETPEER_GOMODCACHE  Go module cache (default $NETPEER_CACHE_DIR/go-mod, likewise)
#   GO                  go binary to use (default: `go` on PATH, else /usr/local/go/bin/go)
set -euo pipefail

DEFAULT_VERSION=v1.22.3
MODULE=github.com/open-policy-agent/opa
# Bump when the build recipe changes in a way that must invalidate cached binaries.
RECIPE=1

log() { printf 'install-opa: %s\n' "$*" >&2; }
die() { printf 'install-opa: error: %s\n' "$*" >&2; exit 1; }

ver="${OPA_VERSION:-$DEFAULT_VERSION}"
ver="v${ver#v}"
[[ "$ver" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "OPA_VERSION must look like ${DEFAULT_VERSION#v}, got '$ver'"

cache_root="${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}"
prefix="$cache_root/opa/$ver"
bin="$prefix/bin"

stamp_value() { printf 'recipe=%s module=%s@%s\n' "$RECIPE" "$MODULE" "$ver"; }
# `opa version` prints "Version: 1.22.3" among its lines. grep reads them all: `head` or `grep -q` could
# exit first, and pipefail would then report opa's SIGPIPE as a failure.
version_ok() { "$1" version 2>/dev/null | grep -x "Version: ${ver#v}" >/dev/null; }
cached_ok() {
    [[ -x "$bin/opa" && -f "$prefix/.stamp" && "$(cat "$prefix/.stamp")" == "$(stamp_value)" ]] || return 1
    version_ok "$bin/opa"
}

if cached_ok; then
    log "opa $ver already built: $bin"
    printf '%s\n' "$bin"
    exit 0
fi

# --- Go toolchain and one builder at a time ------------------------------------------------
. "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"
find_go "opa $ver"
build_lock cached_ok "$bin" "opa $ver"

start=$(date +%s)
work="$(mktemp -d "${TMPDIR:-/tmp}/netpeer-opa-build.XXXXXX")"
stage="$prefix/bin.new.$$"
cleanup() {
    rm -rf "$work" "$stage"
    if [[ ! -d "$bin" ]]; then rm -f "$prefix/.lock" "$prefix/.stamp"; rmdir "$prefix" 2>/dev/null || true; fi
}
trap cleanup EXIT

# Independent of the caller's Go settings; Go's caches beside ours, shared with the other builds.
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-modcacherw -buildvcs=false"
export GOCACHE="${NETPEER_GOCACHE:-$cache_root/go-build}" GOMODCACHE="${NETPEER_GOMODCACHE:-$cache_root/go-mod}"
unset GOOS GOARCH GOBIN

log "fetching $MODULE@$ver from the Go module proxy..."
if ! out="$(cd "$work" && "$go_bin" mod download -json "$MODULE@$ver" 2>"$work/download.err")"; then
    die "cannot download $MODULE@$ver from the Go module proxy: $(sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' <<<"$out") $(cat "$work/download.err")"
fi
gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$out" | head -n1)"
need_go="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$gomod" | head -n1)"
have_go="$("$go_bin" env GOVERSION)"; have_go="${have_go#go}"
if [[ -n "$need_go" ]] && [[ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]]; then
    die "opa $ver needs Go >= $need_go, but $go_bin is go$have_go"
fi

# `go install module@version` builds the release's own go.mod (OPA has no replace directives); the
# version is stamped in by OPA's version package from the module's build info.
rm -rf "$stage" && mkdir -p "$stage"
log "compiling opa $ver (first time: a few minutes on 2 cores; progress is silent)..."
(cd "$work" && GOBIN="$stage" nice -n 10 "$go_bin" install -p 2 -trimpath -ldflags "-s -w" "$MODULE@$ver") \
    || die "go install of $MODULE@$ver failed (see messages above)"
version_ok "$stage/opa" || die "built opa does not report version ${ver#v}: $("$stage/opa" version 2>&1 | head -n2)"

rm -rf "$bin"
mv "$stage" "$bin"
stamp_value >"$prefix/.stamp"
log "built opa $ver in $(( $(date +%s) - start ))s: $bin"
printf '%s\n' "$bin"
