#!/usr/bin/env bash
# Build wireguard-go (userspace WireGuard) from the Go module proxy, once, and cache it.
#
#   WG_BIN=$(bash scripts/install-wireguard.sh)   # last stdout line = the bin directory
#   "$WG_BIN/wireguard-go" --version
#
# Result: ${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}/wireguard-go/<version>/
#   bin/wireguard-go   the daemon (golang.zx2c4.com/wireguard, main package)
#   socket-dir         the UAPI socket directory compiled into it (one line)
#   .stamp             recipe + version + socket dir; a mismatch rebuilds
#
# Why a build and not a package: the kernel here has no wireguard module (`ip link add type
# wireguard` fails) and Debian ships no wireguard-go. Debian's `wireguard-tools` (`wg`) is
# installable but optional: netpeer_dev.wireguard speaks the UAPI protocol over the socket itself.
#
# The UAPI socket directory. wireguard-go creates <dir>/<interface>.sock; the directory is a
# package variable (golang.zx2c4.com/wireguard/ipc.socketDirectory, default /var/run/wireguard)
# that only the linker can change. It cannot be chosen at run time: WG_UAPI_FD hands over an
# already bound socket, but the daemon still watches <compiled dir>/<interface>.sock with inotify
# and exits when that file is missing. So it is compiled in, outside /var/run/wireguard (which a
# system WireGuard would share), and every stack makes its interface names unique instead.
#
# Environment:
#   WIREGUARD_GO_VERSION  module version (default below: the newest the proxy serves as of writing;
#                         the tagged v0.0.20250522 is refused by the proxy, this pseudo-version is
#                         the same code, `wireguard-go --version` says v0.0.20250522)
#   WIREGUARD_SOCKET_DIR  compiled-in UAPI socket directory (default /run/netpeer/wireguard);
#                         a non-default one is cached in its own directory <version>+<hash>
#   NETPEER_CACHE_DIR     cache root (default $HOME/.cache/netpeer)
#   GO                    go binary to use (default: `go` on PATH, else /usr/local/go/bin/go)
# Go's own module and build caches (GOMODCACHE, GOCACHE) are used as usual.
set -euo pipefail

DEFAULT_VERSION=v0.0.0-20260522210424-ecfc5a8d5446
DEFAULT_SOCKET_DIR=/run/netpeer/wireguard
MODULE=golang.zx2c4.com/wireguard
# Bump when the build recipe changes in a way that must invalidate cached binaries.
RECIPE=1

log() { printf 'install-wireguard: %s\n' "$*" >&2; }
die() { printf 'install-wireguard: error: %s\n' "$*" >&2; exit 1; }

ver="${WIREGUARD_GO_VERSION:-$DEFAULT_VERSION}"
[[ "$ver" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] \
    || die "WIREGUARD_GO_VERSION must be a Go module version such as $DEFAULT_VERSION, got '$ver'"
sockdir="${WIREGUARD_SOCKET_DIR:-$DEFAULT_SOCKET_DIR}"
[[ "$sockdir" == /* && "$sockdir" != *[[:space:]]* && "$sockdir" != */ ]] \
    || die "WIREGUARD_SOCKET_DIR must be an absolute path without spaces or trailing slash, got '$sockdir'"
# <dir>/<15-char interface>.sock must fit in a unix socket path (107 bytes).
(( ${#sockdir} <= 80 )) || die "WIREGUARD_SOCKET_DIR is too long for unix sockets (max 80 characters)"
[[ "$sockdir" != /var/run/wireguard && "$sockdir" != /run/wireguard ]] \
    || die "WIREGUARD_SOCKET_DIR must not be the system's $sockdir"

cache_root="${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}"
if [[ "$sockdir" == "$DEFAULT_SOCKET_DIR" ]]; then
    prefix="$cache_root/wireguard-go/$ver"
else
    prefix="$cache_root/wireguard-go/$ver+$(printf '%s' "$sockdir" | sha256sum | cut -c1-8)"
fi
bin="$prefix/bin"

stamp_value() { printf 'recipe=%s module=%s@%s socket-dir=%s\n' "$RECIPE" "$MODULE" "$ver" "$sockdir"; }

cached_ok() {
    [[ -x "$bin/wireguard-go" && -f "$bin/wireguard-go" ]] || return 1
    [[ -f "$prefix/.stamp" && "$(cat "$prefix/.stamp")" == "$(stamp_value)" ]] || return 1
    [[ -f "$prefix/socket-dir" && "$(cat "$prefix/socket-dir")" == "$sockdir" ]] || return 1
    "$bin/wireguard-go" --version 2>/dev/null | grep -q '^wireguard-go v' || return 1
}

if cached_ok; then
    log "wireguard-go $ver already built: $bin (UAPI sockets in $sockdir)"
    printf '%s\n' "$bin"
    exit 0
fi

# --- Go toolchain and one builder at a time ------------------------------------------------
. "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"
find_go "wireguard-go $ver"
build_lock cached_ok "$bin" "wireguard-go $ver"

log "building wireguard-go $ver from the Go module proxy (UAPI sockets in $sockdir)..."
start=$(date +%s.%N)
work="$(mktemp -d "${TMPDIR:-/tmp}/netpeer-wireguard-build.XXXXXX")"
stage="$prefix/bin.new.$$"
cleanup() {
    rm -rf "$work" "$stage"
    if [[ ! -d "$bin" ]]; then rm -f "$prefix/.lock" "$prefix/.stamp" "$prefix/socket-dir"; rmdir "$prefix" 2>/dev/null || true; fi
}
trap cleanup EXIT

# Independent of the caller's Go settings, but keep the caller's caches and proxy.
export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
unset GOOS GOARCH GOBIN

# A throwaway wrapper module pins the version (go.sum checked against the checksum database as usual).
cat >"$work/go.mod" <<EOF
module netpeer.invalid/wireguard-build

go 1.23
EOF
log "fetching $MODULE@$ver..."
if ! (cd "$work" && "$go_bin" get "$MODULE@$ver" >"$work/get.log" 2>&1); then
    die "cannot fetch $MODULE@$ver from the Go module proxy: $(tail -n 3 "$work/get.log" | tr '\n' ' ')"
fi
need_go="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$("$go_bin" env GOMODCACHE)/cache/download/$MODULE/@v/$ver.mod" 2>/dev/null | head -n1)"
have_go="$("$go_bin" env GOVERSION)"; have_go="${have_go#go}"
if [[ -n "$need_go" ]] && [[ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]]; then
    die "wireguard-go $ver needs Go >= $need_go, but $go_bin is go$have_go"
fi

rm -rf "$stage" && mkdir -p "$stage"
log "compiling (-p 2)..."
(cd "$work" && "$go_bin" build -p 2 -trimpath \
    -ldflags "-s -w -X $MODULE/ipc.socketDirectory=$sockdir" \
    -o "$stage/wireguard-go" "$MODULE") || die "go build of wireguard-go $ver failed (see messages above)"

"$stage/wireguard-go" --version 2>/dev/null | grep -q '^wireguard-go v' || die "the built wireguard-go does not run"
# The socket directory must really be compiled in (the -X target is an unexported variable; a
# renamed one would be ignored silently by the linker).
grep -aqF "$sockdir" "$stage/wireguard-go" || die "the socket directory $sockdir is not in the binary: ldflags -X had no effect"

rm -rf "$bin"
mv "$stage" "$bin"
printf '%s\n' "$sockdir" >"$prefix/socket-dir"
stamp_value >"$prefix/.stamp"

log "built wireguard-go $ver in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s: $bin"
printf '%s\n' "$bin"
