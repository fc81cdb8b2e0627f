#!/usr/bin/env bash
# Build netpeer's packages from this tree into dist/ (`make packages`), offline but for PyPI/npm's caches:
#
#   dist/netpeer-V-py3-none-any.whl                 the CLI, the daemon, the Python SDK and providers
#   dist/pulumi-resource-netpeer-vV-linux-amd64.tar.gz
#                                                   the Pulumi plugin: `pulumi plugin install resource
#                                                   netpeer V --file <it>`
#   dist/opentofu/mirror/registry.opentofu.org/netpeer/netpeer/terraform-provider-netpeer_V_linux_amd64.zip
#   dist/opentofu/mirror/registry.terraform.io/...  the same zip, for Terraform: a filesystem mirror
#                                                   in OpenTofu/Terraform's packed layout
#   dist/opentofu/.terraform.lock.hcl               its checksums (h1: and zh:), for a root module
#   dist/netpeer-pulumi-V.tgz                       the TypeScript SDK (`npm install ./netpeer-pulumi-V.tgz`;
#                                                   skipped, with a warning, without node/npm)
#
# The plugin and the provider are self-contained: the wheel installed with its dependencies
# (`pip install --target`) under lib/ next to a small launcher that runs them with a Python 3.N of the
# build's minor version (the build interpreter's base, else `python3.N` on PATH), with -I -S: neither the
# caller's environment nor any checkout or venv is on its path. The OpenTofu provider also carries the
# tfplugin6 stubs (scripts/install-opentofu.sh generates them), so it installs into any HOME.
#
# Cached by content: each part is rebuilt only when the hash of its inputs (the tree's sources, this
# script, the interpreter, the stubs) changed; a cached run takes about a second, a cold one ~30 s.
# Every file is written next to its final name and renamed into place. The last stdout line is dist/.
#
# Arguments: the parts to build, among wheel plugin tofu npm (default: all; the wheel is always built).
# Environment: PYTHON (the interpreter with pip and setuptools; default .venv/bin/python), NETPEER_CACHE_DIR
# (OpenTofu and its stubs; default the account's ~/.cache/netpeer, whatever HOME says).
set -euo pipefail

log() { printf 'build-packages: %s\n' "$*" >&2; }
die() { printf 'build-packages: error: %s\n' "$*" >&2; exit 1; }

repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_dir"
py="${PYTHON:-$repo_dir/.venv/bin/python}"
[[ -x "$py" ]] || die "no Python at $py: run scripts/setup.sh first (or set PYTHON)"
py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"  # absolute: the build runs in other directories
[[ -x "$py" ]] || die "no Python at $py: run scripts/setup.sh first (or set PYTHON)"
dist="$repo_dir/dist"
mkdir -p "$dist"
parts=" ${*:-wheel plugin tofu npm} "
for part in $parts; do [[ "$part" =~ ^(wheel|plugin|tofu|npm)$ ]] || die "unknown part '$part'"; done
want() { [[ "$parts" == *" $1 "* ]]; }
# The build caches (OpenTofu, Pulumi's toolchain) are the account's, also when HOME names another home.
cache="${NETPEER_CACHE_DIR:-$(getent passwd "$(id -u)" | cut -d: -f6)/.cache/netpeer}"

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n1)"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "odd version '$version' in pyproject.toml"
case "$(uname -m)" in
  x86_64|amd64) arch=amd64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) die "unsupported machine $(uname -m)" ;;
esac
os="$(uname -s | tr '[:upper:]' '[:lower:]')"
# The interpreter the launchers run: the build's base interpreter (not its venv), and its minor version.
read -r base_py py_minor < <("$py" -c 'import os, sys; print(os.path.realpath(sys._base_executable), "%d.%d" % sys.version_info[:2])')

work="$(mktemp -d "${TMPDIR:-/tmp}/netpeer-packages.XXXXXX")"
trap 'rm -rf "$work"' EXIT

hash() { sha256sum | cut -c1-16; }
# The sources that go into the wheel: what git tracks or would track (new files too), never build/ leftovers.
# Outside git (a copy of the tree), the files themselves, less Python's caches.
sources() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files -co --exclude-standard -- pyproject.toml README.md netpeer dev provider sdk schema
    else
        find pyproject.toml README.md netpeer dev provider sdk schema -type f ! -name '*.pyc' \
            ! -path '*/__pycache__/*' ! -path '*.egg-info/*'
    fi
}
src_hash="$({ echo "version=$version python=$py_minor $base_py"; cat "${BASH_SOURCE[0]}";
              sources | sort | while IFS= read -r f; do
                  if [[ -f "$f" ]]; then printf '%s %s\n' "$f" "$(sha256sum <"$f")"; fi; done
            } | hash)"
stamp_is() { [[ -f "$dist/.stamp-$1" && "$(cat "$dist/.stamp-$1")" == "$2" ]]; }
stamp() { printf '%s\n' "$2" >"$dist/.stamp-$1"; }
# put SRC DEST: rename into place (same file system: the temp file is made next to DEST).
put() { local tmp; mkdir -p "$(dirname "$2")"; tmp="$(mktemp "$(dirname "$2")/.tmp.XXXXXX")"
        cp "$1" "$tmp"; chmod 0644 "$tmp"; mv -f "$tmp" "$2"; }

# --- the wheel --------------------------------------------------------------------------------------
wheel="$dist/netpeer-$version-py3-none-any.whl"
if ! stamp_is wheel "$src_hash" || [[ ! -f "$wheel" ]]; then
    log "building the wheel netpeer $version..."
    mkdir "$work/src"
    sources | while IFS= read -r f; do if [[ -f "$f" ]]; then printf '%s\0' "$f"; fi; done | xargs -0 cp --parents -t "$work/src"
    # No build time in the archive (SOURCE_DATE_EPOCH): the same sources give the same wheel.
    SOURCE_DATE_EPOCH=315532800 "$py" -m pip wheel -q --no-deps --no-build-isolation -w "$work/wheel" "$work/src" >&2 \
        || die "pip wheel failed"
    put "$work/wheel/netpeer-$version-py3-none-any.whl" "$wheel"
    stamp wheel "$src_hash"
fi

# Compiled once (.pyc checked by hash, not mtime: valid wherever the files land), with paths relative
# to lib/ in the code objects: the same sources give the same bytes, so the checksums of a rebuild match.
compile() { "$py" -m compileall -q -j 0 --invalidation-mode unchecked-hash -s "$1" -p lib "$1" >/dev/null \
                || die "compileall failed"; }
# lib DIR EXTRAS: the wheel and its dependencies under DIR.
lib() {
    "$py" -m pip install -q --no-compile --disable-pip-version-check --target "$1" "$wheel[$2]" >&2 \
        || die "installing the wheel's dependencies into a package failed"
    rm -rf "$1/bin" "$1"/*.dist-info/direct_url.json   # the latter names this build's temp dir
    compile "$1"
}
# launcher FILE WHAT MODULE PREAMBLE ARGS: the executable that runs MODULE ARGS from lib/ next to FILE.
launcher() {
    local file="$1" what="$2" module="$3" preamble="$4" args="$5"
    cat >"$file" <<EOF
#!/bin/sh
# $what, version $version (scripts/build-packages.sh).
# Self-contained: runs lib/ next to this file with Python $py_minor (NETPEER_PLUGIN_PYTHON, else the
# build's interpreter, else python$py_minor on PATH); -I -S: only the standard library and lib/ are on
# its path, nothing of a checkout or of a venv.
here=\$(dirname "\$(readlink -f "\$0")")
py=\${NETPEER_PLUGIN_PYTHON:-$base_py}
[ -x "\$py" ] || py=python$py_minor
$preamble
exec "\$py" -I -S -c "import site, sys, runpy; site.addsitedir(sys.argv.pop(1)); runpy.run_module('$module', run_name='__main__', alter_sys=True)" "\$here/lib" $args"\$@"
EOF
    chmod 0755 "$file"
}

# --- the Pulumi plugin --------------------------------------------------------------------------------
plugin="$dist/pulumi-resource-netpeer-v$version-$os-$arch.tar.gz"
if want plugin && { ! stamp_is plugin "$src_hash" || [[ ! -f "$plugin" ]]; }; then
    log "building the Pulumi plugin $(basename "$plugin")..."
    p="$work/plugin"; mkdir -p "$p"
    lib "$p/lib" pulumi
    launcher "$p/pulumi-resource-netpeer" "netpeer's Pulumi provider plugin" netpeer_provider.plugin "" ""
    printf '%s\n' "$src_hash" >"$p/.netpeer-build"   # what scripts/install-pulumi-plugin.sh compares
    tar -C "$p" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - . | gzip -n >"$work/plugin.tar.gz"
    put "$work/plugin.tar.gz" "$plugin"
    stamp plugin "$src_hash"
fi

# --- the OpenTofu/Terraform provider, as a filesystem mirror --------------------------------------------
if want tofu; then
    tofu_bin="$(NETPEER_CACHE_DIR="$cache" PYTHON="$py" bash "$repo_dir/scripts/install-opentofu.sh" | tail -n1)"
    stubs="$(dirname "$tofu_bin")/python"
    [[ -f "$stubs/netpeer_tfplugin/__init__.py" ]] || die "no tfplugin6 stubs in $stubs"
    tofu_hash="$({ echo "$src_hash"; find "$stubs/netpeer_tfplugin" -name '*.py' | sort | xargs cat; } | hash)"
    zip_name="terraform-provider-netpeer_${version}_${os}_$arch.zip"
    mirror="$dist/opentofu/mirror"
    lock="$dist/opentofu/.terraform.lock.hcl"
    if ! stamp_is tofu "$tofu_hash" || [[ ! -f "$mirror/registry.opentofu.org/netpeer/netpeer/$zip_name" || ! -f "$lock" ]]; then
        log "building the OpenTofu provider $zip_name..."
        t="$work/tofu"; mkdir -p "$t"
        lib "$t/lib" tofu
        cp -r "$stubs/netpeer_tfplugin" "$t/lib/"
        compile "$t/lib/netpeer_tfplugin"
        launcher "$t/terraform-provider-netpeer_v$version" "netpeer's OpenTofu/Terraform provider" \
            netpeer_provider.tofu 'NETPEER_TOFU_STUBS="$here/lib"; export NETPEER_TOFU_STUBS' \
            'netpeer_provider.tofu.netpeer:NetpeerProvider '
        (cd "$t" && "$py" - "$work/provider.zip" <<'EOF'
# A zip with each file's Unix mode (OpenTofu keeps it when it unpacks: the launcher stays executable).
# Deterministic: sorted, no timestamps.
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
    for root, dirs, files in os.walk("."):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)[2:]
            info = zipfile.ZipInfo(path, (1980, 1, 1, 0, 0, 0))  # no build time: the same bytes each build
            info.external_attr = (os.stat(path).st_mode & 0o777 | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(path, "rb") as f:
                z.writestr(info, f.read(), compresslevel=6)
EOF
        ) || die "zip failed"
        # A throwaway copy of the mirror for `tofu providers lock`: it computes h1: (contents) and zh: (zip).
        m="$work/mirror"
        for host in registry.opentofu.org registry.terraform.io; do
            mkdir -p "$m/$host/netpeer/netpeer"; cp "$work/provider.zip" "$m/$host/netpeer/netpeer/$zip_name"
        done
        mkdir "$work/lock"
        printf 'terraform {\n  required_providers {\n    netpeer = { source = "netpeer/netpeer", version = "%s" }\n  }\n}\n' \
            "$version" >"$work/lock/main.tf"
        (cd "$work/lock" && env -u TF_CLI_CONFIG_FILE HOME="$work" "$tofu_bin/tofu" providers lock -no-color \
            -fs-mirror="$m" -platform="${os}_$arch" >/dev/null) || die "tofu providers lock failed"
        # From a mirror, tofu records h1: (the unpacked contents) only; zh: is the archive's SHA-256, what a
        # registry publishes: with both, the lock file pins the package in either form.
        zh="$(sha256sum "$work/provider.zip" | cut -d' ' -f1)"
        sed -i "s|^\(    \"h1:.*\",\)\$|\1\n    \"zh:$zh\",|" "$work/lock/.terraform.lock.hcl"
        grep -q "zh:$zh" "$work/lock/.terraform.lock.hcl" || die "no h1: checksum in the lock file tofu wrote"
        for host in registry.opentofu.org registry.terraform.io; do
            put "$work/provider.zip" "$mirror/$host/netpeer/netpeer/$zip_name"
        done
        put "$work/lock/.terraform.lock.hcl" "$lock"
        stamp tofu "$tofu_hash"
    fi
fi

# --- the TypeScript SDK -------------------------------------------------------------------------------
if ! want npm; then
    :
elif command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
    # scripts/install-pulumi-languages.sh generates and compiles it from schema/pulumi/schema.json (cached).
    env_file="$(NETPEER_CACHE_DIR="$cache" bash "$repo_dir/scripts/install-pulumi-languages.sh" | tail -n1)" \
        || die "scripts/install-pulumi-languages.sh failed"
    nm="$(sed -n 's/^export NETPEER_PULUMI_NODE_MODULES="\(.*\)"$/\1/p' "$env_file")"
    name="$(sed -n 's/.*"packageName": "\(.*\)".*/\1/p' schema/pulumi/schema.json | head -n1)"
    [[ -n "$name" && -f "$nm/$name/package.json" ]] || die "no TypeScript SDK $name in $nm"
    npm_hash="$({ echo "$src_hash"; find "$nm/$name" -type f | sort | xargs sha256sum; } | hash)"
    tgz="$dist/$(sed 's/^@//; s#/#-#' <<<"$name")-$version.tgz"
    if ! stamp_is npm "$npm_hash" || [[ ! -f "$tgz" ]]; then
        log "packing the TypeScript SDK $(basename "$tgz")..."
        mkdir "$work/npm"
        (cd "$work/npm" && npm pack --silent --pack-destination "$work/npm" "$nm/$name" >/dev/null) || die "npm pack failed"
        put "$work/npm/$(basename "$tgz")" "$tgz"
        stamp npm "$npm_hash"
    fi
else
    log "warning: node/npm not found: no TypeScript SDK package"
fi

printf '%s\n' "$dist"
