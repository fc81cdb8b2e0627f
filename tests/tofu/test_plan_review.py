"""What a reviewer reads in a ``tofu plan`` (issue 33): the service's checks run at plan time, with
each refusal on its attribute; the phase a create, update or rename would give is known in the
plan (``tofu show -json`` too); replacing or deleting a Bound half warns, naming the peer it
disconnects; every invalid field of a resource is reported in one run. Real tofu, real netpeerd."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from netpeer.core.models import TokenLimits
from netpeer.service.budget import Budgets
from tests.tofu.test_netpeer import errors

pytestmark = pytest.mark.tofu

MODULE = """
terraform {
  required_providers {
    netpeer = { source = "netpeer/netpeer" }
  }
}
variable "subnets" {
  type    = list(string)
  default = ["10.1.0.0/24"]
}
variable "name" {
  type    = string
  default = "to-b"
}
resource "netpeer_network" "a" {
  name    = "net-a"
  subnets = var.subnets
}
resource "netpeer_peering" "to_b" {
  network          = netpeer_network.a.name
  name             = var.name
  remote_namespace = "team-b"
  remote_network   = "net-b"
}
"""

PEERS = """
resource "netpeer_peering" "to_c" {
  network          = netpeer_network.a.name
  name             = "to-c"
  remote_namespace = "team-c"
  remote_network   = "net-c"
}
resource "netpeer_peering" "to_d" {
  network          = netpeer_network.a.name
  name             = "to-d"
  remote_namespace = "team-d"
  remote_network   = "net-d"
}
"""


def warnings(proc) -> list[str]:
    return [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if line.startswith("Warning: ")]


def planned(module, *args: str) -> tuple[dict, dict]:
    """``tofu plan -out`` then ``tofu show -json``: each resource's planned values, and what is unknown."""
    module.run("plan", "-input=false", "-out=review.plan", *args)
    shown = json.loads(module.run("show", "-json", "review.plan").stdout)
    changes = {r["address"]: r["change"] for r in shown["resource_changes"]}
    return ({a: c["after"] for a, c in changes.items()}, {a: c["after_unknown"] for a, c in changes.items()})


def test_plan_predicts_the_phase_warns_before_withdrawing_and_checks_like_the_apply(modules, netpeerd):
    # B consents to A; C consents too but overlaps A; D does not know of A.
    netpeerd.tenant("team-b").create_network("team-b", "net-b", ["10.2.0.0/24"])
    netpeerd.tenant("team-b").create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    netpeerd.tenant("team-c").create_network("team-c", "net-c", ["10.1.0.0/25"])
    netpeerd.tenant("team-c").create_peering("team-c", "net-c", "to-a", "net-a", "team-a")
    a = modules("a", "team-a")
    a.write(MODULE)
    a.init()
    a.apply()
    assert a.values("netpeer_peering.to_b")["phase"] == "Bound"

    # Each new peering's phase is known in the plan: Failed (with the overlap), Pending.
    a.write(MODULE + PEERS)
    plan = a.plan(ok=(2,))
    assert re.search(r'\+ phase\s+= "Failed"', plan.stdout) and re.search(r'\+ phase\s+= "Pending"', plan.stdout), \
        plan.stdout
    [failed] = [w for w in warnings(plan) if "to-c" in w]
    assert failed.startswith("Warning: peering team-a/net-a/to-c would be Failed (OverlappingPrefixes): "), failed
    after, unknown = planned(a)
    assert (after["netpeer_peering.to_c"]["phase"], after["netpeer_peering.to_c"]["reason"]) == \
        ("Failed", "OverlappingPrefixes")
    assert "10.1.0.0/25" in after["netpeer_peering.to_c"]["message"], after["netpeer_peering.to_c"]
    assert (after["netpeer_peering.to_d"]["phase"], after["netpeer_peering.to_d"]["reason"]) == \
        ("Pending", "AwaitingRemote")
    assert "phase" not in unknown["netpeer_peering.to_d"], unknown["netpeer_peering.to_d"]
    a.apply()
    assert a.values("netpeer_peering.to_c")["phase"] == "Failed"
    assert a.values("netpeer_peering.to_d")["phase"] == "Pending"

    # A subnet that overlaps the Bound peer fails the plan, on `subnets`; nothing is applied.
    a.write(MODULE)
    a.apply()
    bad = a.run("plan", "-input=false", "-var", 'subnets=["10.1.0.0/24", "10.2.0.0/25"]', ok=(1,))
    text = bad.stdout + bad.stderr
    [line] = errors(bad)
    assert line == ("Error: updating network net-a: subnets/routes of team-a/net-a: 10.2.0.0/25 overlaps "
                    "10.2.0.0/24 of Bound peer team-b/net-b; nothing was changed"), text
    assert re.search(r'in resource "netpeer_network" "a":\n\s*\d+:\s+subnets = var.subnets', text), text
    assert netpeerd.client().get_network("team-a", "net-a")["subnets"] == ["10.1.0.0/24"]

    # A rename replaces the Bound half: the plan says it stays Bound, and warns of the withdrawal.
    plan = a.plan("-var", "name=to-b2", ok=(2,))
    assert "netpeer_peering.to_b must be replaced" in plan.stdout, plan.stdout
    assert not re.search(r"phase\s+=.*known after apply", plan.stdout), plan.stdout  # unchanged: Bound
    assert warnings(plan) == ["Warning: peering team-a/net-a/to-b is Bound to team-b/net-b: replacing it withdraws "
                              "this half, and team-b/net-b is disconnected from team-a/net-a until the new peering "
                              "binds"], plan.stdout + plan.stderr
    after, unknown = planned(a, "-var", "name=to-b2")
    assert after["netpeer_peering.to_b"]["phase"] == "Bound" and "phase" not in unknown["netpeer_peering.to_b"]
    a.apply("-var", "name=to-b2")
    assert a.values("netpeer_peering.to_b")["phase"] == "Bound"
    assert [p["name"] for p in netpeerd.client().list_peerings("team-a", "net-a")] == ["to-b2"]

    # Destroying warns the same way.
    plan = a.run("plan", "-destroy", "-input=false")
    assert warnings(plan) == ["Warning: peering team-a/net-a/to-b2 is Bound to team-b/net-b: deleting it withdraws "
                              "this half, and team-b/net-b is disconnected from team-a/net-a"], plan.stdout


def test_every_invalid_field_of_a_resource_in_one_plan(modules, netpeerd):
    a = modules("a", "team-a")
    a.write(MODULE.split("variable")[0] + """
resource "netpeer_network" "bad" {
  name    = "net-bad"
  subnets = ["10.1.0.0/33", "10.2.0.0/24", "10.2.0.0/25"]
  routes  = ["10.9.0.0/24 via 10.2.0.999"]
}
""")
    a.init()
    out = a.run("plan", "-input=false", ok=(1,))
    text = out.stdout + out.stderr
    assert sorted(errors(out)) == sorted([
        "Error: subnets[0]: '10.1.0.0/33' is not a CIDR prefix (like 10.0.0.0/24)",
        "Error: routes[0].next_hop: '10.2.0.999' is not an IP address",
        "Error: subnets[2]: '10.2.0.0/25' overlaps subnets[1] (10.2.0.0/24)",
    ]), text
    assert text.count('in resource "netpeer_network" "bad"') == 3, text
    assert netpeerd.client().list_networks("team-a") == []


def test_a_plan_of_many_peerings_waits_for_the_token_budget(modules, netpeerd):
    """A plan asks the service once per resource, ten at a time: when the token's validate-only budget
    runs out, the service says when to retry, and the plan waits for it instead of failing."""
    netpeerd.tenant("team-a").create_network("team-a", "net-a", ["10.1.0.0/24"])
    # A small budget (spent by a few calls) refills in seconds: a plan of 16 peerings outruns it.
    netpeerd.service.budgets = Budgets(TokenLimits(validate_only_lock_share=0.01,
                                                   validate_only_burst=timedelta(milliseconds=1)))
    a = modules("a", "team-a")
    a.write(MODULE.split("variable")[0] + """
resource "netpeer_peering" "many" {
  count            = 16
  network          = "net-a"
  name             = "to-x${count.index}"
  remote_namespace = "team-x"
  remote_network   = "net-x${count.index}"
}
""")
    a.init()
    after, unknown = planned(a, "-parallelism=16")
    phases = [(after[f"netpeer_peering.many[{i}]"]["phase"], "phase" in unknown[f"netpeer_peering.many[{i}]"])
              for i in range(16)]
    assert phases == [("Pending", False)] * 16, phases


def test_the_predicted_phase_reveals_nothing_a_create_would_not(modules, netpeerd):
    """A remote network that does not exist, one that exists but has not consented, and one whose
    namespace the token cannot see plan alike (names blanked): Pending, AwaitingRemote."""
    netpeerd.tenant("team-a").create_network("team-a", "net-a", ["10.1.0.0/24"])
    netpeerd.tenant("team-e").create_network("team-e", "net-e", ["10.5.0.0/24"])   # exists, no consent
    a = modules("a", "team-a")
    remotes = {"missing": ("team-d", "net-d"), "silent": ("team-e", "net-e"), "other": ("team-e", "net-q")}
    a.write(MODULE.split("variable")[0] + "".join(f"""
resource "netpeer_peering" "{key}" {{
  network          = "net-a"
  name             = "to-{key}"
  remote_namespace = "{ns}"
  remote_network   = "{net}"
}}
""" for key, (ns, net) in remotes.items()))
    a.init()
    after, _ = planned(a)

    def blanked(key: str) -> tuple:
        v = after[f"netpeer_peering.{key}"]
        ns, net = remotes[key]
        return v["phase"], v["reason"], v["message"].replace(f"{ns}/{net}", "REMOTE").replace(f"to-{key}", "NAME")
    seen = {key: blanked(key) for key in remotes}
    assert len(set(seen.values())) == 1 and seen["missing"][:2] == ("Pending", "AwaitingRemote"), seen
