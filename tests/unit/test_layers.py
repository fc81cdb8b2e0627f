"""The layering rules, checked on the source: each third-party library is
imported in one layer, the core knows no dataplane, and netpeerd imports
neither the dev tools nor Pulumi."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def offenders(folder: str, prefix: str, allowed: tuple[str, ...]) -> list[str]:
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(allowed):
            continue
        if any(m == prefix or m.startswith(prefix + ".") for m in imports(path)):
            bad.append(rel)
    return bad


def test_no_ovsdb_library_in_netpeer():
    """netpeer speaks OVSDB itself (netpeer/ovn/connection.py): neither
    ovsdbapp nor python-ovs is imported anywhere in it."""
    assert offenders("netpeer", "ovsdbapp", ()) == []
    assert offenders("netpeer", "ovs", ()) == []


def test_grpc_only_at_the_api_edge():
    assert offenders("netpeer", "grpc", ("netpeer/api/", "netpeer/v1/")) == []


def test_pulumi_only_in_the_sdk_and_provider():
    for folder in ("netpeer", "dev"):
        assert offenders(folder, "pulumi", ()) == []


def test_the_core_knows_no_dataplane_and_no_edge():
    for module in ("netpeer.ovn", "netpeer.api", "netpeer.store", "netpeer.service", "netpeer_dev"):
        assert offenders("netpeer/core", module, ()) == [], module


def test_netpeer_never_imports_the_dev_tools():
    """Not even the CLI: the dev package contributes `netpeer dev` through
    the entry point group netpeer.cli_commands (netpeer/cli/commands.py)."""
    assert offenders("netpeer", "netpeer_dev", ()) == []


def test_netpeerd_starts_without_the_dev_tools_or_pulumi():
    code = ("import sys, netpeer.daemon, netpeer.service, netpeer.api.server, netpeer.ovn.backend\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'netpeer_dev')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_grpc_is_imported_with_its_fork_handlers_off():
    """Every fork in netpeer's processes is a subprocess's fork+exec; grpc's
    fork handlers, on in its core, once hung one in the prefork handler
    (netpeer/api/__init__.py). The variable that turns them off must be set
    before grpc is first imported, from any of netpeer's entry points."""
    code = ("import importlib, os, sys\n"
            "seen = []\n"
            "class Spy:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'grpc' and not seen:\n"
            "            seen.append(os.environ.get('GRPC_ENABLE_FORK_SUPPORT'))\n"
            "sys.meta_path.insert(0, Spy())\n"
            "importlib.import_module(sys.argv[1])\n"
            "print(seen)\n")
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "dev")])
    for entry in ("netpeer.api.client", "netpeer.api.server", "netpeer_dev.cli", "bench.__main__"):
        out = subprocess.run([sys.executable, "-c", code, entry], capture_output=True, text=True, env=env, cwd=ROOT)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == "['0']", (entry, out.stdout)
