"""What the core asks the service before it changes anything (validate-only
calls): previews of creates and updates, replacements that would be refused,
and re-pinning a peering whose remote network was re-created. Against the
real netpeer API on the in-memory dataplane, like test_core_api.py."""

from __future__ import annotations

import pytest

from netpeer_provider import core
from netpeer_provider.core import network, peering
from tests.provider.test_core_api import TO_C, api, server  # noqa: F401  (fixtures)


def names_of(session_, ns):
    with session_.client() as c:
        return [n["name"] for n in c.list_networks(ns)]


def test_preview_asks_and_keeps_nothing(api):
    a = api.session("team-a")
    out = network.preview(a, {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": []}).outputs
    assert out["namespace"] == "team-a" and "uid" not in out
    with api.client(api.token("team-a")) as c:
        assert c.list_networks("team-a") == []
    # What the service refuses, the preview refuses, in the create's words.
    with pytest.raises(core.ServiceError) as info:
        network.preview(a, {"namespace": "team-z", "name": "net-a", "subnets": ["10.1.0.0/24"]})
    assert info.value.kind == "PermissionDenied" and str(info.value).startswith("creating network net-a: ")
    # Not known yet: nothing asked, nothing refused.
    assert network.preview(a, {"name": core.UNKNOWN, "subnets": ["10.1.0.0/24"]}).outputs == {
        "subnets": ["10.1.0.0/24"], "inline_peerings": []}
    # A peering on a network created in the same run (not there yet): no phase, no error.
    assert "phase" not in peering.preview(a, TO_C).outputs


def test_preview_shows_the_phase_a_create_would_give(api):
    a, b = api.session("team-a"), api.session("team-b")
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    network.create(b, {"name": "net-b", "subnets": ["10.1.0.0/24"],
                       "peerings": [{"name": "to-a", "remote_namespace": "team-a", "remote_network": "net-a"}]})
    to_b = {**TO_C, "name": "to-b", "remote_namespace": "team-b", "remote_network": "net-b"}
    seen = peering.preview(a, to_b)
    assert (seen.id, seen.outputs["phase"], seen.outputs["reason"]) == ("", "Failed", "OverlappingPrefixes")
    assert seen.warnings == (f"peering team-a/net-a/to-b would be Failed (OverlappingPrefixes): "
                             f"{seen.outputs['message']}",)
    # Only a warning in a preview, even when the settings make a Failed create an error.
    strict = core.Session(core.Settings(api.endpoint, api.token("team-a"), error_on_not_bound=True))
    assert peering.preview(strict, to_b).outputs["phase"] == "Failed"
    with api.client(api.token("team-a")) as c:
        assert c.list_peerings("team-a", "net-a") == []
    created = peering.create(a, to_b)
    assert {k: created.outputs[k] for k in ("phase", "reason", "message")} == \
        {k: seen.outputs[k] for k in ("phase", "reason", "message")}


def test_preview_reveals_nothing_about_the_remote(api):
    """The validate-only answer is the same for a missing remote, one the
    token cannot see and one that has not consented: no enumeration oracle."""
    a = api.session("team-a")
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    network.create(api.session("team-b"), {"name": "net-b", "subnets": ["10.2.0.0/24"]})
    network.create(api.session("team-c"), {"name": "net-c", "subnets": ["10.3.0.0/24"]})
    answers = []
    for ns, net in (("team-b", "missing"), ("team-c", "net-c"), ("team-b", "net-b")):
        seen = peering.preview(a, {**TO_C, "name": "p", "remote_namespace": ns, "remote_network": net})
        answers.append((seen.id, seen.warnings, {k: v.replace(f"{ns}/{net}", "REMOTE") if isinstance(v, str) else v
                                                 for k, v in seen.outputs.items() if k != "remote_network"
                                                 and k != "remote_namespace"}))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][2]["phase"] == "Pending" and answers[0][2]["reason"] == "AwaitingRemote"


def test_a_refused_replacement_is_caught_before_anything_is_deleted(api):
    a = api.session("team-a")
    net = network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    news = {"namespace": "team-z", "name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": ""}
    d = network.diff(net.outputs, news)
    assert d.replaces == ("namespace",)
    with pytest.raises(core.ServiceError) as info:
        network.validate_replacement(a, net.id, net.outputs, news)
    assert info.value.kind == "PermissionDenied" and str(info.value).startswith("replacing network team-a/net-a: ")
    assert "\n" not in str(info.value)
    network.validate_replacement(a, net.id, net.outputs, {**news, "namespace": None, "name": "net-a2"})
    # A peering replaced under the same name (another remote): its own old half is not held against it.
    p = peering.create(a, TO_C)
    peering.validate_replacement(a, p.id, p.outputs, {**TO_C, "remote_network": "net-d"})
    with pytest.raises(core.ServiceError, match="remote.network"):
        peering.validate_replacement(a, p.id, p.outputs, {**TO_C, "remote_network": "Not_A_Name"})
    with api.client(api.token("team-a")) as c:
        assert [n["name"] for n in c.list_networks("team-a")] == ["net-a"]
        assert [x["remote_network"] for x in c.list_peerings("team-a", "net-a")] == ["net-c"]


def test_a_re_created_remote_is_re_pinned_in_place(api):
    a, b = api.session("team-a"), api.session("team-b")
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    decl_b = {"name": "net-b", "subnets": ["10.2.0.0/24"],
              "peerings": [{"name": "to-a", "remote_namespace": "team-a", "remote_network": "net-a"}]}
    old_b = network.create(b, decl_b)
    to_b = {**TO_C, "name": "to-b", "remote_namespace": "team-b", "remote_network": "net-b"}
    p = peering.create(a, to_b)
    assert p.outputs["phase"] == "Bound" and p.outputs["remote_uid"] == old_b.outputs["uid"]
    network.delete(b, old_b.id, old_b.outputs)
    new_b = network.create(b, decl_b)
    now = peering.read(a, p.id, p.outputs)
    assert (now.outputs["phase"], now.outputs["reason"]) == ("Pending", "RemoteReplaced")
    assert new_b.outputs["uid"] in now.outputs["message"]
    # The program unchanged: no change, but a note saying what to do.
    assert peering.diff(now.outputs, to_b).changes is False
    (note,) = peering.notes(a, now.outputs, to_b)
    assert note.startswith("peering team-a/net-a/to-b is Pending (RemoteReplaced): ") and "set `remote_uid`" in note
    # The new uid pinned: an in-place update, previewed as Bound, then Bound.
    repin = {**to_b, "remote_uid": new_b.outputs["uid"]}
    d = peering.diff(now.outputs, repin)
    assert (d.replaces, d.updates) == ((), ("remote_uid",)) and peering.notes(a, now.outputs, repin) == ()
    assert peering.preview_update(a, p.id, now.outputs, repin).outputs["phase"] == "Bound"
    assert peering.read(a, p.id, now.outputs).outputs["reason"] == "RemoteReplaced"  # the preview kept nothing
    done = peering.update(a, p.id, now.outputs, repin)
    assert done.outputs["phase"] == "Bound" and done.outputs["remote_uid"] == new_b.outputs["uid"]
    # Clearing the pin of a Bound peering changes nothing and is no error.
    assert peering.update(a, p.id, done.outputs, to_b).outputs["phase"] == "Bound"


def test_importing_an_id_that_does_not_exist_names_it(api):
    a = api.session("team-a")
    with pytest.raises(core.ProviderError) as info:
        network.import_(a, "namespaces/team-a/networks/nope")
    assert str(info.value) == ("importing network namespaces/team-a/networks/nope: it does not exist; check the "
                               "id (namespaces/{namespace}/networks/{name})")
    with pytest.raises(core.ProviderError, match=r"^importing peering namespaces/team-a/networks/n/peerings/p: it "
                                                 r"does not exist"):
        peering.import_(a, "namespaces/team-a/networks/n/peerings/p")
