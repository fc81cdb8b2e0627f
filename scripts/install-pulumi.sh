#!/usr/bin/env bash
# Build the Pulumi CLI and a Python language host from Go modules, once, and cache them.
#
#   PULUMI_BIN=$(bash scripts/install-pulumi.sh)   # last stdout line = the bin directory
#   export PATH="$PULUMI_BIN:$PATH"
#
# Result: ${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}/pulumi/vX.Y.Z/bin/ with
#   pulumi                          the real CLI (github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
#   pulumi-language-python          Python language host (scripts/pulumi-helpers/pulumi-language-python,
#                                   built against github.com/pulumi/pulumi/sdk/v3 of the same release)
#   pulumi-language-python-exec     the SDK's program runner script (from the sdk/v3 module)
#   pulumi-resource-pulumi-python   the SDK's dynamic-provider launcher (from the sdk/v3 module)
#
# Why not `go install .../cmd/pulumi@vX`: pkg/go.mod has replace directives, which `go install` refuses.
# We build in a throwaway wrapper module that requires pkg/v3 and sdk/v3 at the same release and repeats
# the release's non-local replace lines. The upstream language host module
# (sdk/python/cmd/pulumi-language-python/v3) has no tags and is not served by the module proxy we can
# reach, hence our own small host in scripts/pulumi-helpers/.
#
# Environment:
#   PULUMI_VERSION     release to build (default below; must match the `pulumi` Python SDK pin)
#   NETPEER_CACHE_DIR  cache root (default $HOME/.cache/netpeer)
#   GO                 go binary to use (default: `go` on PATH, else /usr/local/go/bin/go)
# Go's own module and build caches (GOMODCACHE, GOCACHE) are used as usual, so rebuilds are fast.
set -euo pipefail

DEFAULT_PULUMI_VERSION=3.259.0
# Bump when the build recipe changes in a way that must invalidate cached binaries.
RECIPE=3

log() { printf 'install-pulumi: %s\n' "$*" >&2; }
die() { printf 'install-pulumi: error: %s\n' "$*" >&2; exit 1; }

ver="${PULUMI_VERSION:-$DEFAULT_PULUMI_VERSION}"
ver="${ver#v}"
[[ "$ver" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "PULUMI_VERSION must look like 3.259.0, got '$ver'"
V="v$ver"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
helper_src="$script_dir/pulumi-helpers/pulumi-language-python/main.go"
[[ -f "$helper_src" ]] || die "missing $helper_src"

cache_root="${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}"
prefix="$cache_root/pulumi/$V"
bin="$prefix/bin"
programs=(pulumi pulumi-language-python pulumi-language-python-exec pulumi-resource-pulumi-python)

# Two parts, each with its own stamp: the CLI with the sdk module's launcher scripts (recipe and
# version), and our Python host (its source). Changing the host rebuilds only the host; the host's stamp
# lives inside bin/, so anything that replaces bin/ wholesale makes it rebuild.
stamp_cli() {
    printf 'recipe=%s version=%s\n' "$RECIPE" "$V" | sha256sum | cut -d' ' -f1
}
stamp_host() {
    { printf 'version=%s\n' "$V"; cat "$helper_src"; } | sha256sum | cut -d' ' -f1
}

cli_ok() {
    local p
    for p in pulumi pulumi-language-python-exec pulumi-resource-pulumi-python; do
        [[ -x "$bin/$p" && -f "$bin/$p" ]] || return 1
    done
    [[ -f "$prefix/.stamp-cli" && "$(cat "$prefix/.stamp-cli")" == "$(stamp_cli)" ]] || return 1
    [[ "$(PULUMI_SKIP_UPDATE_CHECK=true "$bin/pulumi" version 2>/dev/null)" == "$V" ]] || return 1
}

host_ok() {
    [[ -x "$bin/pulumi-language-python" && -f "$bin/.stamp-python-host" ]] || return 1
    [[ "$(cat "$bin/.stamp-python-host")" == "$(stamp_host)" ]]
}

cached_ok() {
    cli_ok && host_ok
}

if cached_ok; then
    log "pulumi $V already built: $bin"
    printf '%s\n' "$bin"
    exit 0
fi

# --- Go toolchain and one builder at a time ------------------------------------------------
. "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"
find_go "pulumi $V"
build_lock cached_ok "$bin" "pulumi $V"

if cli_ok; then
    log "building our Python language host against pulumi $V (its source changed)..."
else
    log "building pulumi $V from Go modules (first time, several minutes)..."
fi
start=$(date +%s)

work="$(mktemp -d "${TMPDIR:-/tmp}/netpeer-pulumi-build.XXXXXX")"
stage="$prefix/bin.new.$$"
cleanup() {
    rm -rf "$work" "$stage"
    # Leave no empty version directory behind after a failed first build.
    if [[ ! -d "$bin" ]]; then rm -f "$prefix/.lock" "$prefix/.stamp-cli"; rmdir "$prefix" 2>/dev/null || true; fi
}
trap cleanup EXIT

# Keep the build independent of the caller's Go settings, but keep the caller's caches and proxy.
export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
unset GOOS GOARCH GOBIN

json_field() { # field name, json on stdin
    sed -n "s/^[[:space:]]*\"$1\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" | head -n1
}
mod_json() { # module@version -> `go mod download -json` output (downloads into the module cache)
    local out
    if ! out="$(cd "$work" && "$go_bin" mod download -json "$1" 2>"$work/download.err")"; then
        die "cannot download $1 from the Go module proxy: $(json_field Error <<<"$out"; cat "$work/download.err")"
    fi
    printf '%s\n' "$out"
}

cat >"$work/go.mod" <<EOF
module netpeer.invalid/pulumi-build

go 1.21
EOF

log "fetching github.com/pulumi/pulumi/{pkg,sdk}/v3@$V module metadata..."
pkg_json="$(mod_json "github.com/pulumi/pulumi/pkg/v3@$V")"
sdk_json="$(mod_json "github.com/pulumi/pulumi/sdk/v3@$V")"
pkg_gomod="$(json_field GoMod <<<"$pkg_json")"
sdk_dir="$(json_field Dir <<<"$sdk_json")"
[[ -f "$pkg_gomod" && -d "$sdk_dir" ]] || die "module download for $V did not produce pkg go.mod / sdk source"

# The pkg release must build against the sdk of the same release.
grep -Eq "^[[:space:]]*github.com/pulumi/pulumi/sdk/v3 $V([[:space:]]|\$)" "$pkg_gomod" \
    || die "github.com/pulumi/pulumi/pkg/v3@$V does not require sdk/v3 $V; pick another PULUMI_VERSION"

# Go version the release needs vs the one we have.
need_go="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$pkg_gomod" | head -n1)"
have_go="$("$go_bin" env GOVERSION)"; have_go="${have_go#go}"
if [[ -n "$need_go" ]] && [[ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]]; then
    die "pulumi $V needs Go >= $need_go, but $go_bin is go$have_go"
fi

# Non-local replace directives of the release (local ones such as sdk/v3 => ../sdk are dropped).
replaces="$(awk '
    /^replace[[:space:]]*\($/ { inblock = 1; next }
    inblock && /^\)/          { inblock = 0; next }
    inblock                   { line = $0; sub(/^[[:space:]]+/, "", line) }
    !inblock && /^replace /   { line = $0; sub(/^replace[[:space:]]+/, "", line) }
    line != "" {
        n = split(line, parts, "=>"); target = parts[2]; gsub(/^[[:space:]]+|[[:space:]]+$/, "", target)
        if (n == 2 && target != "" && target !~ /^\.\.?\// && target !~ /^\//) print "replace " line
        line = ""
    }' "$pkg_gomod")"

cat >"$work/go.mod" <<EOF
module netpeer.invalid/pulumi-build

go ${need_go:-1.21}

require (
	github.com/pulumi/pulumi/pkg/v3 $V
	github.com/pulumi/pulumi/sdk/v3 $V
)

$replaces
EOF
mkdir -p "$work/cmd/pulumi-language-python"
cp "$helper_src" "$work/cmd/pulumi-language-python/main.go"

ldflags="-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$V"
rm -rf "$stage" && mkdir -p "$stage"

build_host() { # into $1
    log "compiling pulumi-language-python..."
    (cd "$work" && "$go_bin" build -p 2 -trimpath -ldflags "$ldflags" -o "$1/pulumi-language-python" \
        ./cmd/pulumi-language-python) || die "go build of pulumi-language-python failed (see messages above)"
    stamp_host >"$1/.stamp-python-host"
}

if cli_ok; then
    # Only the host changed: replace it (and its stamp) in place.
    build_host "$stage"
    mv -f "$stage/pulumi-language-python" "$bin/pulumi-language-python"
    mv -f "$stage/.stamp-python-host" "$bin/.stamp-python-host"
    log "built pulumi-language-python in $(( $(date +%s) - start ))s: $bin"
    printf '%s\n' "$bin"
    exit 0
fi

log "compiling pulumi (the big one; -p 2)..."
(cd "$work" && "$go_bin" build -p 2 -trimpath -ldflags "$ldflags" -o "$stage/pulumi" \
    github.com/pulumi/pulumi/pkg/v3/cmd/pulumi) || die "go build of pulumi $V failed (see messages above)"
build_host "$stage"

# Helper scripts shipped inside the sdk module (read-only, not executable there).
install -m 0755 "$sdk_dir/python/cmd/pulumi-language-python-exec" "$stage/pulumi-language-python-exec"
install -m 0755 "$sdk_dir/python/dist/pulumi-resource-pulumi-python" "$stage/pulumi-resource-pulumi-python"
# Run dynamic providers through netpeer's wrapper when the program's environment has netpeer, so that
# `pulumi import` works for netpeer resources (see provider/netpeer_provider/dynamic_host.py); anything
# else runs the stock server exactly as before.
dyn_py='import importlib.util as u, runpy; runpy.run_module("netpeer_provider.dynamic_host" if u.find_spec("netpeer_provider") else "pulumi.dynamic", run_name="__main__", alter_sys=True)'
grep -q -- '-u -m pulumi.dynamic \$@' "$stage/pulumi-resource-pulumi-python" \
  || die "unexpected pulumi-resource-pulumi-python in the sdk module: cannot add netpeer's import support"
sed -i "s|-u -m pulumi.dynamic \\\$@|-u -c '$dyn_py' \"\\\$@\"|" "$stage/pulumi-resource-pulumi-python"
# Started outside a program (`pulumi import` loading the schema to write code), the launcher knows no
# virtualenv: use the project's (Pulumi.yaml's runtime option), as the program's language host would.
venv_patch='# netpeer: outside a program, the virtualenv of the project in the working directory.
if [ -z "${PULUMI_RUNTIME_VIRTUALENV:-}" ] && [ -z "${PULUMI_PYTHON_CMD:-}" ] && [ -f Pulumi.yaml ]; then
    PULUMI_RUNTIME_VIRTUALENV=$(sed -n "s/^[[:space:]]*virtualenv:[[:space:]]*\"\{0,1\}\([^\"]*\)\"\{0,1\}[[:space:]]*$/\1/p" Pulumi.yaml | head -n 1)
fi'
grep -q '^if \[ -n "\${PULUMI_RUNTIME_VIRTUALENV:-}" \] ; then$' "$stage/pulumi-resource-pulumi-python" \
  || die "unexpected pulumi-resource-pulumi-python in the sdk module: cannot add the project's virtualenv"
PATCH="$venv_patch" awk '/^if \[ -n "\$\{PULUMI_RUNTIME_VIRTUALENV:-\}" \] ; then$/ && !done { print ENVIRON["PATCH"]; print ""; done = 1 } { print }' \
  "$stage/pulumi-resource-pulumi-python" >"$stage/launcher" && mv "$stage/launcher" "$stage/pulumi-resource-pulumi-python"
chmod 0755 "$stage/pulumi-resource-pulumi-python"

got="$(PULUMI_SKIP_UPDATE_CHECK=true "$stage/pulumi" version 2>/dev/null || true)"
[[ "$got" == "$V" ]] || die "built pulumi reports version '$got', expected $V"

rm -rf "$bin"
mv "$stage" "$bin"
stamp_cli >"$prefix/.stamp-cli"

log "built pulumi $V in $(( $(date +%s) - start ))s: $bin"
printf '%s\n' "$bin"
