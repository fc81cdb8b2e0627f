#!/usr/bin/env bash
# Build OpenTofu from its Go module, once, and cache it, with Python stubs of its provider protocol.
#
#   TOFU_BIN=$(bash scripts/install-opentofu.sh)   # last stdout line = the bin directory
#   export PATH="$TOFU_BIN:$PATH"
#
# Result under ${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}/opentofu/vX.Y.Z/:
#   bin/tofu                   the real CLI (github.com/opentofu/opentofu/cmd/tofu, release ldflags)
#   python/netpeer_tfplugin/   Python gRPC stubs of the provider protocol, generated here from
#                              tfplugin6.proto (in the OpenTofu module) and go-plugin's
#                              grpc_controller.proto and grpc_stdio.proto (in the github.com/hashicorp/go-plugin
#                              module at the version OpenTofu requires); netpeer_provider.tofu imports them.
#
# Why not `go install .../cmd/tofu@vX`: OpenTofu's go.mod has a replace directive, which `go install`
# refuses. We copy the module out of the module cache and `go build ./cmd/tofu` inside it.
#
# Trimming: netpeer only ever runs tofu with the local backend. Unless OPENTOFU_ALL_BACKENDS=1, the
# copied source is edited before the build so that the remote-state backends with big SDKs (s3, azurerm,
# gcs, kubernetes, oss, cos, consul, pg, http) and the cloud KMS key providers of state encryption
# (aws_kms, gcp_kms, azure_vault) are not linked. That removes ~500 of ~1,800 packages from a cold
# build: its CPU time drops from ~600 s to ~340 s, a 115 MB binary becomes 69 MB. A configuration
# naming one of those backends then fails with tofu's own "unsupported backend" error. `local`,
# `inmem`, `remote` and `cloud` stay, as do the pbkdf2/openbao/external key providers.
#
# Environment:
#   OPENTOFU_VERSION        release to build (default below)
#   OPENTOFU_ALL_BACKENDS   1 = build the untrimmed upstream source (all backends)
#   NETPEER_CACHE_DIR       cache root (default $HOME/.cache/netpeer)
#   NETPEER_GOCACHE         Go build cache (default $NETPEER_CACHE_DIR/go-build)
#   NETPEER_GOMODCACHE      Go module cache (default $NETPEER_CACHE_DIR/go-mod)
#   GO                      go binary to use (default: `go` on PATH, else /usr/local/go/bin/go)
#   PYTHON                  python with grpcio-tools for the stubs (default: the repo's .venv, else python3)
set -euo pipefail

DEFAULT_OPENTOFU_VERSION=1.12.6
# Bump when the build recipe changes in a way that must invalidate cached results.
RECIPE=1

log() { printf 'install-opentofu: %s\n' "$*" >&2; }
die() { printf 'install-opentofu: error: %s\n' "$*" >&2; exit 1; }

ver="${OPENTOFU_VERSION:-$DEFAULT_OPENTOFU_VERSION}"
ver="${ver#v}"
[[ "$ver" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "OPENTOFU_VERSION must look like 1.12.6, got '$ver'"
V="v$ver"
all_backends="${OPENTOFU_ALL_BACKENDS:-0}"
[[ "$all_backends" == 0 || "$all_backends" == 1 ]] || die "OPENTOFU_ALL_BACKENDS must be 0 or 1"

repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}"
prefix="$cache_root/opentofu/$V"
bin="$prefix/bin"
pydir="$prefix/python"
stub_pkg=netpeer_tfplugin

if [[ -n "${PYTHON:-}" ]]; then
    py="$PYTHON"
elif [[ -x "$repo_dir/.venv/bin/python" ]]; then
    py="$repo_dir/.venv/bin/python"
else
    py=python3
fi
# The stubs are generated from inside a work directory: a relative PYTHON (setup.sh passes .venv/bin/python)
# must not change meaning there.
[[ "$py" != */* ]] || py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"

bin_stamp_value() { printf 'recipe=%s version=%s all_backends=%s\n' "$RECIPE" "$V" "$all_backends"; }
py_stamp_value() {
    printf 'recipe=%s version=%s tools=%s\n' "$RECIPE" "$V" \
        "$("$py" -c 'import importlib.metadata as m; print(m.version("grpcio-tools"), m.version("protobuf"))' 2>/dev/null)"
}

# `tofu version` prints "OpenTofu vX.Y.Z" (no "-dev" with the release ldflags); an empty CLI config
# keeps warnings about the caller's config file out of its output.
# (grep reads it all: with -q it could exit first, and pipefail would then report tofu's SIGPIPE.)
version_ok() { CHECKPOINT_DISABLE=1 TF_CLI_CONFIG_FILE=/dev/null "$1" version 2>/dev/null | grep -x "OpenTofu $V" >/dev/null; }
bin_ok() {
    [[ -x "$bin/tofu" && -f "$prefix/.stamp" && "$(cat "$prefix/.stamp")" == "$(bin_stamp_value)" ]] || return 1
    version_ok "$bin/tofu"
}
stubs_ok() {
    [[ -f "$pydir/.stamp" && "$(cat "$pydir/.stamp")" == "$(py_stamp_value)" ]] || return 1
    PYTHONPATH="$pydir" "$py" -c "import $stub_pkg.tfplugin6_pb2_grpc, $stub_pkg.grpc_controller_pb2_grpc" 2>/dev/null
}

tofu_cached() { bin_ok && stubs_ok; }

if tofu_cached; then
    log "tofu $V already built: $bin"
    printf '%s\n' "$bin"
    exit 0
fi

# --- Go toolchain and one builder at a time ------------------------------------------------
. "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"
find_go "tofu $V"
"$py" -c 'import grpc_tools.protoc' 2>/dev/null \
    || die "$py lacks grpcio-tools (needed for the provider protocol stubs): pip install -e '.[dev]'"
build_lock tofu_cached "$bin" "tofu $V"

start=$(date +%s)
work="$(mktemp -d "${TMPDIR:-/tmp}/netpeer-tofu-build.XXXXXX")"
stage="$prefix/bin.new.$$"
pystage="$prefix/python.new.$$"
cleanup() {
    rm -rf "$work" "$stage" "$pystage"
    # Leave no empty version directory behind after a failed first build.
    if [[ ! -d "$bin" && ! -d "$pydir" ]]; then rm -f "$prefix/.lock" "$prefix/.stamp"; rmdir "$prefix" 2>/dev/null || true; fi
}
trap cleanup EXIT

# Keep the build independent of the caller's Go settings; keep Go's caches beside ours, so that a later
# build (another version, CI on this machine) reuses them. -modcacherw keeps the module cache removable
# with a plain rm -rf.
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-modcacherw -buildvcs=false"
export GOCACHE="${NETPEER_GOCACHE:-$cache_root/go-build}" GOMODCACHE="${NETPEER_GOMODCACHE:-$cache_root/go-mod}"
unset GOOS GOARCH GOBIN

json_field() { # field name, json on stdin
    sed -n "s/^[[:space:]]*\"$1\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" | head -n1
}
mod_dir() { # module@version -> its directory in the module cache (downloads it)
    local out
    if ! out="$(cd "$work" && "$go_bin" mod download -json "$1" 2>"$work/download.err")"; then
        die "cannot download $1 from the Go module proxy: $(json_field Error <<<"$out"; cat "$work/download.err")"
    fi
    out="$(json_field Dir <<<"$out")"
    [[ -d "$out" ]] || die "downloading $1 gave no module directory"
    printf '%s\n' "$out"
}

log "fetching github.com/opentofu/opentofu@$V from the Go module proxy..."
tofu_mod="$(mod_dir "github.com/opentofu/opentofu@$V")"
src="$work/opentofu"
cp -r "$tofu_mod" "$src"
chmod -R u+w "$src"

# --- Trim: unlink the heavy remote-state backends and cloud KMS key providers -------------------------
# Each removal is checked: if upstream moved things, fail here rather than build something unexpected.
drop_lines() { # file, extended regex, expected count, what
    local file="$src/$1" n
    n="$(grep -cE -- "$2" "$file" || true)"
    [[ "$n" == "$3" ]] || die "trimming $1: expected $3 line(s) for $4, found $n (upstream changed: update the trim in $0, or set OPENTOFU_ALL_BACKENDS=1)"
    sed -Ei "\#$2#d" "$file"
}
trim_source() {
    local f=internal/backend/init/init.go b
    for b in Azure Consul Cos GCS HTTP Kubernetes OSS Pg S3; do
        # the import line, and the map entry `"name": func(...) ... { return backendX.New(enc) },`
        drop_lines "$f" "^[[:space:]]*backend$b \"github.com/opentofu/opentofu/internal/backend/remote-state/" 1 "backend$b import"
        drop_lines "$f" "return backend$b\.New\(" 1 "backend$b registration"
    done
    f=internal/encryption/default_registry.go
    local k
    for k in aws_kms gcp_kms azure_vault; do
        drop_lines "$f" "^[[:space:]]*\"github.com/opentofu/opentofu/internal/encryption/keyprovider/$k\"\$" 1 "$k import"
        # `if err := DefaultRegistry.RegisterKeyProvider(k.New()); err != nil { panic(err) }`, on 3 lines
        grep -A2 -E "RegisterKeyProvider\($k\.New\(\)\)" "$src/$f" | tr -d ' \t\n' \
            | grep -x "iferr:=DefaultRegistry.RegisterKeyProvider($k.New());err!=nil{panic(err)}" >/dev/null \
            || die "trimming $f: the registration of $k no longer looks as expected (set OPENTOFU_ALL_BACKENDS=1 to skip trimming)"
        sed -Ei "/RegisterKeyProvider\($k\.New\(\)\)/,+2d" "$src/$f"
    done
}

if [[ "$all_backends" == 1 ]]; then
    log "building with all upstream backends (OPENTOFU_ALL_BACKENDS=1)"
else
    trim_source
    log "trimmed: remote-state backends other than local/inmem/remote/cloud and cloud KMS key providers are not linked"
fi

# --- Build ------------------------------------------------------------------------------------------
if ! bin_ok; then
    need_go="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$src/go.mod" | head -n1)"
    have_go="$("$go_bin" env GOVERSION)"; have_go="${have_go#go}"
    if [[ -n "$need_go" ]] && [[ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]]; then
        die "tofu $V needs Go >= $need_go, but $go_bin is go$have_go"
    fi
    # The release flags (.goreleaser.yaml): no cgo, -trimpath, stripped, and version.dev=no so that
    # `tofu version` prints the release and not a -dev build. -trimpath also keeps the cache keys free of
    # our temporary source directory, so a rebuild from another copy hits the cache. `go build` fetches
    # the modules it needs (not all of go.mod's: the trimmed backends' SDKs are never downloaded).
    log "compiling tofu $V (first time: 3 to 10 minutes on 2 cores, as busy as they are; progress is silent)..."
    rm -rf "$stage" && mkdir -p "$stage"
    (cd "$src" && "$go_bin" build -mod=readonly -trimpath \
        -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$stage/tofu" ./cmd/tofu) \
        || die "go build of tofu $V failed (see messages above)"
    version_ok "$stage/tofu" || die "built tofu does not report 'OpenTofu $V': $(TF_CLI_CONFIG_FILE=/dev/null "$stage/tofu" version 2>&1 | head -n3)"
    rm -rf "$bin"
    mv "$stage" "$bin"
    bin_stamp_value >"$prefix/.stamp"
    log "built tofu $V in $(( $(date +%s) - start ))s: $bin"
fi

# --- Python stubs of the provider protocol ----------------------------------------------------------
if ! stubs_ok; then
    # The tfplugin6 minor version this release speaks, from the header of its generated Go code.
    minor="$(sed -n 's|^// Terraform Plugin RPC protocol version 6\.\([0-9][0-9]*\)$|\1|p' \
        "$src/internal/tfplugin6/tfplugin6.pb.go" | head -n1)"
    [[ -n "$minor" ]] || die "cannot tell the tfplugin6 protocol version of tofu $V (internal/tfplugin6/tfplugin6.pb.go)"
    tfproto="$src/docs/plugin-protocol/tfplugin6.$minor.proto"
    [[ -f "$tfproto" ]] || die "tofu $V speaks tfplugin6.$minor but has no docs/plugin-protocol/tfplugin6.$minor.proto"

    gp_ver="$(awk '$1 == "github.com/hashicorp/go-plugin" { print $2; exit }' "$src/go.mod")"
    [[ -n "$gp_ver" ]] || die "tofu $V does not require github.com/hashicorp/go-plugin: cannot find the plugin protocol"
    gp_dir="$(mod_dir "github.com/hashicorp/go-plugin@$gp_ver")"

    # Placed under a package directory so that the generated code imports its siblings by package name.
    protos="$work/proto/$stub_pkg"
    mkdir -p "$protos"
    cp "$tfproto" "$protos/tfplugin6.proto"
    for p in grpc_controller grpc_stdio; do
        [[ -f "$gp_dir/internal/plugin/$p.proto" ]] || die "go-plugin $gp_ver has no internal/plugin/$p.proto"
        cp "$gp_dir/internal/plugin/$p.proto" "$protos/$p.proto"
    done
    log "generating Python stubs of tfplugin6.$minor and go-plugin $gp_ver..."
    rm -rf "$pystage" && mkdir -p "$pystage/$stub_pkg"
    (cd "$work/proto" && "$py" -m grpc_tools.protoc -I . --python_out="$pystage" --pyi_out="$pystage" \
        --grpc_python_out="$pystage" "$stub_pkg"/*.proto) || die "generating the Python stubs failed"
    printf '"""Generated at setup time by scripts/install-opentofu.sh from tfplugin6.%s (OpenTofu %s) and go-plugin %s."""\n' \
        "$minor" "$V" "$gp_ver" >"$pystage/$stub_pkg/__init__.py"
    printf '6.%s\n' "$minor" >"$pystage/$stub_pkg/PROTOCOL_VERSION"
    PYTHONPATH="$pystage" "$py" -c "import $stub_pkg.tfplugin6_pb2_grpc, $stub_pkg.grpc_controller_pb2_grpc, $stub_pkg.grpc_stdio_pb2_grpc" \
        || die "the generated stubs do not import"
    py_stamp_value >"$pystage/.stamp"
    rm -rf "$pydir"
    mv "$pystage" "$pydir"
    log "provider protocol stubs: $pydir"
fi

printf '%s\n' "$bin"
