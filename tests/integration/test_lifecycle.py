"""The life of a peering through the real gRPC API, on real OVN."""

from __future__ import annotations

from datetime import timedelta

import pytest

from netpeer import errors
from netpeer.ovn import names


def rows(d, table, kind=None):
    return [r for r in d.owned_rows().get(table, []) if kind is None or r[names.KIND] == kind]


def peer_ports(d):
    return rows(d, "Logical_Router_Port", "peer-port")


def test_network_create_programs_router_and_switch(netpeerd):
    a = netpeerd.tenant("team-a")
    net = a.create_network("team-a", "net-a", ["10.1.0.0/24", "fd00:a::/64"], description="A")
    assert net["uid"] and net["subnets"] == ["10.1.0.0/24", "fd00:a::/64"]
    assert net["peerings"] == [] and net["peered_networks"] == []
    out = netpeerd.ovn.nbctl("--bare", "--columns=networks", "find", "Logical_Router_Port",
                             f"name={names.lan_router_port(net['uid'])}")
    assert "10.1.0.1/24" in out and "fd00:a::1/64" in out
    assert len(rows(netpeerd, "Logical_Router", "router")) == 1
    assert len(rows(netpeerd, "Logical_Switch", "switch")) == 1


def test_pending_bound_withdrawn(netpeerd):
    a, b = netpeerd.tenant("team-a"), netpeerd.tenant("team-b")
    na = a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    nb = b.create_network("team-b", "net-b", ["10.2.0.0/24"], routes=["10.9.0.0/24 via 10.2.0.5"])

    p = a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    assert (p["phase"], p["reason"]) == ("Pending", "AwaitingRemote")
    assert p["expires_at"] is not None and p["remote_uid"] is None
    assert peer_ports(netpeerd) == []

    q = b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    assert (q["phase"], q["reason"]) == ("Bound", "Bound")
    assert q["remote_uid"] == na["uid"] and q["expires_at"] is None
    p = a.get_peering("team-a", "net-a", "to-b")
    assert p["phase"] == "Bound" and p["remote_uid"] == nb["uid"]
    assert p["last_phase_transition_time"] >= q["create_time"]
    assert len(peer_ports(netpeerd)) == 2
    routes = netpeerd.ovn.nbctl("lr-route-list", names.router(na["uid"]))
    assert "10.2.0.0/24" in routes and "10.9.0.0/24" in routes  # subnets and extra routes exported
    assert len(rows(netpeerd, "Logical_Router_Policy")) == 8  # 4 anti-spoofing policies a side

    view = a.get_network("team-a", "net-a")
    # The peer as the remote network represented here: its site ("": this one) and what it exports.
    assert view["peered_networks"] == [{"namespace": "team-b", "name": "net-b", "uid": nb["uid"], "site": "",
                                        "prefixes": ["10.2.0.0/24", "10.9.0.0/24"]}]
    assert view["peerings"][0]["phase"] == "Bound"

    b.delete_peering("team-b", "net-b", "to-a")
    p = a.get_peering("team-a", "net-a", "to-b")
    assert (p["phase"], p["reason"]) == ("Pending", "RemoteWithdrawn")
    assert p["expires_at"] is not None
    assert peer_ports(netpeerd) == [] and rows(netpeerd, "Logical_Router_Policy") == []
    assert a.get_network("team-a", "net-a")["peered_networks"] == []


def test_overlap_fails_and_names_prefixes(netpeerd):
    a, b = netpeerd.tenant("team-a"), netpeerd.tenant("team-b")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    b.create_network("team-b", "net-b", ["10.1.0.0/16"])
    a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    q = b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    assert (q["phase"], q["reason"]) == ("Failed", "OverlappingPrefixes")
    assert "10.1.0.0/24" in q["message"] and "10.1.0.0/16" in q["message"]
    assert a.get_peering("team-a", "net-a", "to-b")["phase"] == "Failed"
    assert peer_ports(netpeerd) == []


def test_overlap_with_another_bound_peer_fails(netpeerd):
    a, b, c = (netpeerd.tenant(ns) for ns in ("team-a", "team-b", "team-c"))
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    c.create_network("team-c", "net-c", ["10.1.0.0/25"])  # overlaps A, not B
    a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    assert b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")["phase"] == "Bound"
    b.create_peering("team-b", "net-b", "to-c", "net-c", "team-c")
    r = c.create_peering("team-c", "net-c", "to-b", "net-b", "team-b")
    assert (r["phase"], r["reason"]) == ("Failed", "OverlappingPrefixes")
    assert "team-a" not in r["message"]  # the third network is not revealed
    # A withdraws: the conflict is gone and B-C binds.
    a.delete_peering("team-a", "net-a", "to-b")
    assert c.get_peering("team-c", "net-c", "to-b")["phase"] == "Bound"
    assert b.get_peering("team-b", "net-b", "to-a")["reason"] == "RemoteWithdrawn"


def test_no_enumeration(netpeerd):
    """Missing, invisible and non-consenting remotes give the same answer, to
    a validate-only create (what a Pulumi preview asks) as to a real one."""
    a, b = netpeerd.tenant("team-a"), netpeerd.tenant("team-b")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    b.create_network("team-b", "exists", ["10.2.0.0/24"])
    answers: dict[bool, list] = {True: [], False: []}
    for validate_only in (True, False):
        for i, (ns, net) in enumerate([("team-b", "missing"), ("secret-ns", "hidden"), ("team-b", "exists")]):
            p = a.create_peering("team-a", "net-a", f"p{i}", net, ns, validate_only=validate_only)
            answers[validate_only].append({k: p[k] for k in ("phase", "reason", "remote_uid", "expires_at")} | {
                "message": p["message"].replace(f"{ns}/{net}", "X"), "name": p["name"][:1]})
    for answer in answers[True] + answers[False]:
        answer["expires_at"] = answer["expires_at"][:15]  # same minute
    assert answers[True][0] == answers[True][1] == answers[True][2]
    assert answers[False][0] == answers[False][1] == answers[False][2]
    assert answers[True][0] == answers[False][0]   # a preview says what the create says, no more


def test_network_delete_refused_while_peered(netpeerd):
    a = netpeerd.tenant("team-a")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    a.create_peering("team-a", "net-a", "p1", "other", "team-b")
    with pytest.raises(errors.FailedPrecondition, match="in use by 1 peering.*p1"):
        a.delete_network("team-a", "net-a")
    assert a.get_network("team-a", "net-a")
    a.delete_peering("team-a", "net-a", "p1")
    a.delete_network("team-a", "net-a")
    assert netpeerd.owned_rows() == {}


def skip_ahead(d, seconds: float) -> None:
    """Moves the service's clock ``seconds`` further ahead of real time:
    expiry is judged by it, so a test sees a TTL run out without waiting."""
    before = d.service.clock
    d.service.clock = lambda: before() + timedelta(seconds=seconds)


def test_ttl_expiry_garbage_collects_pending(netpeerd):
    a = netpeerd.tenant("team-a")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    p = a.create_peering("team-a", "net-a", "short", "net-x", "team-x", ttl=timedelta(seconds=90))
    assert p["ttl"] == "90s"
    assert netpeerd.service.expire() == 0
    skip_ahead(netpeerd, 89)
    assert netpeerd.service.expire() == 0
    skip_ahead(netpeerd, 2)
    assert netpeerd.service.expire() == 1
    with pytest.raises(errors.NotFound):
        a.get_peering("team-a", "net-a", "short")


def test_bound_never_expires(netpeerd):
    a, b = netpeerd.tenant("team-a"), netpeerd.tenant("team-b")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b", ttl=timedelta(seconds=90))
    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a", ttl=timedelta(seconds=90))
    skip_ahead(netpeerd, 365 * 86400)
    assert netpeerd.service.expire() == 0
    assert a.get_peering("team-a", "net-a", "to-b")["phase"] == "Bound"


def test_prefix_change_resyncs_peer_routes(netpeerd):
    a, b = netpeerd.tenant("team-a"), netpeerd.tenant("team-b")
    na = a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    b.update_network("team-b", "net-b", routes=["10.20.0.0/16"])
    assert "10.20.0.0/16" in netpeerd.ovn.nbctl("lr-route-list", names.router(na["uid"]))
    b.update_network("team-b", "net-b", subnets=["10.3.0.0/24"], routes=[])
    out = netpeerd.ovn.nbctl("lr-route-list", names.router(na["uid"]))
    assert "10.3.0.0/24" in out and "10.2.0.0/24" not in out and "10.20.0.0/16" not in out
    with pytest.raises(errors.FailedPrecondition, match="10.1.0.0/16 overlaps 10.1.0.0/24 of Bound peer"):
        b.update_network("team-b", "net-b", subnets=["10.3.0.0/24", "10.1.0.0/16"])
    assert b.get_network("team-b", "net-b")["subnets"] == ["10.3.0.0/24"]
    assert a.get_peering("team-a", "net-a", "to-b")["phase"] == "Bound"


def test_uid_pinning_and_recreated_namesake(netpeerd):
    a, b = netpeerd.tenant("team-a"), netpeerd.tenant("team-b")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    nb = b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    # A wrong pinned uid never matches, and says nothing more than Pending.
    p = a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b",
                         remote_uid="00000000-0000-4000-8000-000000000000")
    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    assert a.get_peering("team-a", "net-a", "to-b")["phase"] == "Pending"
    a.delete_peering("team-a", "net-a", "to-b")
    # Bound: learns the uid. B re-creates its network under the same name.
    assert a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")["remote_uid"] == nb["uid"]
    b.delete_peering("team-b", "net-b", "to-a")
    b.delete_network("team-b", "net-b")
    nb2 = b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    assert nb2["uid"] != nb["uid"]
    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    p = a.get_peering("team-a", "net-a", "to-b")
    assert p["phase"] == "Pending" and p["remote_uid"] == nb["uid"]  # the namesake does not inherit it
    assert peer_ports(netpeerd) == []


def test_one_peering_per_remote_and_self_peering(netpeerd):
    a = netpeerd.tenant("team-a")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    a.create_peering("team-a", "net-a", "p1", "net-b", "team-b")
    with pytest.raises(errors.AlreadyExists, match="one peering per remote network"):
        a.create_peering("team-a", "net-a", "p2", "net-b", "team-b")
    with pytest.raises(errors.InvalidArgument, match="cannot peer with itself"):
        a.create_peering("team-a", "net-a", "self", "net-a", None)


def test_same_namespace_peering_defaults_remote_namespace(netpeerd):
    a = netpeerd.tenant("team-a")
    a.create_network("team-a", "one", ["10.1.0.0/24"])
    a.create_network("team-a", "two", ["10.2.0.0/24"])
    p = a.create_peering("team-a", "one", "to-two", "two")
    assert p["remote_namespace"] == "team-a"
    assert a.create_peering("team-a", "two", "to-one", "one")["phase"] == "Bound"


def test_isolation_between_namespaces(netpeerd):
    a, b = netpeerd.tenant("team-a"), netpeerd.tenant("team-b")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    for call in (lambda: b.get_network("team-a", "net-a"),
                 lambda: b.list_networks("team-a"),
                 lambda: b.delete_network("team-a", "net-a"),
                 lambda: b.update_network("team-a", "net-a", description="x"),
                 lambda: b.create_network("team-a", "evil", ["10.5.0.0/24"]),
                 lambda: b.create_peering("team-a", "net-a", "p", "net-b", "team-b"),
                 lambda: b.list_peerings("team-a", "net-a")):
        with pytest.raises(errors.PermissionDenied, match="does not grant namespace 'team-a'"):
            call()
    with pytest.raises(errors.PermissionDenied):
        b.create_token(["team-a"])
    with pytest.raises(errors.Unauthenticated):
        netpeerd.client("np_nope_" + "x" * 30).list_networks("team-a")
    assert a.get_network("team-a", "net-a")["description"] == ""
