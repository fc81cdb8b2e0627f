"""What users of netpeer's provider plugin hit (issue 33), on the real CLI
with YAML programs: each test is the user's scenario and what they must see."""

from __future__ import annotations

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
