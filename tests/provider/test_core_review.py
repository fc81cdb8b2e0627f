"""What every face shows a reviewer, from the core (issue 33): the status a
rename takes over, the warnings a replace or delete of a Bound half gives,
refusals split per field, and which predictions a plan may show as known.
Against the real netpeer API on the in-memory dataplane, like test_core_api.py."""

from __future__ import annotations

import pytest

from netpeer_provider import core
from netpeer_provider.core import network, peering, review
from tests.provider.test_core_api import TO_C, api, server  # noqa: F401  (fixtures)

TO_B = {**TO_C, "name": "to-b", "remote_namespace": "team-b", "remote_network": "net-b"}


def bound_pair(api):
    a, b = api.session("team-a"), api.session("team-b")
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    network.create(b, {"name": "net-b", "subnets": ["10.2.0.0/24"],
                       "peerings": [{"name": "to-a", "remote_namespace": "team-a", "remote_network": "net-a"}]})
    return a, peering.create(a, TO_B)


def test_a_rename_previews_the_status_it_takes_over_and_warns(api):
    a, created = bound_pair(api)
    assert created.outputs["phase"] == "Bound"
    renamed = {**TO_B, "name": "to-b2"}
    seen = peering.preview(a, renamed)
    assert (seen.outputs["phase"], seen.outputs["reason"]) == ("Bound", "Bound")
    assert review.withdrawals(created.outputs, replacing=True) == (
        "peering team-a/net-a/to-b is Bound to team-b/net-b: replacing it withdraws this half, and team-b/net-b "
        "is disconnected from team-a/net-a until the new peering binds",)
    assert review.withdrawals(created.outputs, replacing=False)[0].endswith(
        "deleting it withdraws this half, and team-b/net-b is disconnected from team-a/net-a")
    assert review.withdrawals({**created.outputs, "phase": "Pending"}, replacing=False) == ()
    # The rename done: the new half is Bound, as predicted.
    peering.delete(a, created.id, created.outputs)
    assert peering.create(a, renamed).outputs["phase"] == "Bound"
    # A network warns for its inline Bound halves only.
    b = api.session("team-b")
    net_b = network.read(b, "namespaces/team-b/networks/net-b", {"inline_peerings": [{"name": "to-a"}]})
    assert [w.split(":")[0] for w in review.withdrawals(net_b.outputs, replacing=False)] == [
        "peering team-b/net-b/to-a is Bound to team-a/net-a"]
    assert review.withdrawals({**net_b.outputs, "inline_peerings": []}, replacing=False) == ()


@pytest.mark.message_text("the exact line of each invalid field, netpeerd's words included")
def test_refusals_are_split_per_field(api):
    a = api.session("team-a")
    with pytest.raises(core.ServiceError) as info:
        a.call("creating network net-x", lambda c: c.create_network(
            "team-a", "net-x", ["10.1.0.0/33", "10.2.0.0/24", "10.2.0.0/25"], ["10.9.0.0/24 via 10.2.0.999"]))
    assert [(f.path, f.message) for f in review.refusals(info.value)] == [
        ("subnets[0]", "creating network net-x: subnets[0]: '10.1.0.0/33' is not a CIDR prefix (like 10.0.0.0/24)"),
        ("routes[0].next_hop", "creating network net-x: routes[0].next_hop: '10.2.0.999' is not an IP address"),
        ("subnets[2]", "creating network net-x: subnets[2]: '10.2.0.0/25' overlaps subnets[1] (10.2.0.0/24)"),
    ]
    _, failures = network.check({"name": "net-x", "subnets": ["10.1.0.0/33", "10.2.0.0/24", "10.2.0.0/25"],
                                 "routes": ["10.9.0.0/24 via 10.2.0.999"]})
    assert [f.path for f in failures] == ["subnets[0]", "routes[0].next_hop", "subnets[2]"]


def test_only_what_the_apply_cannot_change_by_itself_is_predicted():
    pending = {"phase": "Pending", "reason": "AwaitingRemote", "message": "waiting"}
    assert review.predicted(peering, pending, 0) == pending
    assert review.predicted(peering, pending, 30) == {}            # the wait may end Bound
    assert review.predicted(peering, {**pending, "phase": "Bound"}, 30)["phase"] == "Bound"
    assert review.predicted(peering, {"phase": core.UNKNOWN}, 0) == {}
    assert review.predicted(network, {"phase": "Bound", "reason": "Bound", "message": "m"}, 0) == {}
