"""Many consents in one call (``Service.create_peerings``) on an in-memory
dataplane, on each store (SQLite, and PostgreSQL from tests/pgsupport.py):
all or none, one dataplane transaction, errors naming the request at fault.
The same through gRPC on real OVN: tests/integration/test_batch.py."""

from __future__ import annotations

import threading
import time

import pytest

from netpeer import errors
from netpeer.core.models import Caller
from netpeer.service import Service
from netpeer.service.batch import MAX_REQUESTS, PeeringRequest
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore
from tests.pgsupport import make_store

ADMIN = Caller("admin", frozenset(), True)
TEAM_A = Caller("a", frozenset({"a"}), False)


@pytest.fixture(params=["sqlite", "postgresql"])
def world(request, tmp_path):
    cluster = request.getfixturevalue("pg_cluster") if request.param == "postgresql" else None
    store = make_store(request.param, tmp_path, cluster)
    dataplane = MemoryDataplane()
    service = Service(store, dataplane)
    for i in range(4):
        service.create_network(ADMIN, "a", f"a{i}", [f"10.1.{i}.0/24"])
        service.create_network(ADMIN, "b", f"b{i}", [f"10.2.{i}.0/24"])
    yield service, dataplane
    store.close()


def halves(ns, remote_ns, n=4):
    here, there = ("a", "b") if ns == "a" else ("b", "a")
    return [PeeringRequest(ns, f"{here}{i}", f"to-{there}{i}", f"{there}{i}", remote_ns) for i in range(n)]


def state(service):
    return {(p.namespace, p.network, p.name, p.phase) for ns, n in [("a", "a"), ("b", "b")] for i in range(4)
            for p in service.list_peerings(ADMIN, ns, f"{n}{i}")}


def test_a_batch_binds_every_pair_in_one_dataplane_transaction(world):
    service, dataplane = world
    first = service.create_peerings(TEAM_A, halves("a", "b"))
    assert [p.phase for p in first] == ["Pending"] * 4
    before = dataplane.transactions
    second = service.create_peerings(ADMIN, halves("b", "a"))
    assert [(p.network, p.name, p.phase) for p in second] == [(f"b{i}", f"to-a{i}", "Bound") for i in range(4)]
    assert dataplane.transactions - before == 1
    for i in range(4):
        a = service.get_network(ADMIN, "a", f"a{i}").network
        b = service.get_network(ADMIN, "b", f"b{i}").network
        assert dataplane.peers_of(a.uid) == {b.uid}


def test_both_halves_in_one_batch_answer_bound(world):
    service, _ = world
    both = [halves("a", "b", 1)[0], halves("b", "a", 1)[0]]
    assert [p.phase for p in service.create_peerings(ADMIN, both)] == ["Bound", "Bound"]


def test_one_bad_request_fails_the_batch_names_it_and_changes_nothing(world):
    service, dataplane = world
    before, programmed = state(service), dict(dataplane.networks)
    bad = halves("a", "b")
    bad[2] = PeeringRequest("a", "a2", "to-b2", "b2", "b", ttl="forever")
    with pytest.raises(errors.InvalidArgument) as exc:
        service.create_peerings(ADMIN, bad)
    assert str(exc.value).startswith("requests[2]: ttl: 'forever'") and exc.value.field == "requests[2].ttl"
    # Found only inside the transaction: the third network does not exist.
    missing = halves("a", "b")
    missing[3] = PeeringRequest("a", "nope", "to-b3", "b3", "b")
    with pytest.raises(errors.NotFound, match=r"^requests\[3\]: network a/nope not found$"):
        service.create_peerings(ADMIN, missing)
    # The same peering twice in one batch.
    twice = halves("a", "b", 2) + halves("a", "b", 1)
    with pytest.raises(errors.AlreadyExists, match=r"^requests\[2\]: peering a/a0/to-b0 already exists"):
        service.create_peerings(ADMIN, twice)
    # A namespace the token does not grant, after granted ones.
    with pytest.raises(errors.PermissionDenied, match=r"^requests\[4\]: namespace: token does not grant"):
        service.create_peerings(TEAM_A, halves("a", "b") + halves("b", "a", 1))
    assert state(service) == before and dataplane.networks == programmed


def test_size_limit_empty_batch_and_validate_only(world):
    service, dataplane = world
    with pytest.raises(errors.InvalidArgument, match=rf"^requests: {MAX_REQUESTS + 1} requests in one batch"):
        service.create_peerings(ADMIN, halves("a", "b", 1) * (MAX_REQUESTS + 1))
    assert service.create_peerings(ADMIN, []) == []
    service.create_peerings(ADMIN, halves("a", "b"))
    before = dataplane.transactions
    dry = service.create_peerings(ADMIN, halves("b", "a"), validate_only=True)
    assert [p.phase for p in dry] == ["Bound"] * 4
    assert dataplane.transactions == before
    assert all(p.phase == "Pending" for p in service.list_peerings(ADMIN, "a", "a0"))
    assert service.list_peerings(ADMIN, "b", "b0") == []


def test_batches_are_not_grouped_with_each_other_and_small_writes_still_are(tmp_path):
    """Concurrent writes share one dataplane transaction up to 64 writes by
    weight: a batch of 40 consents is not grouped with another, so a flood
    of batches never makes one NB transaction past the timeout."""
    entered, release = threading.Event(), threading.Event()

    class Slow(MemoryDataplane):
        def sync(self, desired, stamp=None, track=False):
            entered.set()
            release.wait(10)   # the first write holds the queue until every other one waits in it
            return super().sync(desired, stamp, track)

    store = SqliteStore(str(tmp_path / "s.db"))
    service = Service(store, MemoryDataplane())
    for i in range(90):
        service.create_network(ADMIN, "a", f"a{i}", [f"10.1.{i}.0/24"])
        service.create_network(ADMIN, "b", f"b{i}", [f"10.2.{i}.0/24"])
    service.create_peering(ADMIN, "a", "a89", "to-b", "b", "b89")
    service.writes.dataplane = Slow()
    sizes: list[int] = []
    original = service.writes._run_group
    service.writes._run_group = lambda group: (sizes.append(sum(op.weight for op in group)), original(group))

    def batch(first):
        return threading.Thread(target=service.create_peerings, args=(ADMIN, [
            PeeringRequest("a", f"a{i}", "to-b", f"b{i}", "b") for i in range(first, first + 40)]))

    # One bind holds the queue; then two batches and eight single writes queue up, in this order.
    jobs = [threading.Thread(target=service.create_peering, args=(ADMIN, "b", "b89", "to-a", "a", "a89")),
            batch(0), batch(40)]
    jobs += [threading.Thread(target=service.create_peering, args=(ADMIN, "b", f"b{i}", "to-a", "a", f"a{i}"))
             for i in range(80, 88)]
    # Each queued before the next starts (a loaded machine may run threads in any order otherwise).
    jobs[0].start()
    assert entered.wait(10)
    for n, t in enumerate(jobs[1:], start=1):
        t.start()
        deadline = time.monotonic() + 10
        while len(service.writes._pending) < n and time.monotonic() < deadline:
            time.sleep(0.001)
    release.set()
    for t in jobs:
        t.join()
    store.close()
    assert sizes == [1, 40, 48], sizes
