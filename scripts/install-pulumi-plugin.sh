#!/usr/bin/env bash
# Install netpeer's Pulumi resource provider plugin (pulumi-resource-netpeer) into a Pulumi home, offline.
#
#   bash scripts/install-pulumi-plugin.sh                 # into ${PULUMI_HOME:-~/.pulumi}
#   PULUMI_HOME=/some/dir bash scripts/install-pulumi-plugin.sh
#   pulumi plugin ls                                      # lists: netpeer  resource  0.1.0
#
# What gets installed is the package that scripts/build-packages.sh makes from this tree
# (dist/pulumi-resource-netpeer-vVERSION-linux-amd64.tar.gz, built or taken from its cache), with
# `pulumi plugin install resource netpeer VERSION --file TARBALL`, as a user would: a self-contained
# plugin (its own copy of netpeer and its dependencies), so it keeps working whatever becomes of this
# checkout or its .venv, and other versions installed beside it stay as they are. VERSION is the
# package version, the one schema/pulumi/schema.json and the generated SDKs ask for. Re-running is cheap
# and safe while a `pulumi up` uses the plugin: when the installed plugin is this very build (same
# sources), nothing is touched. The last stdout line is the plugin's directory.
#
# Environment: PULUMI_HOME, NETPEER_PYTHON (the interpreter that builds the package; default .venv).
set -euo pipefail

log() { printf 'install-pulumi-plugin: %s\n' "$*" >&2; }
die() { printf 'install-pulumi-plugin: error: %s\n' "$*" >&2; exit 1; }

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(cd "$script_dir/.." && pwd)"
py="${NETPEER_PYTHON:-$repo_dir/.venv/bin/python}"
[[ -x "$py" ]] || die "no Python environment at $py: run scripts/setup.sh first (or set NETPEER_PYTHON)"

cli_bin="$(bash "$script_dir/install-pulumi.sh" | tail -n1)"
[[ -x "$cli_bin/pulumi" ]] || die "scripts/install-pulumi.sh did not produce a pulumi binary"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo_dir/pyproject.toml" | head -n1)"
schema_version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$repo_dir/schema/pulumi/schema.json")"
[[ "$version" == "$schema_version" ]] \
    || die "the package is $version but schema/pulumi/schema.json says $schema_version: run 'make schema'"

dist="$(PYTHON="$py" bash "$script_dir/build-packages.sh" plugin | tail -n1)"
tarball="$(ls "$dist"/pulumi-resource-netpeer-v"$version"-*.tar.gz 2>/dev/null | head -n1)"
[[ -f "$tarball" ]] || die "scripts/build-packages.sh made no plugin tarball in $dist"
build="$(cat "$dist/.stamp-plugin")"

home="${PULUMI_HOME:-$HOME/.pulumi}"
target="$home/plugins/resource-netpeer-v$version"
if [[ -x "$target/pulumi-resource-netpeer" && "$(cat "$target/.netpeer-build" 2>/dev/null)" == "$build" ]]; then
    log "netpeer $version (build $build) already installed in $home"
    printf '%s\n' "$target"
    exit 0
fi
mkdir -p "$home"
# pulumi unpacks into a temporary directory and renames it into place.
PULUMI_HOME="$home" PULUMI_SKIP_UPDATE_CHECK=true "$cli_bin/pulumi" plugin install resource netpeer "$version" \
    --file "$tarball" --reinstall --non-interactive >&2 \
    || die "pulumi plugin install failed"
[[ -x "$target/pulumi-resource-netpeer" ]] || die "the plugin did not land in $target"
log "installed netpeer $version (build $build) in $home"
printf '%s\n' "$target"
