"""netpeer's provider through the real ``tofu`` against a real netpeerd on real OVN: what a user of
OpenTofu sees. The root modules are examples/opentofu/ (copied) or written here; the provider is
found in OpenTofu's implied local mirror of a HOME of the tests' own, where the project's install
script put it (no CLI configuration file)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.tofu

PEERING_A = "namespaces/team-a/networks/net-a/peerings/to-b"


def test_two_tenants_pending_bound_refresh_and_destroy_while_bound(modules, netpeerd):
    token_a = netpeerd.token("team-a")
    # A passes its token as a sensitive variable, B through NETPEER_TOKEN.
    a = modules("a", "team-a", example="tenant-a", token="")
    a.env.pop("NETPEER_TOKEN")
    a.env["TF_VAR_netpeer_token"] = token_a
    b = modules("b", "team-b", example="tenant-b")

    init = a.init()
    assert "Installing netpeer/netpeer v0.1.0" in init.stdout, init.stdout
    lock = (a.dir / ".terraform.lock.hcl").read_text()
    assert 'provider "registry.opentofu.org/netpeer/netpeer"' in lock and "h1:" in lock, lock

    log = a.dir / "tofu.log"
    plan = a.run("plan", "-input=false", TF_LOG="trace", TF_LOG_PATH=str(log))
    assert "netpeer_network.a will be created" in plan.stdout and "netpeer_peering.to_b will be created" in plan.stdout
    assert "phase" in plan.stdout and "(known after apply)" in plan.stdout
    apply = a.apply()
    assert a.outputs()["phase"] == "Pending" and a.outputs()["reason"] == "AwaitingRemote"
    assert a.outputs()["expires_at"], "a Pending peering has an expiry"
    # The token is nowhere: not in the plan, the apply, the state, nor a trace log.
    for where, text in (("plan", plan.stdout + plan.stderr), ("apply", apply.stdout + apply.stderr),
                        ("state", a.state_text()), ("trace log", log.read_text())):
        assert token_a not in text and token_a.split("_")[-1] not in text, f"the token shows in the {where}"
    assert "RPC" in log.read_text() or "plugin" in log.read_text(), "the trace log was not written"

    b.init()
    b.apply()
    assert b.outputs()["phase"] == "Bound"
    assert b.outputs()["remote_uid"] == a.outputs()["network_uid"]

    # A's state still says Pending; a refresh-only plan shows B's consent as a change of phase.
    drift = a.plan("-refresh-only", ok=(2,))
    assert re.search(r'~ phase\s+= "Pending" -> "Bound"', drift.stdout), drift.stdout
    assert "changed outside of OpenTofu" in drift.stdout
    a.apply("-refresh-only")
    out = a.outputs()
    assert (out["phase"], out["reason"]) == ("Bound", "Bound")
    assert out["remote_uid"] == b.outputs()["network_uid"]
    assert out.get("expires_at") is None, "a Bound peering never expires"  # null outputs are left out
    assert [(p["namespace"], p["name"]) for p in out["peered_networks"]] == [("team-b", "net-b")]
    a.plan()  # nothing left to do

    # A destroys while Bound: the peering goes first (the network refers to it), then the network.
    destroy = a.run("destroy", "-auto-approve", "-input=false")
    assert destroy.stdout.index("netpeer_peering.to_b: Destruction complete") \
        < destroy.stdout.index("netpeer_network.a: Destruction complete"), destroy.stdout
    assert netpeerd.client().list_networks("team-a") == []
    withdrawn = b.plan("-refresh-only", ok=(2,))
    assert re.search(r'~ phase\s+= "Bound" -> "Pending"', withdrawn.stdout), withdrawn.stdout
    assert re.search(r'~ reason\s+= "Bound" -> "RemoteWithdrawn"', withdrawn.stdout), withdrawn.stdout
    assert list(a.home.sockets.iterdir()) == [], "a plugin run left its private directory behind"
