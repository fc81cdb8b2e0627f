#!/usr/bin/env bash
# Install netpeer's OpenTofu/Terraform provider into the implied local mirror of $HOME, so that a root
# module with `source = "netpeer/netpeer"` runs `tofu init` offline, with no CLI configuration file:
#
#   ~/.terraform.d/plugins/registry.opentofu.org/netpeer/netpeer/VERSION/OS_ARCH/terraform-provider-netpeer_vVERSION
#   ~/.terraform.d/plugins/registry.terraform.io/netpeer/netpeer/VERSION/OS_ARCH/...   (the same, for Terraform)
#
# The plugin is a small wrapper that runs this checkout's Python (PYTHON, default .venv/bin/python) on
# netpeer_provider.tofu, with the protocol stubs that scripts/install-opentofu.sh generated. Idempotent:
# a wrapper already up to date is left alone (its lock-file hash stays the same).
# Prints the OpenTofu plugin directory on stdout.
#
# Environment: HOME (where to install), PYTHON, NETPEER_CACHE_DIR (where the stubs are cached).
set -euo pipefail

log() { printf 'install-tofu-provider: %s\n' "$*" >&2; }
die() { printf 'install-tofu-provider: error: %s\n' "$*" >&2; exit 1; }

[[ -n "${HOME:-}" && -d "$HOME" ]] || die "HOME ('${HOME:-}') is not a directory"
repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-$repo_dir/.venv/bin/python}"
[[ -x "$py" ]] || die "no Python at $py: run scripts/setup.sh first (or set PYTHON)"
py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"  # the wrapper runs from any directory

# One Python run: the package's version, and where the stubs are (fails if they were never generated).
info="$("$py" -c '
import importlib.metadata as m
from netpeer_provider.tofu import _stubs
import netpeer_provider.tofu.netpeer
print(m.version("netpeer")); print(_stubs.stubs_dir())
' 2>&1)" || die "$py cannot load the provider: $(tail -n1 <<<"$info")"
version="$(sed -n 1p <<<"$info")"
stubs="$(sed -n 2p <<<"$info")"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "odd package version '$version'"

case "$(uname -m)" in
  x86_64|amd64) arch=amd64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) die "unsupported machine $(uname -m)" ;;
esac
os="$(uname -s | tr '[:upper:]' '[:lower:]')"

wrapper="#!/bin/sh
# netpeer's OpenTofu/Terraform provider $version (installed by scripts/install-tofu-provider.sh).
# -I: the root module's directory (tofu's working directory) is not put on Python's path; this checkout's own
# sources come first (several checkouts may share one Python environment).
: \"\${NETPEER_TOFU_STUBS:=$stubs}\"
export NETPEER_TOFU_STUBS
exec \"$py\" -I -c \"import runpy, sys; sys.path[:0] = ['$repo_dir', '$repo_dir/provider'];
runpy.run_module('netpeer_provider.tofu', run_name='__main__', alter_sys=True)\" \\
    netpeer_provider.tofu.netpeer:NetpeerProvider \"\$@\"
"

name="terraform-provider-netpeer_v$version"
first=""
for host in registry.opentofu.org registry.terraform.io; do
  dir="$HOME/.terraform.d/plugins/$host/netpeer/netpeer/$version/${os}_$arch"
  [[ -n "$first" ]] || first="$dir"
  if [[ -x "$dir/$name" ]] && printf '%s' "$wrapper" | cmp -s - "$dir/$name"; then
    continue
  fi
  mkdir -p "$dir"
  tmp="$(mktemp "$dir/.$name.XXXXXX")"
  printf '%s' "$wrapper" >"$tmp"
  chmod 755 "$tmp"
  mv -f "$tmp" "$dir/$name"
  log "installed $dir/$name"
done
printf '%s\n' "$first"
