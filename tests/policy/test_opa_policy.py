"""netpeer's Rego rules (examples/policy/opa) over real OpenTofu plans: `tofu plan -out` and `tofu show
-json` of root modules using netpeer's provider against a real netpeerd, then the real `opa eval` (built
from its Go module by scripts/install-opa.sh, cached). It reports exactly the violations, and its
--fail-defined exit code gates a pipeline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT, short_tmpdir
from tests.tofu.harness import Home, Module, tofu_bin

POLICY = ROOT / "examples/policy/opa"
DENY = "data.netpeer.peering.deny"

HEADER = """
terraform {
  required_providers {
    netpeer = { source = "netpeer/netpeer", version = "~> 0.1" }
  }
}

resource "netpeer_network" "p" {
  name    = "net-p"
  subnets = ["10.7.0.0/24"]
}
"""


def peering(label: str, remote_namespace: str, description: str, remote_site: str = "", namespace: str = "") -> str:
    own = f'namespace = "{namespace}"' if namespace else ""
    return f"""
resource "netpeer_peering" "{label}" {{
  {own}
  network          = netpeer_network.p.name
  name             = "{label.replace('_', '-')}"
  remote_namespace = "{remote_namespace}"
  remote_network   = "net-r"
  remote_site      = "{remote_site}"
  description      = "{description}"
}}
"""


@pytest.fixture(scope="module")
def opa() -> Path:
    out = subprocess.run(["bash", str(ROOT / "scripts/install-opa.sh")], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        pytest.fail(f"opa is not available: {out.stderr.strip()[-2000:]}")
    path = Path(out.stdout.strip().splitlines()[-1]) / "opa"
    assert os.access(path, os.X_OK), path
    return path


@pytest.fixture(scope="module")
def tofu_home():
    root = short_tmpdir("np-opa-home-")
    try:
        yield Home(root, tofu_bin())
    finally:
        shutil.rmtree(root, ignore_errors=True)


def planned(module: Module) -> Path:
    """The plan of ``module`` as `tofu show -json` prints it, in a file."""
    module.run("plan", "-input=false", "-out=plan.bin")
    path = module.dir / "plan.json"
    path.write_text(module.run("show", "-json", "plan.bin").stdout)
    return path


def evaluate(opa: Path, plan: Path, settings: Path) -> tuple[list[str], subprocess.CompletedProcess]:
    """The violations `opa eval` reports, and the exit code of the gate (--fail-defined on deny[_])."""
    out = subprocess.run([str(opa), "eval", "-f", "json", "-d", str(POLICY / "peering.rego"), "-d", str(settings),
                          "-i", str(plan), DENY], capture_output=True, text=True, timeout=120, check=True)
    found = json.loads(out.stdout)["result"][0]["expressions"][0]["value"]
    gate = subprocess.run([str(opa), "eval", "--fail-defined", "-f", "pretty", "-d", str(POLICY / "peering.rego"),
                           "-d", str(settings), "-i", str(plan), f"{DENY}[message]"],
                          capture_output=True, text=True, timeout=120)
    return sorted(found), gate


def test_opa_rules_over_tofu_plans(opa, tofu_home, netpeerd, state_dir):
    settings = state_dir / "settings.json"
    settings.write_text(json.dumps({"netpeer_settings": {"allowed_namespaces": ["team-a", "shared"]}}))

    def module(name: str, text: str) -> Module:
        m = Module(tofu_home, state_dir / name, NETPEER_ENDPOINT=netpeerd.endpoint,
                   NETPEER_TOKEN=netpeerd.token("team-b"))
        m.write(HEADER + text)
        m.init()
        return m

    # Compliant: an allow-listed namespace, a description, a cross-site peering with its label, a peering
    # inside the module's own namespace (named: the token's default is not known to the plan).
    good = module("good", peering("to_a", "team-a", "billing reads the ledger")
                  + peering("to_west", "shared", "backups [cross-site-approved: NET-42]", "west")
                  + peering("in_own", "team-b", "inside our own namespace", namespace="team-b"))
    plan = planned(good)
    changes = {rc["address"]: rc["change"] for rc in json.loads(plan.read_text())["resource_changes"]}
    assert changes["netpeer_peering.to_west"]["actions"] == ["create"]
    assert changes["netpeer_peering.to_west"]["after"]["remote_site"] == "west"
    found, gate = evaluate(opa, plan, settings)
    assert found == [] and gate.returncode == 0, (found, gate.stdout, gate.stderr)

    # One peering breaking each rule, and one breaking none: exactly the three violations.
    bad = module("bad", peering("to_x", "team-x", "why")
                 + peering("silent", "team-a", "  ")
                 + peering("unlabelled", "team-a", "no label [my-cross-site-approved: 1]", "west")
                 + peering("fine", "shared", "why"))
    found, gate = evaluate(opa, planned(bad), settings)
    assert found == [
        "netpeer-cross-site-label: netpeer_peering.unlabelled: reaches site \"west\" without the label "
        "'cross-site-approved: VALUE' in its description",
        "netpeer-peer-namespace-allow-list: netpeer_peering.to_x: peers with namespace \"team-x\", which is not "
        "on the allow-list (team-a, shared)",
        "netpeer-peering-description: netpeer_peering.silent: has no description: say why the two networks are "
        "peered",
    ]
    assert gate.returncode == 1 and "netpeer_peering.to_x" in gate.stdout, (gate.stdout, gate.stderr)

    # Applied (this netpeerd has no transit switch to "west": same-site only), a plan without changes
    # judges nothing; an update that drops the description is judged.
    good.write(HEADER + peering("to_a", "team-a", "billing reads the ledger"))
    good.apply()
    found, _ = evaluate(opa, planned(good), settings)
    assert found == []
    good.write(HEADER + peering("to_a", "team-a", ""))
    plan = planned(good)
    changes = {rc["address"]: rc["change"]["actions"] for rc in json.loads(plan.read_text())["resource_changes"]}
    assert changes["netpeer_peering.to_a"] == ["update"], changes
    found, _ = evaluate(opa, plan, settings)
    assert found == ["netpeer-peering-description: netpeer_peering.to_a: has no description: say why the two "
                     "networks are peered"]
    good.run("destroy", "-auto-approve", "-input=false")
