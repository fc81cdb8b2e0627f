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

    # A new peering's phase is known in the plan when the other side cannot change it before the apply
    # (Failed, with the overlap); a Pending one is said in a warning, its phase known after apply (the
    # other side may consent meanwhile, and OpenTofu holds a provider to every known planned value).
    a.write(MODULE + PEERS)
    plan = a.plan(ok=(2,))
    assert re.search(r'\+ phase\s+= "Failed"', plan.stdout), plan.stdout
    [failed] = [w for w in warnings(plan) if "to-c" in w]
    assert failed.startswith("Warning: peering team-a/net-a/to-c would be Failed (OverlappingPrefixes): "), failed
    [pending] = [w for w in warnings(plan) if "to-d" in w]
    assert pending.startswith("Warning: peering team-a/net-a/to-d would be Pending (AwaitingRemote): "), pending
    after, unknown = planned(a)
    assert (after["netpeer_peering.to_c"]["phase"], after["netpeer_peering.to_c"]["reason"]) == \
        ("Failed", "OverlappingPrefixes")
    assert "10.1.0.0/25" in after["netpeer_peering.to_c"]["message"], after["netpeer_peering.to_c"]
    assert unknown["netpeer_peering.to_d"].get("phase") is True, unknown["netpeer_peering.to_d"]
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
    plan = a.plan("-parallelism=16", ok=(2,))
    pending = [w for w in warnings(plan) if "would be Pending (AwaitingRemote)" in w]
    assert len(pending) == 16, plan.stdout + plan.stderr   # every resource asked, none refused


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
    said = warnings(a.plan(ok=(2,)))

    def blanked(key: str) -> str:
        [line] = [w for w in said if f"/to-{key} " in w]
        ns, net = remotes[key]
        return line.replace(f"{ns}/{net}", "REMOTE").replace(f"to-{key}", "NAME")
    seen = {key: blanked(key) for key in remotes}
    assert len(set(seen.values())) == 1, seen
    assert seen["missing"].startswith("Warning: peering team-a/net-a/NAME would be Pending (AwaitingRemote): "), seen


def test_an_apply_after_the_other_side_consented_takes_the_new_phase(modules, netpeerd):
    """The plan said Pending (in a warning); B consents before A applies that saved plan: the apply
    succeeds and the state holds Bound (with Pending known in the plan, OpenTofu failed this apply:
    "Provider produced inconsistent final plan")."""
    netpeerd.tenant("team-b").create_network("team-b", "net-b", ["10.2.0.0/24"])
    a = modules("a", "team-a")
    a.write(MODULE)
    a.init()
    a.apply("-target=netpeer_network.a")
    _, unknown = planned(a)
    assert unknown["netpeer_peering.to_b"].get("phase") is True, unknown
    netpeerd.tenant("team-b").create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    applied = a.run("apply", "-input=false", "review.plan", ok=(0, 1))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert a.values("netpeer_peering.to_b")["phase"] == "Bound"
    assert a.plan(ok=(0,)).returncode == 0   # and the next plan has nothing to do
