"""Pulumi across sites: one stack per site, each with its own endpoint and
token (that site's netpeerd), peering a network of each site with the real
``pulumi`` CLI. Both end Bound; when one destroys its stack, ``pulumi
refresh`` on the other shows the withdrawal."""

from __future__ import annotations

import json

import pytest

from netpeer_dev.multisite import MultiSiteStack
from tests.sites.helpers import World
from tests.support import Stack, short_tmpdir

pytestmark = pytest.mark.pulumi

PROGRAM = "tests/sites/programs/site-tenant"


def _stack(name: str, endpoint: str, token: str, pulumi_bin, work, settings: dict) -> Stack:
    s = Stack(PROGRAM, work, pulumi_bin, work / "backend", work / "pulumi-home", name)
    s.config("netpeer:endpoint", endpoint)
    s.config("netpeer:token", token, secret=True)
    for key, value in settings.items():
        s.config(key, value)
    return s


def _peering(stack: Stack, name: str) -> tuple[str, str]:
    for r in stack.state()["deployment"].get("resources", []):
        if r["type"].endswith("NetworkPeering") and r["urn"].endswith(f"::{name}"):
            return r["outputs"]["phase"], r["outputs"]["reason"]
    raise AssertionError(f"no peering {name} in the stack's state")


def test_one_stack_per_site_peering_across_sites(multi: MultiSiteStack, world: World, pulumi_bin) -> None:
    work = short_tmpdir("npp-")
    (work / "backend").mkdir()
    (work / "pulumi-home").mkdir()
    east, west = multi.stacks["east"], multi.stacks["west"]
    a = _stack("east", east.endpoint, world.token("east", "pl-a"), pulumi_bin, work,
               {"network": "net-a", "subnets": json.dumps(["10.31.0.0/24"]), "peering": "to-b",
                "remoteSite": "west", "remoteNamespace": "pl-b", "remoteNetwork": "net-b"})
    b = _stack("west", west.endpoint, world.token("west", "pl-b"), pulumi_bin, work,
               {"network": "net-b", "subnets": json.dumps(["10.32.0.0/24"]), "peering": "to-a",
                "remoteSite": "east", "remoteNamespace": "pl-a", "remoteNetwork": "net-a"})
    made = [a, b]
    try:
        a.up()
        assert (a.outputs()["phase"], a.outputs()["remote_site"]) == ("Pending", "west")
        b.up()
        world.wait_phase("east", "pl-a", "net-a", "to-b", "Bound")
        a.run("refresh", "--yes")
        b.run("refresh", "--yes")
        assert _peering(a, "to-b") == ("Bound", "Bound")
        assert _peering(b, "to-a") == ("Bound", "Bound")
        b.run("destroy", "--yes")
        world.wait_phase("east", "pl-a", "net-a", "to-b", "Pending", "RemoteWithdrawn")
        a.run("refresh", "--yes")
        assert _peering(a, "to-b") == ("Pending", "RemoteWithdrawn")
    finally:
        for s in reversed(made):
            s.run("destroy", "--yes", check=False)
        import shutil
        shutil.rmtree(work, ignore_errors=True)
