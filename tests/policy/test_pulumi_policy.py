"""netpeer's CrossGuard policy pack (examples/policy/pulumi) over real previews: `pulumi preview
--policy-pack` with the real CLI, a YAML program (netpeer's provider plugin) and a Python program (the
dynamic providers), against a real netpeerd. The pack runs in its own venv (scripts/install-pulumi-policy.sh),
never the project's: the plugin keeps working beside it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT, short_tmpdir

RULES = ("netpeer-peer-namespace-allow-list", "netpeer-peering-description", "netpeer-cross-site-label")


@pytest.fixture(scope="module")
def policy_pack():
    """A copy of the example pack with its venv linked in (the venv is made once and cached)."""
    root = short_tmpdir("np-policy-")
    pack = root / "pack"
    shutil.copytree(ROOT / "examples/policy/pulumi", pack, ignore=shutil.ignore_patterns("venv", "__pycache__"))
    out = subprocess.run(["bash", str(ROOT / "scripts/install-pulumi-policy.sh"), str(pack)], capture_output=True,
                         text=True, timeout=900)
    if out.returncode != 0:
        pytest.fail(f"the policy pack's venv cannot be made: {out.stderr.strip()[-2000:]}")
    venv = Path(out.stdout.strip().splitlines()[-1])
    assert (pack / "venv").resolve() == venv.resolve()
    (root / "config.json").write_text(json.dumps({
        "netpeer-peer-namespace-allow-list": {"allowedNamespaces": ["team-a", "shared"]},
    }))
    try:
        yield pack
    finally:
        shutil.rmtree(root, ignore_errors=True)


def preview(stack, pack: Path, *, check: bool = True, config: dict | None = None):
    args = ["preview", "--policy-pack", str(pack)]
    if config is not None:
        path = stack.dir / "policy-config.json"
        path.write_text(json.dumps(config))
        args += ["--policy-pack-config", str(path)]
    else:
        args += ["--policy-pack-config", str(pack.parent / "config.json")]
    return stack.run(*args, check=check)


def violations(result) -> dict[str, str]:
    """Each reported rule -> the text the CLI printed for it (from the rule's line to the next rule's)."""
    text = result.stdout + result.stderr
    marks = sorted((m.start(), m.group(1)) for m in re.finditer(rf"\[\w+\] +({'|'.join(RULES)}) +\(", text))
    ends = [at for at, _ in marks[1:]] + [len(text)]
    return {rule: text[at:end] for (at, rule), end in zip(marks, ends)}


def declare(stack, remote_namespace: str, description: str, remote_site: str = "") -> None:
    stack.config("remoteNamespace", remote_namespace)
    stack.config("description", description)
    stack.config("remoteSite", remote_site)


@pytest.mark.parametrize("program", ["yaml", "python"])
def test_policy_pack_over_previews(program, policy_pack, stacks, netpeerd, pulumi_languages):
    stack = stacks(f"tests/policy/programs/{program}", netpeerd.token("team-b"))
    kind = "netpeer:index:NetworkPeering" if program == "yaml" else "pulumi-python:dynamic/netpeer:NetworkPeering"

    # Compliant: an allow-listed namespace, a description, a cross-site peering with its label.
    declare(stack, "team-a", "billing reads the ledger [cross-site-approved: NET-42]", "west")
    ok = preview(stack, policy_pack)
    assert violations(ok) == {}, ok.stdout
    assert "netpeer-peering-rules" in ok.stdout   # the pack ran

    # One violation of each rule in one preview: each is reported, naming the resource and the rule,
    # and the mandatory rules fail the preview.
    declare(stack, "team-x", "", "west")
    bad = preview(stack, policy_pack, check=False)
    assert bad.returncode != 0
    found = violations(bad)
    assert set(found) == set(RULES), bad.stdout + bad.stderr
    for rule, text in found.items():
        assert f"({kind}: to-remote)" in text, (rule, text)
    assert "peers with namespace 'team-x', which is not on the allow-list (team-a, shared)" \
        in found["netpeer-peer-namespace-allow-list"]
    assert "has no description" in found["netpeer-peering-description"]
    assert "reaches site 'west' without the label 'cross-site-approved: VALUE'" \
        in found["netpeer-cross-site-label"]

    # Each rule alone fails the preview.
    for rule, (ns, description, site) in {
        "netpeer-peer-namespace-allow-list": ("team-x", "why", ""),
        "netpeer-peering-description": ("team-a", "  ", ""),
        "netpeer-cross-site-label": ("team-a", "why, but no label [my-cross-site-approved: x]", "west"),
    }.items():
        if program == "python" and rule != "netpeer-cross-site-label":
            continue   # the YAML program covers each rule alone; the Python one the subtlest
        declare(stack, ns, description, site)
        alone = preview(stack, policy_pack, check=False)
        assert alone.returncode != 0 and set(violations(alone)) == {rule}, (rule, alone.stdout + alone.stderr)

    # The pack's config lowers a rule to advisory: reported, and the preview passes.
    declare(stack, "team-a", "")
    advisory = preview(stack, policy_pack, config={
        "netpeer-peer-namespace-allow-list": {"allowedNamespaces": ["team-a"]},
        "netpeer-peering-description": {"enforcementLevel": "advisory"},
    })
    assert set(violations(advisory)) == {"netpeer-peering-description"}
    assert violations(advisory)["netpeer-peering-description"].startswith("[advisory]")

