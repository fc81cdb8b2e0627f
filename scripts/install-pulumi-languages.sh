#!/usr/bin/env bash
# Let the Pulumi CLI run YAML and TypeScript/JavaScript programs, offline, with a TypeScript SDK of
# netpeer's package generated from schema/pulumi/schema.json. Builds once and caches.
#
#   . "$(bash scripts/install-pulumi-languages.sh)"   # last stdout line = an env file to source
#   pulumi up                                          # in a YAML or TypeScript program
#
# Result: ${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}/pulumi-languages/vX.Y.Z/ (X.Y.Z = the CLI release)
#   bin/pulumi-language-yaml     the YAML language host (github.com/pulumi/pulumi-yaml, built from its module)
#   bin/pulumi-language-nodejs   our Node.js host (scripts/pulumi-helpers/pulumi-language-nodejs): runs
#                                programs with the machine's node through @pulumi/pulumi's own runner
#   bin/netpeer-gen-sdk          SDK generator on Pulumi's code generators (scripts/pulumi-helpers/gen-sdk)
#   node_modules/                @pulumi/pulumi, typescript, ts-node, @types/node (exact pins below) and
#                                the generated, compiled TypeScript SDK (package name from the schema,
#                                @netpeer/pulumi); programs without node_modules of their own use this one
#   sdk/nodejs/                  the generated TypeScript sources of that SDK (for reading)
#   env.sh                       PATH and NETPEER_PULUMI_NODE_MODULES for a shell
# The two language hosts are also linked into the CLI's own bin directory (scripts/install-pulumi.sh,
# run first), where the CLI looks for its language plugins first; so that directory on PATH is enough.
#
# Why built here: the module proxy serves neither the upstream Node.js host nor `@latest` of pulumi-yaml,
# and no registry ships these binaries. pulumi-yaml v1.32.0 does not compile against the CLI's pkg/v3, so it
# is built in a wrapper module of its own that requires only pulumi-yaml (which resolves pkg/v3 3.230.0).
# @pulumi/pulumi is pinned to the newest release that supports Node.js 20 (later ones need 22); it talks
# to the 3.259 engine over the same stable gRPC protocol.
#
# Environment:
#   PULUMI_VERSION       CLI release (default: scripts/install-pulumi.sh's)
#   PULUMI_YAML_VERSION  pulumi-yaml release (default below; only exact versions are served)
#   NETPEER_CACHE_DIR    cache root (default $HOME/.cache/netpeer)
#   GO                   go binary to use (default: `go` on PATH, else /usr/local/go/bin/go)
# Without node/npm (or with node < 20) the TypeScript parts are skipped with a warning; YAML still works.
set -euo pipefail

DEFAULT_PULUMI_YAML_VERSION=1.32.0
NPM_PINS=("@pulumi/pulumi@3.248.0" "typescript@5.9.3" "ts-node@10.9.2" "@types/node@20.19.43")
NODE_MAJOR_MIN=20
# Bump when the build recipe changes in a way that must invalidate cached results.
RECIPE=1

log() { printf 'install-pulumi-languages: %s\n' "$*" >&2; }
die() { printf 'install-pulumi-languages: error: %s\n' "$*" >&2; exit 1; }

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(cd "$script_dir/.." && pwd)"
node_host_src="$script_dir/pulumi-helpers/pulumi-language-nodejs/main.go"
gen_sdk_src="$script_dir/pulumi-helpers/gen-sdk/main.go"
schema="$repo_dir/schema/pulumi/schema.json"
for f in "$node_host_src" "$gen_sdk_src" "$schema"; do [[ -f "$f" ]] || die "missing $f"; done

yaml_ver="${PULUMI_YAML_VERSION:-$DEFAULT_PULUMI_YAML_VERSION}"
yaml_ver="v${yaml_ver#v}"

# The CLI first (cached after its first build); its last stdout line is its bin directory.
cli_bin="$(bash "$script_dir/install-pulumi.sh" | tail -n1)"
[[ -x "$cli_bin/pulumi" ]] || die "scripts/install-pulumi.sh did not produce a pulumi binary"
V="$(PULUMI_SKIP_UPDATE_CHECK=true "$cli_bin/pulumi" version 2>/dev/null)"
[[ "$V" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "cannot tell the version of $cli_bin/pulumi"

cache_root="${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}"
prefix="$cache_root/pulumi-languages/$V"
bin="$prefix/bin"
nm="$prefix/node_modules"
env_file="$prefix/env.sh"

hash() { sha256sum | cut -d' ' -f1; }
stamp_go()   { { echo "recipe=$RECIPE cli=$V"; cat "$node_host_src" "$gen_sdk_src"; } | hash; }
stamp_yaml() { echo "recipe=$RECIPE yaml=$yaml_ver" | hash; }
stamp_npm()  { echo "recipe=$RECIPE pins=${NPM_PINS[*]}" | hash; }
stamp_sdk()  { { echo "recipe=$RECIPE"; stamp_go; stamp_npm; cat "$schema"; } | hash; }
stamp_is() { [[ -f "$prefix/.stamp-$1" && "$(cat "$prefix/.stamp-$1")" == "$2" ]]; }

# Node.js present and recent enough? (decides whether the TypeScript parts are wanted)
want_node=1
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    want_node=0; node_why="node/npm not found"
elif ! node -e "process.exit(+process.versions.node.split('.')[0] >= $NODE_MAJOR_MIN ? 0 : 1)" 2>/dev/null; then
    want_node=0; node_why="node $(node --version) is older than $NODE_MAJOR_MIN"
fi

sdk_name() { # npm package name of the generated SDK
    sed -n 's/^ *"packageName": *"\([^"]*\)".*/\1/p' "$schema" | head -n1
}

links_ok() {
    local p
    for p in pulumi-language-yaml pulumi-language-nodejs; do
        [[ -x "$cli_bin/$p" && "$(readlink "$cli_bin/$p")" == "$bin/$p" ]] || return 1
    done
}

cached_ok() {
    stamp_is go "$(stamp_go)" && [[ -x "$bin/pulumi-language-nodejs" && -x "$bin/netpeer-gen-sdk" ]] || return 1
    stamp_is yaml "$(stamp_yaml)" && [[ -x "$bin/pulumi-language-yaml" ]] || return 1
    if [[ $want_node == 1 ]]; then
        stamp_is npm "$(stamp_npm)" && [[ -f "$nm/@pulumi/pulumi/cmd/run/index.js" ]] || return 1
        stamp_is sdk "$(stamp_sdk)" && [[ -f "$nm/$(sdk_name)/package.json" ]] || return 1
    fi
    links_ok && [[ -f "$env_file" ]]
}

if cached_ok; then
    log "language hosts for pulumi $V already installed: $prefix"
    [[ $want_node == 1 ]] || log "warning: $node_why: TypeScript programs cannot run"
    printf '%s\n' "$env_file"
    exit 0
fi

# --- Go toolchain and one builder at a time ------------------------------------------------
. "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"
find_go "the language hosts for pulumi $V"
build_lock cached_ok "$env_file" "the language hosts for pulumi $V"

start=$(date +%s)
work="$(mktemp -d "${TMPDIR:-/tmp}/netpeer-pulumi-lang.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$bin"

export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
unset GOOS GOARCH GOBIN

json_field() { # field name, json on stdin
    sed -n "s/^[[:space:]]*\"$1\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" | head -n1
}
mod_json() { # dir, module@version -> `go mod download -json` output
    local out
    if ! out="$(cd "$1" && "$go_bin" mod download -json "$2" 2>"$work/download.err")"; then
        die "cannot download $2 from the Go module proxy: $(json_field Error <<<"$out"; cat "$work/download.err")"
    fi
    printf '%s\n' "$out"
}
check_go() { # go.mod path: the Go version it asks for must not exceed ours
    local need have
    need="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$1" | head -n1)"
    have="$("$go_bin" env GOVERSION)"; have="${have#go}"
    if [[ -n "$need" ]] && [[ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]]; then
        die "$2 needs Go >= $need, but $go_bin is go$have"
    fi
    printf '%s\n' "${need:-1.21}"
}

# --- our Node.js host and the SDK generator, against the CLI's own pkg/v3 and sdk/v3 ----------------
if ! stamp_is go "$(stamp_go)" || [[ ! -x "$bin/pulumi-language-nodejs" || ! -x "$bin/netpeer-gen-sdk" ]]; then
    w="$work/pulumi"; mkdir -p "$w/cmd/pulumi-language-nodejs" "$w/cmd/netpeer-gen-sdk"
    printf 'module netpeer.invalid/pulumi-languages\n\ngo 1.21\n' >"$w/go.mod"
    pkg_gomod="$(mod_json "$w" "github.com/pulumi/pulumi/pkg/v3@$V" | json_field GoMod)"
    [[ -f "$pkg_gomod" ]] || die "module download of pkg/v3@$V did not produce its go.mod"
    need_go="$(check_go "$pkg_gomod" "github.com/pulumi/pulumi/pkg/v3@$V")"
    # Non-local replace directives of the release, as scripts/install-pulumi.sh does.
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
    cat >"$w/go.mod" <<EOF
module netpeer.invalid/pulumi-languages

go $need_go

require (
	github.com/pulumi/pulumi/pkg/v3 $V
	github.com/pulumi/pulumi/sdk/v3 $V
)

$replaces
EOF
    cp "$node_host_src" "$w/cmd/pulumi-language-nodejs/main.go"
    cp "$gen_sdk_src" "$w/cmd/netpeer-gen-sdk/main.go"
    ldflags="-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$V"
    log "compiling pulumi-language-nodejs and netpeer-gen-sdk against pulumi $V..."
    (cd "$w" && "$go_bin" build -p 2 -trimpath -ldflags "$ldflags" -o "$w/out/" \
        ./cmd/pulumi-language-nodejs ./cmd/netpeer-gen-sdk) || die "go build of the Node.js host / gen-sdk failed"
    mv -f "$w/out/pulumi-language-nodejs" "$w/out/netpeer-gen-sdk" "$bin/"
    stamp_go >"$prefix/.stamp-go"
fi

# --- the YAML host, in a wrapper module that requires only pulumi-yaml --------------------------------
if ! stamp_is yaml "$(stamp_yaml)" || [[ ! -x "$bin/pulumi-language-yaml" ]]; then
    w="$work/yaml"; mkdir -p "$w"
    printf 'module netpeer.invalid/pulumi-yaml\n\ngo 1.21\n' >"$w/go.mod"
    yaml_gomod="$(mod_json "$w" "github.com/pulumi/pulumi-yaml@$yaml_ver" | json_field GoMod)"
    [[ -f "$yaml_gomod" ]] || die "module download of pulumi-yaml@$yaml_ver did not produce its go.mod"
    need_go="$(check_go "$yaml_gomod" "github.com/pulumi/pulumi-yaml@$yaml_ver")"
    printf 'module netpeer.invalid/pulumi-yaml\n\ngo %s\n\nrequire github.com/pulumi/pulumi-yaml %s\n' \
        "$need_go" "$yaml_ver" >"$w/go.mod"
    log "compiling pulumi-language-yaml $yaml_ver (about 2-4 minutes the first time)..."
    (cd "$w" && "$go_bin" build -p 2 -trimpath \
        -ldflags "-X github.com/pulumi/pulumi-yaml/pkg/version.Version=$yaml_ver" \
        -o "$w/pulumi-language-yaml" github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml) \
        || die "go build of pulumi-language-yaml $yaml_ver failed"
    mv -f "$w/pulumi-language-yaml" "$bin/"
    stamp_yaml >"$prefix/.stamp-yaml"
fi

if [[ $want_node == 1 ]]; then
    # --- npm packages for programs ---------------------------------------------------------------------
    if ! stamp_is npm "$(stamp_npm)" || [[ ! -f "$nm/@pulumi/pulumi/cmd/run/index.js" ]]; then
        w="$work/npm"; mkdir -p "$w"
        printf '{"name": "netpeer-pulumi-programs", "private": true}\n' >"$w/package.json"
        log "installing ${NPM_PINS[*]} from npm (about a minute the first time)..."
        (cd "$w" && npm install --no-audit --no-fund --prefer-offline --loglevel=error --save-exact \
            "${NPM_PINS[@]}" >&2) || die "npm install failed"
        rm -rf "$nm" "$prefix/package.json" "$prefix/package-lock.json" "$prefix/.stamp-sdk"
        mv "$w/node_modules" "$nm"
        mv "$w/package.json" "$w/package-lock.json" "$prefix/"
        stamp_npm >"$prefix/.stamp-npm"
    fi

    # --- the TypeScript SDK from our schema: generate, compile, install into node_modules ---------------
    name="$(sdk_name)"
    [[ -n "$name" ]] || die "$schema has no language.nodejs.packageName"
    if ! stamp_is sdk "$(stamp_sdk)" || [[ ! -f "$nm/$name/package.json" ]]; then
        log "generating and compiling the TypeScript SDK $name from schema/pulumi/schema.json..."
        w="$work/sdk"
        "$bin/netpeer-gen-sdk" --schema "$schema" --language nodejs --out "$w/src" || die "SDK generation failed"
        ln -s "$nm" "$w/src/node_modules"
        (cd "$w/src" && node "$nm/typescript/bin/tsc" -p . >&2) || die "the generated TypeScript SDK does not compile"
        rm "$w/src/node_modules"
        cp "$w/src/package.json" "$w/src/README.md" "$w/src/bin/"
        rm -rf "$nm/$name" "$prefix/sdk/nodejs"
        mkdir -p "$(dirname "$nm/$name")" "$prefix/sdk"
        mv "$w/src/bin" "$nm/$name"
        mv "$w/src" "$prefix/sdk/nodejs"
        stamp_sdk >"$prefix/.stamp-sdk"
    fi
else
    log "warning: $node_why: skipping the TypeScript parts (YAML programs still work)"
fi

# --- link the hosts next to the CLI (no "using ... from \$PATH" warnings), and the env file -----------
for p in pulumi-language-yaml pulumi-language-nodejs; do
    ln -sfn "$bin/$p" "$cli_bin/$p"
done
cat >"$env_file.new" <<EOF
# Pulumi CLI with YAML and Node.js language hosts (written by scripts/install-pulumi-languages.sh).
export PATH="$cli_bin:$bin:\$PATH"
export NETPEER_PULUMI_NODE_MODULES="$nm"
EOF
mv "$env_file.new" "$env_file"

log "installed in $(( $(date +%s) - start ))s: $prefix"
printf '%s\n' "$env_file"
