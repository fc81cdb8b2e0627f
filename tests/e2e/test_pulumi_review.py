"""What a reviewer reads in a ``pulumi preview`` (issue 33), with the real
CLI, a YAML program and netpeer's provider plugin: the phase a rename would
give and a warning naming the peer it disconnects, in ``--json`` too; check
errors that name the value (no ``{<nil>}``); every invalid field at once."""

from __future__ import annotations

import json

PEERING = "netpeer:index:NetworkPeering"


def text(result) -> str:
    return result.stdout + result.stderr


def consenting_b(netpeerd) -> None:
    b = netpeerd.tenant("team-b")
    b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")


def test_a_rename_previews_bound_and_warns_of_the_withdrawal(stacks, netpeerd, pulumi_languages):
    consenting_b(netpeerd)
    a = stacks("tests/e2e/programs/review", netpeerd.token("team-a"))
    a.up()
    assert a.outputs()["phase"] == "Bound"
    a.config("peeringName", "to-b2")
    warning = ("peering team-a/net-a/to-b is Bound to team-b/net-b: replacing it withdraws this half, and "
               "team-b/net-b is disconnected from team-a/net-a until the new peering binds")
    # --json: the warning is a diagnostic of the resource (the digest's steps carry no provider outputs).
    shown = json.loads(a.run("preview", "--json").stdout)
    assert [(d["urn"].rsplit("::", 1)[-1], d["severity"]) for d in shown["diagnostics"]
            if warning in d["message"]] == [("to-b", "warning")], shown["diagnostics"]
    [step] = [s for s in shown["steps"] if s["urn"].endswith(f"{PEERING}::to-b")]
    assert step["op"] == "replace" and step["replaceReasons"] == ["name"], step
    # The saved plan: the replacement's predicted state, as a tool reads it.
    plan = a.dir / "review-plan.json"
    a.run("preview", "--save-plan", str(plan))
    plans = json.loads(plan.read_text())["resourcePlans"]
    planned = {urn.rsplit("::", 1)[-1]: r.get("state") for urn, r in plans.items()}
    assert (planned["to-b"]["name"], planned["to-b"]["phase"], planned["to-b"]["reason"]) == ("to-b2", "Bound", "Bound")
    assert planned["netpeer-review-dev"] == {"phase": "Bound"}   # the stack output, predicted
    assert warning in text(a.run("preview"))
    a.up()
    assert a.outputs()["phase"] == "Bound"


def test_check_errors_name_the_value_and_come_all_at_once(stacks, netpeerd, pulumi_languages):
    a = stacks("tests/e2e/programs/review", netpeerd.token("team-a"))
    for key, value in (("subnets[0]", "10.1.0.0/33"), ("subnets[1]", "10.2.0.0/24"), ("subnets[2]", "10.2.0.0/25"),
                       ("routes[0]", "10.9.0.0/24 via 10.2.0.999")):
        a.run("config", "set", "--path", key, value)
    bad = a.run("preview", check=False)
    out = text(bad)
    assert bad.returncode != 0 and "<nil>" not in out, out
    assert "property subnets value {[{10.1.0.0/33} {10.2.0.0/24} {10.2.0.0/25}]} has a problem: subnets[0]" in out, out
    for line in ("subnets[0]: '10.1.0.0/33' is not a CIDR prefix (like 10.0.0.0/24)",
                 "routes[0].nextHop: '10.2.0.999' is not an IP address",
                 "subnets[2]: '10.2.0.0/25' overlaps subnets[1] (10.2.0.0/24)"):
        assert line in out, out
    assert netpeerd.client().list_networks("team-a") == []


def test_the_python_dynamic_face_warns_and_names_values_too(stacks, netpeerd):
    a = stacks("tenant-a", netpeerd.token("team-a"))
    b = stacks("tenant-b", netpeerd.token("team-b"))
    a.up()
    b.up()
    a.run("refresh", "--yes")
    a.config("remoteNetwork", "net-z")   # another remote: a replace of the Bound half
    preview = text(a.run("preview"))
    assert ("peering team-a/net-a/to-b is Bound to team-b/net-b: replacing it withdraws this half, and "
            "team-b/net-b is disconnected from team-a/net-a until the new peering binds") in preview, preview
    a.run("config", "rm", "remoteNetwork")
    a.config("subnets", '["10.1.0.0/33", "10.2.0.0/24", "10.2.0.0/25"]')
    bad = a.run("preview", check=False)
    out = text(bad)
    assert bad.returncode != 0 and "<nil>" not in out, out
    for line in ("subnets[0]: '10.1.0.0/33' is not a CIDR prefix (like 10.0.0.0/24)",
                 "subnets[2]: '10.2.0.0/25' overlaps subnets[1] (10.2.0.0/24)"):
        assert line in out, out
