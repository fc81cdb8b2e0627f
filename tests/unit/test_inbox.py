"""The request inbox in the service, on each store (SQLite, PostgreSQL):
what the target's owner lists, dismisses and accepts, and that the
requester's half is the same whatever the target does. The API, the CLI
and the oracle timing on a real netpeerd: tests/integration/test_inbox.py."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from netpeer import errors
from netpeer.core.models import Caller, Phase
from netpeer.service import Service, batch
from netpeer.service.memory import MemoryDataplane
from tests.pgsupport import make_store
from tests.unit.test_service import Clock

ADMIN = Caller("admin", frozenset(), True)
A, B, C = (Caller(x, frozenset({x})) for x in ("a", "b", "c"))


@pytest.fixture(params=["sqlite", "postgresql"])
def world(request, tmp_path):
    cluster = request.getfixturevalue("pg_cluster") if request.param == "postgresql" else None
    store = make_store(request.param, tmp_path, cluster)
    clock = Clock()
    service = Service(store, MemoryDataplane(), clock=clock)
    service.create_network(ADMIN, "a", "web", ["10.1.0.0/24"], routes=["10.11.0.0/16"])
    service.create_network(ADMIN, "b", "db", ["10.2.0.0/24"])
    service.create_network(ADMIN, "b", "cache", ["10.3.0.0/24"])
    yield service, clock
    store.close()


def shown(p) -> tuple:
    """The requester's half as its owner sees it, but the revision."""
    return dataclasses.replace(p, revision=0)


def test_a_half_naming_a_network_is_a_request_its_owner_lists(world):
    service, clock = world
    half = service.create_peering(A, "a", "web", "to-db", "b", "db", ttl="2h")
    [r] = service.list_peering_requests(B, "b")
    assert (r.requester, r.half.name, r.prefixes) == (half.network_key, "to-db", ("10.1.0.0/24", "10.11.0.0/16"))
    assert r.expires_at == half.create_time + timedelta(hours=2)
    assert r.id.startswith("a.web.to-db.")
    assert service.list_peering_requests(B, "b", "db") == [r]
    assert service.list_peering_requests(B, "b", "cache") == []


def test_only_the_target_namespace_sees_a_request(world):
    service, _ = world
    service.create_peering(A, "a", "web", "to-db", "b", "db")
    assert service.list_peering_requests(ADMIN, "b") != []
    with pytest.raises(errors.PermissionDenied) as err:
        service.list_peering_requests(C, "b")
    assert err.value.reason == "NAMESPACE_DENIED"
    # The requester's own namespace holds no request: it made it, it was not made to it.
    assert service.list_peering_requests(A, "a") == []
    for caller, ns, net in ((C, "b", "db"), (A, "b", "db")):
        with pytest.raises(errors.PermissionDenied):
            service.dismiss_peering_request(caller, ns, net, "a.web.to-db.000000000000")
        with pytest.raises(errors.PermissionDenied):
            service.accept_peering_request(caller, ns, net, "a.web.to-db.000000000000", "x")


def test_dismissed_is_not_listed_again_and_the_requester_sees_no_difference(world):
    service, clock = world
    service.create_peering(A, "a", "web", "to-db", "b", "db")
    before = shown(service.get_peering(A, "a", "web", "to-db"))
    [r] = service.list_peering_requests(B, "b")
    service.dismiss_peering_request(B, "b", "db", r.id)
    service.dismiss_peering_request(B, "b", "db", r.id)   # twice: no error
    assert service.list_peering_requests(B, "b") == []
    assert shown(service.get_peering(A, "a", "web", "to-db")) == before
    # A half made again is a new request.
    service.delete_peering(A, "a", "web", "to-db")
    clock.now += timedelta(seconds=1)
    service.create_peering(A, "a", "web", "to-db", "b", "db")
    [again] = service.list_peering_requests(B, "b")
    assert again.id != r.id


def test_accept_makes_the_matching_half_and_both_bind(world):
    service, _ = world
    service.create_peering(A, "a", "web", "to-db", "b", "db")
    [r] = service.list_peering_requests(B, "b")
    mine = service.accept_peering_request(B, "b", "db", r.id, "from-web")
    assert (mine.phase, mine.remote_key.namespace, mine.remote_network, mine.remote_uid) == \
        (Phase.BOUND, "a", "web", r.half.network_uid)
    assert service.get_peering(A, "a", "web", "to-db").phase == Phase.BOUND
    assert service.list_peering_requests(B, "b") == []
    # Accepting again: the create's own refusal.
    with pytest.raises(errors.AlreadyExists) as err:
        service.accept_peering_request(B, "b", "db", r.id, "again")
    assert err.value.reason == "REMOTE_ALREADY_PEERED"


def test_accept_of_a_withdrawn_request_is_refused_in_one_line(world):
    service, _ = world
    service.create_peering(A, "a", "web", "to-db", "b", "db")
    [r] = service.list_peering_requests(B, "b")
    service.delete_peering(A, "a", "web", "to-db")
    for call in (lambda: service.accept_peering_request(B, "b", "db", r.id, "from-web"),
                 lambda: service.dismiss_peering_request(B, "b", "db", r.id)):
        with pytest.raises(errors.NotFound) as err:
            call()
        assert err.value.reason == "REQUEST_WITHDRAWN" and "\n" not in str(err.value)
    # Nothing was made.
    assert service.list_peerings(B, "b", "db") == []
    # An id of another network's request, and a malformed one.
    service.create_peering(A, "a", "web", "to-cache", "b", "cache")
    [other] = service.list_peering_requests(B, "b", "cache")
    with pytest.raises(errors.NotFound) as err:
        service.accept_peering_request(B, "b", "db", other.id, "x")
    assert err.value.reason == "REQUEST_WITHDRAWN"
    with pytest.raises(errors.NotFound) as err:
        service.accept_peering_request(B, "b", "db", "not an id", "x")
    assert err.value.reason == "REQUEST_NOT_FOUND"


def test_accept_whose_prefixes_now_overlap_answers_what_a_create_answers(world):
    service, _ = world
    service.create_peering(A, "a", "web", "to-db", "b", "db")
    [r] = service.list_peering_requests(B, "b")
    service.update_network(B, "b", "db", subnets=["10.1.0.0/25"])   # now inside a/web's subnet
    accepted = service.accept_peering_request(B, "b", "db", r.id, "from-web")
    service.delete_peering(B, "b", "db", "from-web")
    created = service.create_peering(B, "b", "db", "from-web", "a", "web", remote_uid=r.half.network_uid)
    assert (accepted.phase, accepted.reason, accepted.message) == (created.phase, created.reason, created.message)
    assert accepted.phase == Phase.FAILED and accepted.reason == "OverlappingPrefixes"


def test_validate_only_accept_keeps_nothing(world):
    service, _ = world
    service.create_peering(A, "a", "web", "to-db", "b", "db")
    [r] = service.list_peering_requests(B, "b")
    p = service.accept_peering_request(B, "b", "db", r.id, "from-web", validate_only=True)
    assert p.phase == Phase.BOUND
    assert service.list_peerings(B, "b", "db") == [] and service.list_peering_requests(B, "b") == [r]


def test_pages(world):
    service, _ = world
    for i in range(7):
        service.create_network(ADMIN, "a", f"n{i}", [f"10.{50 + i}.0.0/24"])
        service.create_peering(A, "a", f"n{i}", "to-db", "b", "db" if i % 2 else "cache")
    seen, after = [], ""
    while True:
        page = service.list_peering_requests(B, "b", after=after, limit=3)
        seen += page
        if len(page) < 3:
            break
        from netpeer.service.inbox import encode_after
        after = encode_after(page[-1])
    assert [(r.target.name, r.requester.name) for r in seen] == sorted(
        (("db" if i % 2 else "cache"), f"n{i}") for i in range(7))


def test_watch_events_of_requests_go_to_the_target_namespace_only(world):
    service, _ = world
    heads = {ns: service.watch_head(ns) for ns in ("a", "b")}
    service.create_peering(A, "a", "web", "to-db", "b", "db")
    [r] = service.list_peering_requests(B, "b")
    service.dismiss_peering_request(B, "b", "db", r.id)
    b_events, _ = service.watch_events("b", None, heads["b"])
    assert [(e.kind, e.type, e.name, e.network) for e in b_events] == [
        ("peering_request", "Created", r.id, "db"), ("peering_request", "Deleted", r.id, "db")]
    assert b_events[0].obj == r
    a_events, _ = service.watch_events("a", None, heads["a"])
    assert {e.kind for e in a_events} == {"peering"}


def test_a_request_comes_back_when_the_target_withdraws_unless_dismissed(world):
    service, _ = world
    service.create_peering(A, "a", "web", "to-db", "b", "db")
    [r] = service.list_peering_requests(B, "b")
    service.accept_peering_request(B, "b", "db", r.id, "from-web")
    head = service.watch_head("b")
    service.delete_peering(B, "b", "db", "from-web")       # the requester's half is Pending again
    assert service.get_peering(A, "a", "web", "to-db").reason == "RemoteWithdrawn"
    assert service.list_peering_requests(B, "b") == [dataclasses.replace(r, half=service.get_peering(
        A, "a", "web", "to-db"))]
    events, _ = service.watch_events("b", None, head)
    assert [(e.kind, e.type) for e in events if e.kind == "peering_request"] == [("peering_request", "Created")]
    # Dismissed, then accepted and withdrawn again: it stays dismissed.
    service.dismiss_peering_request(B, "b", "db", r.id)
    service.accept_peering_request(B, "b", "db", r.id, "from-web")
    head = service.watch_head("b")
    service.delete_peering(B, "b", "db", "from-web")
    assert service.list_peering_requests(B, "b") == []
    events, _ = service.watch_events("b", None, head)
    assert [e for e in events if e.kind == "peering_request"] == []


def test_requests_to_namespaces_without_networks_keep_no_revisions(world):
    """Any name can be named: requests to 40 namespaces without networks add
    no namespace's revisions (they are listed, and watched from the first network on)."""
    service, _ = world
    with service.store.read() as tx:
        before = tx._one("SELECT count(*) FROM namespace_revisions")[0]
    service.create_peerings(A, [batch.PeeringRequest("a", "web", f"to-{i}", "db", f"nobody-{i}")
                                for i in range(40)])
    with service.store.read() as tx:
        assert tx._one("SELECT count(*) FROM namespace_revisions")[0] == before + 1   # a's own (and "")
    assert [r.half.name for r in service.list_peering_requests(ADMIN, "nobody-7")] == ["to-7"]
    # A namespace with a network gets its events.
    service.create_network(ADMIN, "nobody-8", "db", ["10.8.0.0/24"])
    service.create_network(ADMIN, "a", "api", ["10.9.0.0/24"])
    head = service.watch_head("nobody-8")
    service.create_peering(A, "a", "api", "to-8", "nobody-8", "db")
    events, _ = service.watch_events("nobody-8", None, head)
    assert [(e.kind, e.type) for e in events] == [("peering_request", "Created")]
