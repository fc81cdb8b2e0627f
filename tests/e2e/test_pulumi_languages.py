"""Two tenants, one in Python (the dynamic providers), the other in YAML or
TypeScript (netpeer's provider plugin, `pulumi-resource-netpeer`), with the
real CLI and language hosts: Pending -> Bound, refresh, import, withdrawal,
destroy, and what each side shows."""

from __future__ import annotations

import pytest

from tests.e2e.test_pulumi import phase_of


def text(result) -> str:
    return result.stdout + result.stderr


@pytest.mark.parametrize("program", ["yaml-tenant", "typescript-tenant"])
def test_python_and_plugin_tenants(program, stacks, netpeerd, pulumi_languages):
    token_b = netpeerd.token("team-b")
    a = stacks("tenant-a", netpeerd.token("team-a"))
    b = stacks(program, token_b)
    plugins = b.run("plugin", "ls").stdout
    assert any(line.split()[:3] == ["netpeer", "resource", "0.1.0"] for line in plugins.splitlines()), plugins

    a.up()
    assert (a.outputs()["phase"], a.outputs()["reason"]) == ("Pending", "AwaitingRemote")
    # B's preview asks the service what its peering would be (A consented already; no overlap): Bound.
    # Its network does not exist yet, so the peering's phase is not known before the network is made.
    preview = text(b.run("preview"))
    assert "netpeer:index:NetworkPeering" in preview and "Traceback" not in preview
    up = b.up()
    assert "warning" not in text(up)
    out = b.outputs()
    assert (out["phase"], out["reason"]) == ("Bound", "Bound")
    assert out["dataplane"] in ("Programming", "Programmed")   # Programmed once every chassis applied the pair
    assert b.resource("NetworkPeering", "to-a")["type"] == "netpeer:index:NetworkPeering"

    # Refresh: B's network learns its peer; A's half is Bound, pinned to B's network.
    b.run("refresh", "--yes", "--run-program")
    assert [n["name"] for n in b.outputs()["peered_networks"]] == ["net-a"]
    a.run("refresh", "--yes", "--run-program")
    assert a.outputs()["phase"] == "Bound" and a.outputs()["remote_uid"] == b.outputs()["network_uid"]

    # A bad input is one line naming the field, from the plugin too (camelCase, as the program spells it).
    b.config("remoteNetwork", "Not_A_Name")
    bad = b.run("preview", check=False)
    assert bad.returncode != 0 and "remoteNetwork: 'Not_A_Name'" in text(bad) and "Traceback" not in text(bad)
    b.run("config", "rm", "remoteNetwork")

    # Import into the plugin stack: an existing peering, with the code of the program's language.
    c = netpeerd.client(token_b)
    c.create_peering("team-b", "net-b", "to-c", "net-c", "team-c", description="made by hand")
    imported = b.run("import", "netpeer:index:NetworkPeering", "adopted",
                     "namespaces/team-b/networks/net-b/peerings/to-c", "--yes", "--protect=false")
    code = imported.stdout
    assert "made by hand" in code and ("netpeer:NetworkPeering" in code or "netpeer.NetworkPeering" in code)
    assert b.resource("NetworkPeering", "adopted")["outputs"]["phase"] == "Pending"
    missing = b.run("import", "netpeer:index:Network", "gone", "namespaces/team-b/networks/nope", "--yes",
                    check=False)
    assert missing.returncode != 0
    assert "importing network namespaces/team-b/networks/nope: it does not exist; check the id" in text(missing)

    # Withdrawal: A destroys its stack; B's refresh sees it.
    a.run("destroy", "--yes")
    b.run("refresh", "--yes")
    status = b.resource("NetworkPeering", "to-a")["outputs"]
    assert (status["phase"], status["reason"]) == ("Pending", "RemoteWithdrawn")
    # Destroy: nothing of B's is left (the adopted peering included).
    b.run("destroy", "--yes")
    assert c.list_networks("team-b") == []
    assert netpeerd.owned_rows() == {}


def test_plugin_failed_warns_and_error_on_not_bound_records(stacks, netpeerd, pulumi_languages):
    """A Failed peering from a YAML program: a warning by default; with
    netpeer:errorOnNotBound the update fails and the peering is recorded."""
    a = stacks("tenant-a", netpeerd.token("team-a"))
    a.config("subnets", '["10.2.0.0/24"]')   # overlaps B's default
    a.up()
    b = stacks("yaml-tenant", netpeerd.token("team-b"))
    up = b.up()
    assert "warning: peering team-b/net-b/to-a is Failed (OverlappingPrefixes)" in text(up)
    assert b.outputs()["phase"] == "Failed"
    b.run("destroy", "--yes")
    b.config("netpeer:errorOnNotBound", "true")
    failed = b.up(check=False)
    assert failed.returncode != 0
    assert "is Failed (OverlappingPrefixes)" in text(failed) and "(netpeer:errorOnNotBound is true)" in text(failed)
    assert phase_of(b, "to-a") == ("Failed", "OverlappingPrefixes")
