#!/usr/bin/env bash
# The venv of netpeer's CrossGuard policy pack (examples/policy/pulumi), made once and cached, apart from
# the project's .venv: pulumi-policy pins protobuf 5.29, and installed into .venv it would downgrade the
# protobuf that netpeer's provider plugin needs (the plugin then fails with a gencode/runtime VersionError).
#
#   bash scripts/install-pulumi-policy.sh [PACK_DIR]   # last stdout line = the venv
#   pulumi preview --policy-pack PACK_DIR
#
# With PACK_DIR (default: none), PACK_DIR/venv becomes a link to the cached venv: the pack's
# PulumiPolicy.yaml names `venv` as its virtualenv, so the CLI's Python host runs the pack in it.
# The link is per directory, the venv is per requirements: checkouts side by side never share a link.
#
# Result: ${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}/pulumi-policy/<hash of requirements.txt>/venv
# Environment: NETPEER_CACHE_DIR (cache root), PYTHON (interpreter for the venv; default python3).
set -euo pipefail

# Bump when the recipe changes in a way that must invalidate cached venvs.
RECIPE=1

log() { printf 'install-pulumi-policy: %s\n' "$*" >&2; }
die() { printf 'install-pulumi-policy: error: %s\n' "$*" >&2; exit 1; }

repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
reqs="$repo_dir/examples/policy/pulumi/requirements.txt"
[[ -f "$reqs" ]] || die "missing $reqs"
pack="${1:-}"
if [[ -n "$pack" ]]; then
    [[ -f "$pack/PulumiPolicy.yaml" ]] || die "$pack is not a policy pack (no PulumiPolicy.yaml)"
fi
py="${PYTHON:-python3}"
# The venv's interpreter is part of the key: a venv made by another Python is not reused.
pyver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" || die "'$py' does not run"

key="$( { echo "recipe=$RECIPE python=$pyver"; cat "$reqs"; } | sha256sum | cut -c1-12)"
cache_root="${NETPEER_CACHE_DIR:-$HOME/.cache/netpeer}"
prefix="$cache_root/pulumi-policy/$key"
venv="$prefix/venv"

venv_ok() {
    [[ -f "$prefix/.stamp" && -x "$venv/bin/python" ]] || return 1
    "$venv/bin/python" -c 'import pulumi_policy, pulumi' 2>/dev/null
}

link_pack() {
    [[ -n "$pack" ]] || return 0
    if [[ -e "$pack/venv" && ! -L "$pack/venv" ]]; then
        die "$pack/venv exists and is not a link: remove it, the pack's venv is kept in $venv"
    fi
    ln -sfn "$venv" "$pack/venv"
}

if venv_ok; then
    log "policy pack venv already made: $venv"
else
    mkdir -p "$prefix"
    exec 9>"$prefix/.lock"
    flock 9
    if ! venv_ok; then
        start=$(date +%s)
        # Made in place (a venv records its own path); the stamp, written last, marks it finished.
        rm -rf "$venv" "$prefix/.stamp"
        trap '[[ -f "$prefix/.stamp" ]] || rm -rf "$venv"' EXIT
        log "making the policy pack venv ($(grep -v '^#' "$reqs" | tr '\n' ' '))..."
        "$py" -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check -r "$reqs" >&2 \
            || die "pip install -r $reqs failed (see above)"
        touch "$prefix/.stamp"
        log "made the policy pack venv in $(( $(date +%s) - start ))s: $venv"
    fi
fi
link_pack
printf '%s\n' "$venv"
