"""netpeer's provider through the real ``tofu`` against a real netpeerd on real OVN: what a user of
OpenTofu sees. The root modules are examples/opentofu/ (copied) or written here; the provider is
found in OpenTofu's implied local mirror of a HOME of the tests' own, where the project's install
script put it (no CLI configuration file)."""

from __future__ import annotations

import json
import re
import time

import pytest

pytestmark = pytest.mark.tofu

PEERING_A = "namespaces/team-a/networks/net-a/peerings/to-b"


def errors(proc) -> list[str]:
    """The diagnostics' summary lines tofu printed."""
    return [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if line.startswith("Error: ")]


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
    # ... and where its dataplane is: the binding reached every chassis (Programming while one lags).
    assert re.search(r'\+ programmed_at\s+= "20', drift.stdout), drift.stdout
    a.apply("-refresh-only")
    out = a.outputs()
    assert (out["phase"], out["reason"]) == ("Bound", "Bound")
    assert out["remote_uid"] == b.outputs()["network_uid"]
    assert out.get("expires_at") is None, "a Bound peering never expires"  # null outputs are left out
    assert out["dataplane"] == "Programmed" and out["programmed_at"], out
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


MODULE = """
terraform {
  required_providers {
    netpeer = { source = "netpeer/netpeer" }
  }
}
provider "netpeer" {}
variable "subnets" {
  type    = list(string)
  default = ["10.1.0.0/24", "FD00:A:0::/64"]  # spelled unlike the service: plans must stay empty
}
variable "description" {
  type    = string
  default = null
}
variable "remote_network" {
  type    = string
  default = "net-b"
}
variable "ttl" {
  type    = string
  default = "168h"  # the service says 7d
}
resource "netpeer_network" "a" {
  name    = "net-a"
  subnets = var.subnets
}
resource "netpeer_peering" "to_b" {
  network          = netpeer_network.a.name
  name             = "to-b"
  remote_namespace = "team-b"
  remote_network   = var.remote_network
  description      = var.description
  ttl              = var.ttl
}
"""


def test_update_in_place_and_replace(modules, netpeerd):
    a = modules("a", "team-a")
    a.write(MODULE)
    a.init()
    a.apply()
    a.plan()  # the declared spellings (168h, FD00:A:0::/64) are kept: nothing to do
    c = netpeerd.client()
    assert c.get_network("team-a", "net-a")["subnets"] == ["10.1.0.0/24", "fd00:a::/64"]
    first = c.get_peering("team-a", "net-a", "to-b")
    assert first["ttl"] == "7d"

    # description and ttl: the peering is updated in place
    plan = a.plan("-var", "description=reviewed by security", "-var", "ttl=2d", ok=(2,))
    assert "netpeer_peering.to_b will be updated in-place" in plan.stdout, plan.stdout
    assert "Plan: 0 to add, 1 to change, 0 to destroy." in plan.stdout and "replace" not in plan.stdout
    a.apply("-var", "description=reviewed by security", "-var", "ttl=2d")
    p = c.get_peering("team-a", "net-a", "to-b")
    assert (p["description"], p["ttl"]) == ("reviewed by security", "2d")
    a.plan("-var", "description=reviewed by security", "-var", "ttl=2d")
    # leaving description out again clears it
    plan = a.plan("-var", "ttl=2d", ok=(2,))
    assert re.search(r'~ description\s+= "reviewed by security" -> null', plan.stdout) \
        or re.search(r'- description\s+= "reviewed by security"', plan.stdout) \
        or re.search(r'~ description\s+= "reviewed by security" -> ""', plan.stdout), plan.stdout
    a.apply("-var", "ttl=2d")
    assert c.get_peering("team-a", "net-a", "to-b")["description"] == ""

    # subnets: the network is updated in place, same uid
    uid = c.get_network("team-a", "net-a")["uid"]
    wider = '["10.1.0.0/24", "fd00:a::/64", "10.3.0.0/24"]'
    plan = a.plan("-var", f"subnets={wider}", "-var", "ttl=2d", ok=(2,))
    assert "netpeer_network.a will be updated in-place" in plan.stdout and "0 to add, 1 to change" in plan.stdout
    a.apply("-var", f"subnets={wider}", "-var", "ttl=2d")
    n = c.get_network("team-a", "net-a")
    assert n["uid"] == uid and n["subnets"] == ["10.1.0.0/24", "fd00:a::/64", "10.3.0.0/24"]

    # the remote: the peering is replaced (deleted first: its name is unique)
    plan = a.plan("-var", f"subnets={wider}", "-var", "ttl=2d", "-var", "remote_network=net-z", ok=(2,))
    assert "netpeer_peering.to_b must be replaced" in plan.stdout, plan.stdout
    assert re.search(r'~ remote_network\s+= "net-b" -> "net-z" # forces replacement', plan.stdout), plan.stdout
    assert "Plan: 1 to add, 0 to change, 1 to destroy." in plan.stdout
    a.apply("-var", f"subnets={wider}", "-var", "ttl=2d", "-var", "remote_network=net-z")
    p = c.get_peering("team-a", "net-a", "to-b")
    assert p["remote_network"] == "net-z" and p["last_phase_transition_time"] >= first["last_phase_transition_time"]
    a.plan("-var", f"subnets={wider}", "-var", "ttl=2d", "-var", "remote_network=net-z")


def test_unknown_values_are_tolerated_during_plan(modules, netpeerd):
    a = modules("a", "team-a")
    a.write("""
terraform {
  required_providers {
    netpeer = { source = "netpeer/netpeer" }
  }
}
resource "terraform_data" "name" { input = "net-u" }  # its output is known only after apply
resource "netpeer_network" "u" {
  name    = terraform_data.name.output
  subnets = ["10.5.0.0/24"]
}
resource "netpeer_peering" "p" {
  network        = netpeer_network.u.name
  name           = "to-x"
  remote_network = terraform_data.name.output
  ttl            = "1h"
}
""")
    a.init()
    plan = a.plan(ok=(2,))
    assert re.search(r'\+ name\s+= \(known after apply\)', plan.stdout), plan.stdout
    assert "Plan: 3 to add" in plan.stdout
    # ...and what the plan could not check is refused once known, in one line: it peers with itself.
    out = a.apply(ok=(1,))
    assert errors(out) == ["Error: creating peering net-u/to-x: remote.network: 'team-a/net-u' is the peering's own "
                      "network; a network cannot peer with itself"], out.stdout + out.stderr
    assert [n["name"] for n in netpeerd.client().list_networks("team-a")] == ["net-u"]


def test_import_by_command_and_by_block_then_empty_plan(modules, netpeerd):
    c = netpeerd.tenant("team-a")
    c.create_network("team-a", "net-a", ["10.1.0.0/24", "fd00:a::/64"])
    c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    a = modules("a", "team-a")
    a.write(MODULE.replace('default = "168h"  # the service says 7d', 'default = null'))
    a.init()

    bad = a.run("import", "-input=false", "netpeer_peering.to_b", "net-a/to-b", ok=(1,))
    assert errors(bad) == ["Error: id: 'net-a/to-b' is not a peering id "
                           "(namespaces/NS/networks/NETWORK/peerings/NAME)"], bad.stdout + bad.stderr
    missing = a.run("import", "-input=false", "netpeer_network.a", "namespaces/team-a/networks/net-q", ok=(1,))
    assert errors(missing) == ["Error: importing network namespaces/team-a/networks/net-q: it does not exist; "
                               "check the id (namespaces/{namespace}/networks/{name})"], missing.stdout + missing.stderr

    a.run("import", "-input=false", "netpeer_network.a", "namespaces/team-a/networks/net-a")
    a.run("import", "-input=false", "netpeer_peering.to_b", PEERING_A)
    assert a.values("netpeer_peering.to_b")["phase"] == "Pending"
    a.plan()  # adopted as declared: nothing to do

    # The same with an import block, planned and applied like any change.
    a.run("state", "rm", "netpeer_peering.to_b")
    a.write(f'import {{\n  to = netpeer_peering.to_b\n  id = "{PEERING_A}"\n}}\n', "imports.tf")
    plan = a.plan(ok=(2,))
    assert "Plan: 1 to import, 0 to add, 0 to change, 0 to destroy." in plan.stdout, plan.stdout
    a.apply()
    (a.dir / "imports.tf").unlink()
    a.plan()
    assert a.values("netpeer_peering.to_b")["id"] == PEERING_A


def test_out_of_band_delete_shows_as_deleted_and_comes_back(modules, netpeerd):
    a = modules("a", "team-a", example="tenant-a")
    a.init()
    a.apply()
    netpeerd.tenant("team-a").delete_peering("team-a", "net-a", "to-b")
    drift = a.plan("-refresh-only", ok=(2,))
    assert "netpeer_peering.to_b has been deleted" in drift.stdout, drift.stdout
    plan = a.plan(ok=(2,))
    assert "netpeer_peering.to_b will be created" in plan.stdout
    a.apply()
    assert a.outputs()["phase"] == "Pending"
    assert netpeerd.client().get_peering("team-a", "net-a", "to-b")["phase"] == "Pending"


BAD = """
terraform {
  required_providers {
    netpeer = { source = "netpeer/netpeer" }
  }
}
resource "netpeer_network" "good" {
  name    = "net-ok"
  subnets = ["10.7.0.0/24"]
}
resource "netpeer_network" "bad" {
  name    = "net-a"
  subnets = ["10.1.0.5/24"]
}
resource "netpeer_peering" "bad" {
  network        = netpeer_network.good.name
  name           = "internal"
  remote_network = "net-b"
  wait_for_bound = "soon"
  ttl            = "400d"
}
"""


def test_bad_input_is_a_diagnostic_on_the_attribute_and_nothing_is_applied(modules, netpeerd):
    a = modules("a", "team-a")
    a.write(BAD)
    a.init()
    for cmd in (("plan", "-input=false"), ("apply", "-auto-approve", "-input=false")):
        out = a.run(*cmd, ok=(1,))
        text = out.stdout + out.stderr
        assert sorted(errors(out)) == sorted([
            "Error: subnets[0]: '10.1.0.5/24' has host bits set; did you mean 10.1.0.0/24?",
            "Error: name: 'internal' is reserved",
            "Error: wait_for_bound: 'soon' is not a duration (like 0s, 90s, 2m, 1m30s)",
            "Error: ttl: '400d' must be between 1s and 365d",
        ]), text
        # each points at the line of the attribute
        assert re.search(r'on main.tf line 13, in resource "netpeer_network" "bad":\n\s*13:\s+subnets = ', text), text
        assert re.search(r'line 19, in resource "netpeer_peering" "bad":\n\s*19:\s+wait_for_bound = "soon"', text)
    assert netpeerd.client().list_networks("team-a") == [], "nothing may be applied"

    # A refusal of the service is one line too, naming the object.
    netpeerd.tenant("team-a").create_network("team-a", "net-ok", ["10.7.0.0/24"])
    a.write(BAD.split('resource "netpeer_network" "bad"')[0])
    out = a.apply(ok=(1,))
    assert errors(out) == ["Error: creating network net-ok: network team-a/net-ok already exists"], out.stdout + out.stderr


def test_mixed_opentofu_and_pulumi_tenants_end_bound(modules, stacks, netpeerd):
    a = modules("a", "team-a", example="tenant-a")
    a.init()
    # A waits for B's consent; B has not declared it yet: the apply warns in one line and keeps A's half
    # (B may be waiting for it).
    out = a.apply("-var", "wait_for_bound=1s")
    text = out.stdout + out.stderr
    assert errors(out) == [], text
    [line] = [x for x in text.splitlines() if x.startswith("Warning: peering ")]
    assert line.startswith("Warning: peering team-a/net-a/to-b is still Pending (AwaitingRemote"), text
    assert "after wait_for_bound=1s; it is kept and binds once the other side consents" in line, line
    assert [p["name"] for p in netpeerd.client().list_peerings("team-a", "net-a")] == ["to-b"]
    assert a.values("netpeer_peering.to_b")["phase"] == "Pending"

    b = stacks("tenant-b", netpeerd.token("team-b"))
    b.up()
    assert b.outputs()["phase"] == "Bound"
    a.apply("-var", "wait_for_bound=2m")
    assert a.outputs()["phase"] == "Bound" and a.outputs()["remote_uid"] == b.outputs()["network_uid"]
    b.run("refresh", "--yes")
    assert b.resource("NetworkPeering", "to-a")["outputs"]["phase"] == "Bound"
    assert b.resource("NetworkPeering", "to-a")["outputs"]["remote_uid"] == a.outputs()["network_uid"]
    a.plan("-var", "wait_for_bound=2m")


TIMEOUTS = """
terraform {
  required_providers {
    netpeer = { source = "netpeer/netpeer" }
  }
}
resource "netpeer_network" "a" {
  name    = "net-a"
  subnets = ["10.1.0.0/24"]
}
resource "netpeer_peering" "to_b" {
  network          = netpeer_network.a.name
  name             = "to-b"
  remote_namespace = "team-b"
  remote_network   = "net-b"
  wait_for_bound   = "1h"
  timeouts {
    create = "%s"
  }
}
"""


def test_timeouts_bound_the_wait_for_bound(modules, netpeerd):
    """`timeouts { create = ... }` cuts the wait for Bound short (the half is
    kept, with the usual warning); a bad duration is one diagnostic naming the
    attribute and the value; changing only the block touches nothing."""
    a = modules("a", "team-a")
    a.write(TIMEOUTS % "soon")
    a.init()
    out = a.run("plan", "-input=false", ok=(1,))
    assert errors(out) == ["Error: timeouts.create: 'soon' is not a duration (like 0s, 90s, 2m, 1m30s)"], \
        out.stdout + out.stderr
    assert re.search(r'line 18, in resource "netpeer_peering" "to_b":\n\s*18:\s+create = "soon"', out.stderr), out.stderr

    a.write(TIMEOUTS % "3s")
    started = time.monotonic()
    apply = a.apply()
    elapsed = time.monotonic() - started
    print("[tofu_timeouts] " + json.dumps({"apply_s": round(elapsed, 1), "timeout_s": 3, "wait_for_bound_s": 3600}))
    text = apply.stdout + apply.stderr
    assert "Warning: peering team-a/net-a/to-b is still Pending (AwaitingRemote" in text, text
    assert "wait_for_bound=3s" in text, text
    assert elapsed < 600, "the apply waited for wait_for_bound (1h), not for timeouts.create (3s)"
    assert netpeerd.client().get_peering("team-a", "net-a", "to-b")["phase"] == "Pending"   # kept
    assert "No changes" in a.plan().stdout
    state = json.loads(a.state_text())
    [peering] = [r for r in state["resources"] if r["type"] == "netpeer_peering"]
    assert peering["instances"][0]["attributes"]["timeouts"] == {"create": "3s", "update": None, "delete": None}

    # Only the block changes: an update in place that asks the service nothing.
    before = netpeerd.client().get_peering("team-a", "net-a", "to-b")["etag"]
    a.write(TIMEOUTS % "10s")
    update = a.apply()
    assert "1 changed" in update.stdout, update.stdout
    assert netpeerd.client().get_peering("team-a", "net-a", "to-b")["etag"] == before

