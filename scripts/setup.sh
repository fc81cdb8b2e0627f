#!/usr/bin/env bash
# Installs what a fresh machine lacks, reusing what is there:
#   - Debian packages: OVN central + host, Open vSwitch, iproute2, PostgreSQL (replicas), ...
#   - the Python environment in .venv (netpeer in editable mode, with dev extras)
#   - the Pulumi CLI built from its Go modules (scripts/install-pulumi.sh; cached)
#   - its YAML and Node.js language hosts and the TypeScript SDK (scripts/install-pulumi-languages.sh; cached)
#   - the venv of the CrossGuard policy pack examples/policy/pulumi, apart from .venv (scripts/install-pulumi-policy.sh; cached)
#   - lincheck, the linearizability checker: tests/linearizability/checker over Porcupine from the Go
#     module proxy (scripts/install-porcupine.sh; cached)
#   - netpeer's Pulumi provider plugin in ${PULUMI_HOME:-~/.pulumi} (scripts/install-pulumi-plugin.sh: the
#     self-contained package of scripts/build-packages.sh, versioned; cached)
#   - the web console's graph library from the npm registry (scripts/install-console-assets.sh; cached),
#     and Debian's chromium for tests/console (not with --demo or --sites)
#   - OpenTofu and the provider protocol stubs (scripts/install-opentofu.sh; cached), and netpeer's
#     provider package in OpenTofu's implied local mirror under ~/.terraform.d (scripts/install-tofu-provider.sh)
#   - OPA, which evaluates examples/policy/opa over `tofu show -json` (scripts/install-opa.sh; cached)
# Safe to re-run. Prints progress on stderr. --no-pulumi skips the Pulumi CLI (and the languages),
# --no-pulumi-languages only the YAML/TypeScript toolchain, --no-opentofu OpenTofu,
# --no-wireguard wireguard-go (then `netpeer dev up --sites` and tests/sites fail, saying so),
# --no-porcupine the checker (then tests/linearizability builds it on first use, or fails saying why).
# --demo installs what `make demo` needs and no more (OVN/OVS, .venv, the Pulumi CLI and netpeer's plugin:
# no PostgreSQL, OVN-IC, YAML/TypeScript toolchain, OpenTofu, wireguard-go or lincheck); --sites what
# `make demo-sites` needs (--demo, plus OVN-IC and wireguard-go). `make setup` and `make test` install all.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "setup: $*" >&2; }

want_pulumi=1
want_pulumi_languages=1
want_opentofu=1
want_wireguard=1
want_porcupine=1
want_postgresql=1
want_ic=1
want_chromium=1
for arg in "$@"; do
  case "$arg" in
    --no-pulumi) want_pulumi=0 ;;
    --no-pulumi-languages) want_pulumi_languages=0 ;;
    --no-opentofu) want_opentofu=0 ;;
    --no-wireguard) want_wireguard=0 ;;
    --no-porcupine) want_porcupine=0 ;;
    --demo) want_pulumi_languages=0; want_opentofu=0; want_wireguard=0; want_porcupine=0; want_postgresql=0
            want_ic=0; want_chromium=0 ;;
    --sites) want_pulumi_languages=0; want_opentofu=0; want_porcupine=0; want_postgresql=0; want_chromium=0 ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done

# --- Debian packages ---------------------------------------------------------
# postgresql: netpeerd replicas (dev up --ha, tests/ha).
# ovn-ic + ovn-ic-db: OVN Interconnection (the daemon; the IC NB/SB schemas) for the multi-site stack.
APT_PACKAGES=(ovn-central ovn-host openvswitch-switch openvswitch-common iproute2 iputils-ping procps openssl)
if [ "$want_ic" = 1 ]; then APT_PACKAGES+=(ovn-ic ovn-ic-db); fi
if [ "$want_postgresql" = 1 ]; then APT_PACKAGES+=(postgresql); fi
# chromium: tests/console drive it with Playwright (never a browser Playwright downloads).
if [ "$want_chromium" = 1 ]; then APT_PACKAGES+=(chromium); fi
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq >&2
  # policy-rc.d keeps the packages' own init scripts from starting system-wide daemons.
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  $SUDO rm -f /usr/sbin/policy-rc.d
else
  say "Debian packages present"
fi
# The replica tests and `netpeer dev up --ha` run initdb / pg_ctl from Debian's
# PostgreSQL: without them those tests fail, so setup fails here first.
if [ "$want_postgresql" = 1 ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "setup: PostgreSQL is not usable: no /usr/lib/postgresql/*/bin/initdb after installing 'postgresql'" >&2
  exit 1
fi

# --- Python environment ------------------------------------------------------
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.netpeer-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "installing Python packages into .venv"
  .venv/bin/pip install -q --upgrade pip >&2
  .venv/bin/pip install -q -e '.[dev]' >&2
  touch "$stamp"
else
  say "Python environment up to date"
fi
if ! .venv/bin/python -c 'import psycopg' 2>/dev/null; then
  echo "setup: psycopg (the PostgreSQL store's driver) does not import in .venv: rerun after removing $stamp" >&2
  exit 1
fi

# python-ovs from PyPI parses OVSDB's JSON in pure Python. Debian's
# python3-openvswitch (a dependency of openvswitch-switch) ships the C parser
# for the same interpreter ABI: linking it in makes each NB transaction of
# netpeerd cheaper (docs/performance.md). Skipped when the ABIs differ.
ext=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
venv_ovs=$(.venv/bin/python -c 'import os, ovs; print(os.path.dirname(ovs.__file__))')
sys_json=/usr/lib/python3/dist-packages/ovs/_json$ext
if [ -f "$sys_json" ] && [ ! -e "$venv_ovs/_json$ext" ]; then
  ln -sf "$sys_json" "$venv_ovs/_json$ext"
  if .venv/bin/python -c 'import ovs.json, sys; sys.exit(ovs.json.PARSER != "C")' 2>/dev/null; then
    say "python-ovs uses Debian's C JSON parser"
  else
    rm -f "$venv_ovs/_json$ext"
  fi
fi

# --- the console's graph library (make demo shows the console too) -------------
bash scripts/install-console-assets.sh >/dev/null \
  || say "warning: the console's graph library did not install: the console shows tables without the graph"

# --- Pulumi CLI --------------------------------------------------------------
if [ "$want_pulumi" = 1 ]; then
  bash scripts/install-pulumi.sh >/dev/null
  # The provider plugin for YAML, TypeScript, ... programs: `pulumi plugin ls` lists it.
  bash scripts/install-pulumi-plugin.sh >/dev/null
  if [ "$want_pulumi_languages" = 1 ]; then
    # Not fatal: the Python toolchain works without it.
    bash scripts/install-pulumi-languages.sh >/dev/null \
      || say "warning: the YAML/TypeScript toolchain for Pulumi failed to install (see above)"
    # The policy pack's own venv (pulumi-policy pins an older protobuf), linked into the example pack.
    PYTHON="$PY" bash scripts/install-pulumi-policy.sh examples/policy/pulumi >/dev/null
  fi
fi

# --- OpenTofu ----------------------------------------------------------------
if [ "$want_opentofu" = 1 ]; then
  PYTHON=.venv/bin/python bash scripts/install-opentofu.sh >/dev/null
  PYTHON=.venv/bin/python bash scripts/install-tofu-provider.sh >/dev/null
  bash scripts/install-opa.sh >/dev/null
fi

# --- wireguard-go (userspace WireGuard between the sites of `netpeer dev up --sites`) ---
if [ "$want_wireguard" = 1 ]; then
  bash scripts/install-wireguard.sh >/dev/null
fi

# --- lincheck (the linearizability checker of tests/linearizability) ------------
if [ "$want_porcupine" = 1 ]; then
  bash scripts/install-porcupine.sh >/dev/null
fi
