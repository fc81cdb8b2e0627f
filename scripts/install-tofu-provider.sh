#!/usr/bin/env bash
# Install netpeer's OpenTofu/Terraform provider into the implied local mirror of $HOME, so that a root
# module with `source = "netpeer/netpeer"` runs `tofu init` offline, with no CLI configuration file:
#
#   ~/.terraform.d/plugins/registry.opentofu.org/netpeer/netpeer/VERSION/OS_ARCH -> ../../../../../netpeer/VERSION-BUILD
#   ~/.terraform.d/plugins/registry.terraform.io/netpeer/netpeer/VERSION/OS_ARCH -> (the same, for Terraform)
#   ~/.terraform.d/netpeer/VERSION-BUILD/terraform-provider-netpeer_vVERSION, lib/
#
# What gets installed is the package that scripts/build-packages.sh makes from this tree (the zip of its
# filesystem mirror, built or taken from its cache): a self-contained provider with its own copy of
# netpeer, its dependencies and the tfplugin6 stubs, so it works in any HOME and whatever becomes of this
# checkout. Each build (BUILD: a hash of its sources) is unpacked once into a directory of its own, next
# to a temporary name and renamed; the platform directory is a symbolic link switched to it in one
# rename. Another version installs beside it; a `tofu init` running meanwhile sees the old build or the
# new one, never half of one. Prints the platform directory (OpenTofu's) on stdout.
#
# Environment: HOME (where to install), TF_PLUGIN_CACHE_DIR (also link the build into this plugin cache),
# PYTHON (the interpreter that builds the package; default .venv), NETPEER_CACHE_DIR (where the stubs are
# cached).
set -euo pipefail

log() { printf 'install-tofu-provider: %s\n' "$*" >&2; }
die() { printf 'install-tofu-provider: error: %s\n' "$*" >&2; exit 1; }

[[ -n "${HOME:-}" && -d "$HOME" ]] || die "HOME ('${HOME:-}') is not a directory"
repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-$repo_dir/.venv/bin/python}"
[[ -x "$py" ]] || die "no Python at $py: run scripts/setup.sh first (or set PYTHON)"

dist="$(PYTHON="$py" bash "$repo_dir/scripts/build-packages.sh" tofu | tail -n1)"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo_dir/pyproject.toml" | head -n1)"
zip="$(ls "$dist"/opentofu/mirror/registry.opentofu.org/netpeer/netpeer/terraform-provider-netpeer_"$version"_*.zip \
       2>/dev/null | head -n1)"
[[ -f "$zip" ]] || die "scripts/build-packages.sh made no provider zip in $dist/opentofu/mirror"
build="$(cat "$dist/.stamp-tofu")"
platform="$(basename "$zip" .zip)"; platform="${platform#terraform-provider-netpeer_"$version"_}"

store="$HOME/.terraform.d/netpeer/$version-$build"
if [[ ! -x "$store/terraform-provider-netpeer_v$version" ]]; then
    mkdir -p "$(dirname "$store")"
    tmp="$(mktemp -d "$store.tmp.XXXXXX")"
    unzip -q "$zip" -d "$tmp" || { rm -rf "$tmp"; die "unzip of $zip failed"; }
    chmod 0755 "$tmp"
    mv -T "$tmp" "$store" 2>/dev/null || rm -rf "$tmp"   # lost a race to an identical build: keep its copy
    log "unpacked $store"
fi

# link DIR: DIR, a platform directory, made a symbolic link to this build (one rename).
link() {
  local dir="$1" tmp
  [[ "$(readlink "$dir" 2>/dev/null)" == "$store" ]] && return 0
  mkdir -p "$(dirname "$dir")"
  # A real directory there is an install of an older kind (a wrapper into a checkout): replaced.
  [[ -d "$dir" && ! -L "$dir" ]] && rm -rf "$dir"
  tmp="$(mktemp -u "$(dirname "$dir")/.link.XXXXXX")"
  ln -s "$store" "$tmp"
  mv -T "$tmp" "$dir"
  log "installed $dir -> $store"
}

first=""
for host in registry.opentofu.org registry.terraform.io; do
  dir="$HOME/.terraform.d/plugins/$host/netpeer/netpeer/$version/$platform"
  [[ -n "$first" ]] || first="$dir"
  link "$dir"
  # OpenTofu's plugin cache (TF_PLUGIN_CACHE_DIR, as `plugin_cache_dir` would name it): a root module
  # whose lock file has this build's checksums then links it from there, checked against them, without
  # installing it ("Using ... from the shared cache directory"), from any mirror.
  if [[ -n "${TF_PLUGIN_CACHE_DIR:-}" ]]; then
    link "$TF_PLUGIN_CACHE_DIR/$host/netpeer/netpeer/$version/$platform"
  fi
done
printf '%s\n' "$first"
