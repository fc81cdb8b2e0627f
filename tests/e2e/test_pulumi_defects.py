"""What a new user hit with netpeer's Pulumi support (issue 13), on the real
CLI with Python stacks (the dynamic providers): each test is the user's
scenario and what they must now see."""

from __future__ import annotations

import time

from tests.e2e.test_pulumi import phase_of

PEERING = "pulumi-python:dynamic/netpeer:NetworkPeering"


def text(result) -> str:
    return result.stdout + result.stderr


def test_a_refused_replace_keeps_the_live_network(stacks, netpeerd):
    """Defect 1: a namespace the token does not grant fails the preview and the
    update with one line, and the live network is still there."""
    a = stacks("tenant-a", netpeerd.token("team-a"))
    a.up()
    uid = a.outputs()["network_uid"]
    a.config("namespace", "team-z")
    preview = a.run("preview", check=False)
    assert preview.returncode != 0
    line = "replacing network team-a/net-a: namespace: token does not grant namespace 'team-z'"
    assert line in text(preview) and "Traceback" not in text(preview)
    up = a.up(check=False)
    assert up.returncode != 0 and line in text(up)
    c = netpeerd.client(netpeerd.token("team-a"))
    assert c.get_network("team-a", "net-a")["uid"] == uid       # not deleted
    assert c.get_peering("team-a", "net-a", "to-b")["phase"] == "Pending"
    assert a.resource("Network", "net-a")["outputs"]["uid"] == uid


def test_a_re_created_remote_network_is_said_and_re_pinned_in_place(stacks, netpeerd):
    """Defect 2: the other team re-creates its network; the half says so
    (RemoteReplaced, how to re-pin), the preview warns, and setting the new
    uid is an in-place update that binds."""
    a = stacks("tenant-a", netpeerd.token("team-a"))
    b = stacks("tenant-b", netpeerd.token("team-b"))
    a.up()
    b.up()
    old_uid = b.outputs()["network_uid"]
    b.run("destroy", "--yes")
    b.up()
    new_uid = b.outputs()["network_uid"]
    a.run("refresh", "--yes", "--run-program")
    out = a.outputs()
    assert (out["phase"], out["reason"]) == ("Pending", "RemoteReplaced")
    assert new_uid in out["message"] and old_uid in out["message"] and "no longer consents" not in out["message"]
    preview = text(a.run("preview", "--diff"))
    assert f"(RemoteReplaced): team-b/net-b was deleted and re-created (uid now {new_uid})" in preview
    assert "set `remote_uid` in the program" in preview
    a.config("remoteUid", new_uid)
    preview = text(a.run("preview", "--diff"))
    assert "replace" not in preview and f'+ remote_uid' in preview
    assert '"Bound"' in preview  # the phase the update would give, asked without changing anything
    a.up()
    out = a.outputs()
    assert (out["phase"], out["remote_uid"]) == ("Bound", new_uid)
    assert a.resource("NetworkPeering", "to-b")["id"].endswith("/to-b")

    # Or clear the pin: once more re-created, an unpinned half is replaced in one `--replace` (delete first).
    a.run("config", "rm", "remoteUid")
    a.up()
    b.run("destroy", "--yes")
    b.up()
    a.run("refresh", "--yes")
    assert phase_of(a) == ("Pending", "RemoteReplaced")
    urn = a.resource("NetworkPeering", "to-b")["urn"]
    replaced = a.up("--replace", urn, check=False)
    assert replaced.returncode == 0, text(replaced)
    assert "not both" not in text(replaced)
    assert phase_of(a) == ("Bound", "Bound")


def test_wait_for_bound_keeps_its_half_so_both_sides_bind(stacks, netpeerd):
    """Defect 3: both sides wait, one after the other: the first times out with
    a warning and its half stays (recorded); the second binds."""
    a = stacks("tenant-a", netpeerd.token("team-a"))
    b = stacks("tenant-b", netpeerd.token("team-b"))
    a.config("waitForBound", "6")
    up = a.up()
    out = text(up)
    assert "peering team-a/net-a/to-b is Pending (AwaitingRemote); waiting up to 6s for Bound" in out  # status
    assert "waited 5s of 6s for Bound" in out
    assert "warning: peering team-a/net-a/to-b is still Pending (AwaitingRemote" in out
    assert "it is kept and binds once the other side consents" in out
    assert phase_of(a) == ("Pending", "AwaitingRemote")                  # recorded
    b.config("waitForBound", "30")
    b.up()
    assert b.outputs()["phase"] == "Bound"
    a.run("refresh", "--yes")
    assert phase_of(a) == ("Bound", "Bound")


def test_wait_for_bound_stops_on_failed_and_error_on_not_bound_fails_recorded(stacks, netpeerd):
    """Defect 3: waiting stops at once on Failed, with the Failed message;
    with netpeer:errorOnNotBound the update fails but keeps the resource."""
    a = stacks("tenant-a", netpeerd.token("team-a"))
    b = stacks("tenant-b", netpeerd.token("team-b"))
    a.up()
    b.config("subnets", '["10.1.0.0/24"]')     # overlaps A's
    b.config("waitForBound", "120")
    t = time.monotonic()
    up = b.up()
    assert time.monotonic() - t < 60
    out = text(up)
    assert "warning: peering team-b/net-b/to-a is Failed (OverlappingPrefixes): " in out
    assert "once the other side has consented" not in out and "still Pending" not in out
    b.config("netpeer:errorOnNotBound", "true")
    b.config("waitForBound", "100")  # an update of the peering, which ends Failed
    failed = b.up(check=False)
    assert failed.returncode != 0
    assert "(netpeer:errorOnNotBound is true)" in text(failed) and "Exception calling" not in text(failed)
    assert b.resource("NetworkPeering", "to-a") is not None


def test_failed_warns_and_preview_shows_the_phase(stacks, netpeerd):
    """Defect 4: the remote consented and the overlap is certain: the preview
    shows Failed and warns; `up` warns (exit 0), or fails with errorOnNotBound."""
    token = netpeerd.token("team-a")
    netpeerd.client(token).create_network("team-a", "net-a", ["10.1.0.0/24"])
    b = stacks("tenant-b", netpeerd.token("team-b"))
    b.config("subnets", '["10.1.0.0/24"]')
    b.up()
    a = stacks("tests/e2e/programs/peering-only", token)
    for key, value in (("network", "net-a"), ("remoteNamespace", "team-b"), ("remoteNetwork", "net-b")):
        a.config(key, value)
    preview = text(a.run("preview"))
    assert 'phase : "Failed"' in preview and "would be Failed (OverlappingPrefixes)" in preview
    assert netpeerd.client(token).list_peerings("team-a", "net-a") == []   # the preview kept nothing
    up = a.up()
    assert "warning: peering team-a/net-a/to-b is Failed (OverlappingPrefixes)" in text(up)
    assert a.outputs()["phase"] == "Failed"
    a.run("destroy", "--yes")
    a.config("netpeer:errorOnNotBound", "true")
    failed = a.up(check=False)
    assert failed.returncode != 0 and "is Failed (OverlappingPrefixes)" in text(failed)
    assert phase_of(a) == ("Failed", "OverlappingPrefixes")              # recorded all the same


def test_pulumi_import_as_documented_writes_the_code(stacks, netpeerd):
    """Defect 5: the README's `pulumi import` works (exit 0) and prints code on
    pulumi_netpeer; a missing id is named, the plugin is not blamed."""
    token = netpeerd.token("team-a")
    c = netpeerd.client(token)
    c.create_network("team-a", "net-a", ["10.1.0.0/24"])
    c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b", description="made by hand")
    s = stacks("tenant-a", token, name="importer")
    plain = {"PULUMI_PYTHON_CMD": ""}   # as a user's shell has it: the project's virtualenv is used
    out = s.run("import", PEERING, "adopted", "namespaces/team-a/networks/net-a/peerings/to-b", "--yes",
                env=plain).stdout
    assert "import pulumi_netpeer as" in out and 'description="made by hand"' in out
    r = s.resource("NetworkPeering", "adopted")
    assert r["outputs"]["phase"] == "Pending"
    s.run("state", "delete", r["urn"], "--yes", "--force")
    missing = s.run("import", PEERING, "gone", "namespaces/team-a/networks/net-a/peerings/nope", "--yes",
                    check=False, env=plain)
    assert missing.returncode != 0
    assert ("importing peering namespaces/team-a/networks/net-a/peerings/nope: it does not exist; check the id"
            in text(missing))
    assert "plugin" not in text(missing).lower() and "Exception calling" not in text(missing)


def test_an_imported_network_shows_no_spurious_diff(stacks, netpeerd):
    """Defect 5: the program leaves the namespace to its default; the import
    and the next preview show no `- namespace`."""
    token = netpeerd.token("team-a")
    netpeerd.client(token).create_network("team-a", "net-a", ["10.1.0.0/24", "fd00:a::/64"],
                                          description="made by hand")
    netpeerd.client(token).create_peering("team-a", "net-a", "to-b", "net-b", "team-b",
                                          description="team A consents to team B")
    a = stacks("tenant-a", token)
    for kind, name, rid in (("Network", "net-a", "namespaces/team-a/networks/net-a"),
                            ("NetworkPeering", "to-b", "namespaces/team-a/networks/net-a/peerings/to-b")):
        a.run("import", f"pulumi-python:dynamic/netpeer:{kind}", name, rid, "--yes", "--protect=false",
              "--generate-code=false")
    preview = text(a.run("preview", "--diff"))
    # Only what the program changes: the description (not the namespace it leaves to its default).
    assert '~ description: "made by hand" => "team A\'s network"' in preview
    assert "namespace" not in preview.split("Resources:")[0].replace("namespaces/", "")


def test_renaming_a_peering_resource_says_aliases_and_works_with_them(stacks, netpeerd):
    """Defect 5: a renamed NetworkPeering resource fails with a message naming
    `aliases`; with the alias it is the same peering."""
    s = stacks("tests/e2e/programs/rename", netpeerd.token("team-a"))
    s.up()
    s.config("resourceName", "to-b-renamed")
    failed = s.up(check=False)
    assert failed.returncode != 0
    assert "one peering per remote network; perhaps this resource was renamed in the program (give it its old " \
           "name in the `aliases` resource option" in text(failed)
    s.config("aliasOf", "to-b")
    s.up()
    assert s.outputs()["name"] == "to-b-renamed"
    peerings = netpeerd.client(netpeerd.token("team-a")).list_peerings("team-a", "net-a")
    assert [p["name"] for p in peerings] == ["to-b-renamed"]


def test_errors_are_one_line(stacks, netpeerd):
    """Defect 5: a service refusal reads as its one line (no "Exception calling
    application:"); a peering declared inline and as a resource is one line,
    no traceback."""
    token = netpeerd.token("team-a")
    netpeerd.client(token).create_network("team-a", "net-a", ["10.1.0.0/24"])
    a = stacks("tenant-a", token)
    up = a.up(check=False)
    assert up.returncode != 0
    assert "error: creating network net-a: network team-a/net-a already exists" in text(up)
    assert "Exception calling application" not in text(up)
    twice = stacks("tests/e2e/programs/twice", netpeerd.token("team-c"))
    r = twice.run("preview", check=False)
    assert r.returncode != 0
    assert ("peering net-a/to-b is declared inline on Network 'net-a' and as NetworkPeering 'to-b': a peering is "
            "managed either inline in Network(peerings=[...]) or as a NetworkPeering resource, not both") in text(r)
    assert "Traceback" not in text(r)
