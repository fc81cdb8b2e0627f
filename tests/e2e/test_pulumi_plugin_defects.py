"""What users of netpeer's provider plugin hit (issue 33), on the real CLI
with YAML programs: each test is the user's scenario and what they must see."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.e2e.test_pulumi import phase_of

RENAME = "tests/e2e/programs/yaml-rename"


def text(result) -> str:
    return result.stdout + result.stderr


def test_renaming_a_network_replaces_its_peering(stacks, netpeerd, pulumi_languages):
    """Defect 1: the peering's `network` is not known while its network is
    replaced; preview and up treat it as unknown (never sent to the service
    as a name) and the replaced peering binds again."""
    a = stacks("tenant-a", netpeerd.token("team-a"))
    a.up()
    b = stacks(RENAME, netpeerd.token("team-b"))
    b.up()
    assert phase_of(b, "to-a") == ("Bound", "Bound")
    a.config("remoteNetwork", "net-b2")   # team A follows the rename
    a.up()
    b.config("networkName", "net-b2")
    preview = b.run("preview", "--diff", check=False)
    assert preview.returncode == 0, text(preview)
    assert "is not a valid name" not in text(preview) and "replace" in preview.stdout
    up = b.up(check=False)
    assert up.returncode == 0, text(up)
    assert phase_of(b, "to-a") == ("Bound", "Bound")
    c = netpeerd.client(netpeerd.token("team-b"))
    assert [n["name"] for n in c.list_networks("team-b")] == ["net-b2"]
    assert c.get_peering("team-b", "net-b2", "to-a")["phase"] == "Bound"


def test_a_refresh_shows_no_input_only_setting(stacks, netpeerd, pulumi_languages):
    """Defect 6: a program that leaves waitForProgrammed out sees no
    `+ waitForProgrammed: false` (nor any other change) after a refresh."""
    b = stacks("yaml-tenant", netpeerd.token("team-b"))
    b.up()
    preview = b.run("preview", "--refresh", "--diff")
    assert "waitForProgrammed" not in text(preview) and "waitForBound" not in text(preview), preview.stdout
    refresh = b.run("refresh", "--yes", "--diff")
    assert "waitForProgrammed" not in text(refresh), refresh.stdout
    preview = b.run("preview", "--diff")
    assert "waitForProgrammed" not in text(preview) and "~ netpeer" not in preview.stdout, preview.stdout


def test_wait_for_programmed_ends_on_programmed(stacks, netpeerd, pulumi_languages):
    """Defect 6: the last progress line of a wait for Programmed says Programmed."""
    a = stacks("tenant-a", netpeerd.token("team-a"))
    a.up()
    b = stacks(RENAME, netpeerd.token("team-b"))
    b.config("waitForBound", "60")
    b.config("waitForProgrammed", "true")
    out = text(b.up())
    lines = [line for line in out.splitlines() if "peering team-b/net-b/to-a is " in line and "dataplane" in line]
    assert lines, out
    assert "dataplane Programmed" in lines[-1], lines
    assert "warning" not in out
    # The outputs say where the dataplane is, in YAML (the plugin) and in Python (the dynamic provider).
    outs = b.resource("NetworkPeering", "to-a")["outputs"]
    assert outs["dataplane"] == "Programmed" and outs["programmedAt"], outs
    drift = a.run("preview", "--refresh", "--diff").stdout
    assert "+ programmed_at" in drift, drift        # A's half bound, and the binding reached every chassis
    a.run("refresh", "--yes")
    assert a.resource("NetworkPeering", "to-b")["outputs"]["dataplane"] == "Programmed"


def test_the_venv_on_path_does_not_warn_of_an_ambient_plugin(stacks, netpeerd, pulumi_languages):
    """Defect 6: with the project's virtualenv active (its bin first on PATH),
    a preview does not warn "using pulumi-resource-netpeer from $PATH"."""
    b = stacks("yaml-tenant", netpeerd.token("team-b"))
    venv_bin = Path(sys.prefix) / "bin"
    active = {"PATH": f"{venv_bin}:{b.env['PATH']}", "VIRTUAL_ENV": sys.prefix}
    preview = b.run("preview", env=active)
    assert "from $PATH" not in text(preview), text(preview)
    assert "netpeer:index:NetworkPeering" in preview.stdout


def test_the_stack_token_wins_over_the_environment(stacks, netpeerd, pulumi_languages):
    """Defect 5: NETPEER_TOKEN holds the admin token (every namespace); the
    stack's own netpeer:token (team-b) is the one used, in YAML and Python."""
    from tests.support import ADMIN_TOKEN
    admin = {"NETPEER_TOKEN": ADMIN_TOKEN, "NETPEER_ENDPOINT": "127.0.0.1:1"}
    a = stacks("tenant-a", netpeerd.token("team-a"))
    up = a.run("up", "--yes", env=admin, check=False)
    assert up.returncode == 0, text(up)
    b = stacks("yaml-tenant", netpeerd.token("team-b"))
    up = b.run("up", "--yes", env=admin, check=False)
    assert up.returncode == 0, text(up)
    assert "namespace is required" not in text(up)
    assert phase_of(b, "to-a") == ("Bound", "Bound")
    assert b.resource("Network", "net-b")["outputs"]["namespace"] == "team-b"
    # The environment is the fallback: without the stack's settings, they are used.
    b.run("config", "rm", "netpeer:token")
    b.run("config", "rm", "netpeer:endpoint")
    fallback = {"NETPEER_TOKEN": netpeerd.token("team-b"), "NETPEER_ENDPOINT": netpeerd.endpoint}
    preview = b.run("preview", "--refresh", env=fallback, check=False)
    assert preview.returncode == 0, text(preview)


def test_get_network_reads_an_existing_network(stacks, netpeerd, pulumi_languages):
    """The getNetwork function (OpenTofu's netpeer_network data source) from
    a YAML program: the network's uid, prefixes and peerings; a network that
    does not exist is one line naming it."""
    token = netpeerd.token("team-b")
    c = netpeerd.client(token)
    made = c.create_network("team-b", "net-b", ["10.2.0.0/24"])
    c.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    s = stacks("tests/e2e/programs/yaml-get-network", token)
    s.up()
    out = s.outputs()
    assert (out["id"], out["namespace"], out["uid"], out["subnets"]) == \
        ("namespaces/team-b/networks/net-b", "team-b", made["uid"], ["10.2.0.0/24"])
    assert [(p["name"], p["phase"], p["dataplane"]) for p in out["peerings"]] == [("to-a", "Pending", "Programmed")]
    s.config("networkName", "nope")
    missing = s.run("preview", check=False)
    assert missing.returncode != 0
    assert "network team-b/nope not found (or the token cannot see it)" in text(missing)
    assert "Traceback" not in text(missing)
    c.delete_peering("team-b", "net-b", "to-a")
    c.delete_network("team-b", "net-b")


def test_python_get_network_reads_an_existing_network(netpeerd, monkeypatch):
    """The Python SDK's get_network (settings from the environment here: no stack)."""
    import pulumi
    import pytest

    import pulumi_netpeer as netpeer
    token = netpeerd.token("team-b")
    made = netpeerd.client(token).create_network("team-b", "net-b", ["10.2.0.0/24"], description="B")
    monkeypatch.setenv("NETPEER_ENDPOINT", netpeerd.endpoint)
    monkeypatch.setenv("NETPEER_TOKEN", token)
    found = netpeer.get_network("net-b")
    assert (found.id, found.uid, found.subnets, found.description, found.peerings) == \
        ("namespaces/team-b/networks/net-b", made["uid"], ["10.2.0.0/24"], "B", [])
    with pytest.raises(pulumi.RunError, match=r"^network team-b/nope not found \(or the token cannot see it\)$"):
        netpeer.get_network("nope", namespace="team-b")
    netpeerd.client(token).delete_network("team-b", "net-b")
