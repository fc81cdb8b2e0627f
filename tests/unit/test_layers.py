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
            # `from netpeer import service` imports netpeer.service as well
            out |= {f"{node.module}.{a.name}" for a in node.names if a.name != "*"}
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


def test_protobuf_only_at_the_api_edge():
    """The messages and their generated code stay behind netpeer/api: the
    rest of netpeer (the CLI, the console) sees JSON-shaped dicts."""
    for prefix in ("google.protobuf", "netpeer.v1"):
        assert offenders("netpeer", prefix, ("netpeer/api/", "netpeer/v1/")) == [], prefix


def test_pulumi_only_in_the_sdk_and_provider():
    for folder in ("netpeer", "dev"):
        assert offenders(folder, "pulumi", ()) == []


def test_the_provider_core_knows_no_engine_and_no_wire():
    """provider/netpeer_provider/core (networks, peerings, the inbox's
    requests) serves Pulumi and OpenTofu alike: no engine's library, and
    netpeerd only through netpeer.api.client (no grpc, no messages). The
    OpenTofu provider does without Pulumi too."""
    core = "provider/netpeer_provider/core"
    for prefix in ("pulumi", "grpc", "google.protobuf", "netpeer.v1", "netpeer.api.convert"):
        assert offenders(core, prefix, ()) == [], prefix
    assert offenders("provider/netpeer_provider/tofu", "pulumi", ()) == []


def test_no_face_reaches_into_netpeerd():
    """The providers and the SDK call netpeerd through its API; neither
    imports its service, store or dataplane (the dev tools may: they build
    the stacks and write instances into the dev stack's OVN)."""
    for folder in ("provider", "sdk"):
        for prefix in ("netpeer.service", "netpeer.store", "netpeer.ovn.backend", "netpeer.daemon"):
            assert offenders(folder, prefix, ()) == [], (folder, prefix)


def test_the_console_is_an_api_client():
    """The console holds no rights of its own (netpeer/console/server.py):
    it reaches netpeerd only through netpeer.api.client with the signed-in
    token, never the service, the store, OVN or the gRPC edge's other
    modules; and only netpeerd's start-up (netpeer/daemon.py) imports it."""
    for prefix in ("netpeer.service", "netpeer.store", "netpeer.ovn", "netpeer.daemon"):
        assert offenders("netpeer/console", prefix, ()) == [], prefix
    api = sorted({m for path in (ROOT / "netpeer/console").rglob("*.py") for m in imports(path)
                  if m.startswith("netpeer.api.") and not (m + ".").startswith("netpeer.api.client.")})
    assert api == []
    assert offenders("netpeer", "netpeer.console", ("netpeer/console/", "netpeer/daemon.py")) == []


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
