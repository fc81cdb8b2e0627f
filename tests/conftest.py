"""The fixtures of the whole suite: real OVN daemons in private temp
directories, a real netpeerd, the real ``pulumi`` CLI. Helpers that are not
fixtures are in tests/support.py.

Every fixture undoes what it made, even when the test fails: daemons are
stopped by their own pid, namespaces and temp dirs removed. A missing
component fails the test loudly; nothing here skips.
Set NETPEER_KEEP_STATE=1 to keep the state directories (and logs).

With NETPEER_TEST_SCRAMBLE_MESSAGES=1 (``make test``'s second run, over
tests/provider and the CLI's tests), every netpeerd the tests start scrambles
the message of every error it answers, its details untouched: the faces must
behave the same and still name the field and the value. Tests marked
``message_text`` assert netpeerd's own words and are left out of that run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from netpeer_dev.daemons import OvnDaemons
from tests import secrets_in_logs
from tests.support import ROOT, Instances, Netpeerd, Stack, require_ovn, short_tmpdir, start_netpeerd

pytest_plugins = ["tests.pgsupport"]


def pytest_collection_modifyitems(config, items) -> None:
    """Under NETPEER_TEST_SCRAMBLE_MESSAGES, the tests about netpeerd's
    wording (``message_text``) are deselected: there is no wording to check."""
    from netpeer.api.errors import SCRAMBLE_ENV
    if not os.environ.get(SCRAMBLE_ENV):
        return
    left = [item for item in items if item.get_closest_marker("message_text")]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if not item.get_closest_marker("message_text")]   # pg_cluster, pg_url: PostgreSQL for the store-level and replica tests


@pytest.fixture(scope="session", autouse=True)
def credential_watch() -> Iterator[secrets_in_logs.Watch]:
    """Every token the suite mints is remembered, and every log line of every
    netpeerd is searched for it (and for anything shaped like a token)."""
    watch = secrets_in_logs.Watch()
    watch.install()
    try:
        yield watch
    finally:
        watch.uninstall()


@pytest.fixture
def state_dir(credential_watch) -> Iterator[Path]:
    """A fresh, short state directory (``/tmp/np-XXXXXXXX``), removed
    afterwards, once its logs were searched for credentials."""
    d = short_tmpdir()
    mark = credential_watch.mark()
    yield d
    leaks = credential_watch.leaks(d, since=mark)
    if os.environ.get("NETPEER_KEEP_STATE") != "1":
        shutil.rmtree(d, ignore_errors=True)
    if leaks:
        pytest.fail(f"a credential was logged: {leaks[:3]}")


@pytest.fixture
def ovn_daemons(state_dir: Path) -> Iterator[OvnDaemons]:
    """An OvnDaemons on a fresh state dir, not started; stopped afterwards whatever the test did."""
    require_ovn()
    daemons = OvnDaemons(state_dir / "ovn")
    try:
        yield daemons
    finally:
        daemons.stop()


@pytest.fixture
def ovn(ovn_daemons: OvnDaemons) -> OvnDaemons:
    """Running NB + SB + ovn-northd."""
    ovn_daemons.start()
    return ovn_daemons


@pytest.fixture
def ovn_chassis(ovn_daemons: OvnDaemons) -> OvnDaemons:
    """Running central plus a chassis (ovs-vswitchd userspace datapath, ovn-controller)."""
    require_ovn(chassis=True)
    ovn_daemons.start(chassis=True)
    return ovn_daemons


@pytest.fixture
def instances(ovn_chassis: OvnDaemons) -> Iterator[Instances]:
    """Factory for raw instances (namespaces on br-int); deleted before the daemons stop."""
    factory = Instances(ovn_chassis)
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture
def netpeerd(ovn: OvnDaemons, state_dir: Path) -> Iterator[Netpeerd]:
    """A real netpeerd in this process: store, OVN backend, service, gRPC on a unix socket."""
    daemon = start_netpeerd(ovn, state_dir)
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="session")
def pulumi_bin() -> Path:
    """Builds (first time) or finds the cached CLI. No CLI is a failure, never a skip."""
    out = subprocess.run(["bash", str(ROOT / "scripts/install-pulumi.sh")], capture_output=True, text=True,
                         timeout=1800)
    assert out.returncode == 0, f"the Pulumi CLI is not available: {out.stderr.strip().splitlines()[-1:]}"
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def pulumi_languages(pulumi_bin: Path) -> Path:
    """The YAML and Node.js language hosts next to the CLI, and the TypeScript SDK generated from
    schema/pulumi/schema.json (scripts/install-pulumi-languages.sh; cached). Missing is a failure."""
    out = subprocess.run(["bash", str(ROOT / "scripts/install-pulumi-languages.sh")], capture_output=True,
                         text=True, timeout=1800)
    if out.returncode != 0 or "TypeScript programs cannot run" in out.stderr or "skipping the TypeScript" in out.stderr:
        pytest.fail(f"the YAML/TypeScript toolchain for Pulumi is not available: {out.stderr.strip()[-2000:]}")
    for host in ("pulumi-language-yaml", "pulumi-language-nodejs"):
        if not (pulumi_bin / host).exists():
            pytest.fail(f"{host} is not next to the pulumi CLI in {pulumi_bin}")
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def stacks(netpeerd: Netpeerd, pulumi_bin: Path, state_dir: Path):
    """A factory of example stacks configured against netpeerd."""
    backend, home = state_dir / "backend", state_dir / "pulumi-home"
    backend.mkdir()
    home.mkdir()
    made: list[Stack] = []

    def make(example: str, token: str, name: str = "dev") -> Stack:
        """A stack of ``example`` (YAML and TypeScript ones get netpeer's plugin in their Pulumi home)."""
        s = Stack(example, state_dir, pulumi_bin, backend, home, name)
        s.config("netpeer:endpoint", netpeerd.endpoint)
        s.config("netpeer:token", token, secret=True)
        made.append(s)
        return s

    yield make
    for s in reversed(made):  # leave nothing behind in the service
        s.run("destroy", "--yes", check=False)
