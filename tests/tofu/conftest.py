"""Fixtures of the OpenTofu tests: the real ``tofu`` (built once and cached by
scripts/install-opentofu.sh), a HOME of the tests' own with netpeer's provider
installed in OpenTofu's implied local mirror, and root modules run against a
real netpeerd on real OVN (the ``netpeerd`` fixture)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import short_tmpdir
from tests.tofu.harness import Home, Module, tofu_bin


@pytest.fixture(scope="session")
def tofu_home():
    """One HOME per session: the provider is installed once, as setup installs it for a user."""
    root = short_tmpdir("np-tofu-home-")
    try:
        yield Home(root, tofu_bin())
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def modules(tofu_home: Home, netpeerd, state_dir: Path):
    """A factory of root modules configured for netpeerd: ``modules("a", "team-a", example="tenant-a")``
    gives a module whose provider reads NETPEER_ENDPOINT and a token granting the namespace."""
    made: list[Module] = []

    def make(name: str, namespace: str, *, example: str | None = None, token: str | None = None) -> Module:
        m = Module(tofu_home, state_dir / f"tofu-{name}", example=example, NETPEER_ENDPOINT=netpeerd.endpoint,
                   NETPEER_TOKEN=token or netpeerd.token(namespace))
        made.append(m)
        return m

    yield make
    for m in reversed(made):  # leave nothing behind in the service
        if (m.dir / "terraform.tfstate").exists():
            m.run("destroy", "-auto-approve", "-input=false", ok=(0, 1))
