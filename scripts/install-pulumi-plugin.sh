#!/usr/bin/env bash
# Install netpeer's Pulumi resource provider plugin (pulumi-resource-netpeer) into a Pulumi home, offline.
#
#   bash scripts/install-pulumi-plugin.sh                 # into ${PULUMI_HOME:-~/.pulumi}
#   PULUMI_HOME=/some/dir bash scripts/install-pulumi-plugin.sh
#   pulumi plugin ls                                      # lists: netpeer  resource  0.1.0
#
# The plugin is Python (provider/netpeer_provider/plugin): what gets installed is a small executable
# `pulumi-resource-netpeer` that runs it with this project's interpreter (.venv, or $NETPEER_PYTHON), packed
# as a local tarball and installed with `pulumi plugin install resource netpeer VERSION --file TARBALL`
# (no download). VERSION is the package version, the one schema/pulumi/schema.json and the generated SDKs
# ask for. Re-running is cheap: nothing is done when the installed plugin is already this one.
# The last stdout line is the plugin's directory.
set -euo pipefail

log() { printf 'install-pulumi-plugin: %s\n' "$*" >&2; }
die() { printf 'install-pulumi-plugin: error: %s\n' "$*" >&2; exit 1; }

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(cd "$script_dir/.." && pwd)"
py="${NETPEER_PYTHON:-$repo_dir/.venv/bin/python}"
[[ -x "$py" ]] || die "no Python environment at $py: run scripts/setup.sh first (or set NETPEER_PYTHON)"
"$py" -c 'import netpeer_provider.plugin, pulumi.provider.experimental' 2>/dev/null \
    || die "$py cannot import netpeer_provider.plugin and pulumi: install netpeer with the pulumi extra"

cli_bin="$(bash "$script_dir/install-pulumi.sh" | tail -n1)"
[[ -x "$cli_bin/pulumi" ]] || die "scripts/install-pulumi.sh did not produce a pulumi binary"
version="$("$py" -c 'from netpeer_provider.plugin import schema_json; print(schema_json.version())')"
schema_version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$repo_dir/schema/pulumi/schema.json")"
[[ "$version" == "$schema_version" ]] \
    || die "the package is $version but schema/pulumi/schema.json says $schema_version: run 'make schema'"

home="${PULUMI_HOME:-$HOME/.pulumi}"
target="$home/plugins/resource-netpeer-v$version"
wrapper="#!/bin/sh
# netpeer's Pulumi provider plugin (scripts/install-pulumi-plugin.sh): runs it with the project's Python.
exec \"$py\" -m netpeer_provider.plugin \"\$@\"
"
if [[ -x "$target/pulumi-resource-netpeer" && "$(cat "$target/pulumi-resource-netpeer")" == "${wrapper%$'\n'}" ]]; then
    log "netpeer $version already installed in $home"
    printf '%s\n' "$target"
    exit 0
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/netpeer-plugin.XXXXXX")"
trap 'rm -rf "$work"' EXIT
printf '%s' "$wrapper" >"$work/pulumi-resource-netpeer"
chmod 0755 "$work/pulumi-resource-netpeer"
tar -C "$work" -czf "$work/netpeer-plugin.tgz" pulumi-resource-netpeer
mkdir -p "$home"
PULUMI_HOME="$home" PULUMI_SKIP_UPDATE_CHECK=true "$cli_bin/pulumi" plugin install resource netpeer "$version" \
    --file "$work/netpeer-plugin.tgz" --reinstall --non-interactive >&2 \
    || die "pulumi plugin install failed"
[[ -x "$target/pulumi-resource-netpeer" ]] || die "the plugin did not land in $target"
log "installed netpeer $version in $home"
printf '%s\n' "$target"
