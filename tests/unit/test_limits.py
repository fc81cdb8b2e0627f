"""Issue 29's service-side limits on an in-memory dataplane: validate-only
calls charged to their token; what a pair may tell of the networks Bound to
its other side, and what telling it costs; a withdrawal that would leave its
own namespace over its Pending quota; slots on site links counted per
namespace and released after their grace. The same on real daemons:
tests/trust/test_budgets.py and tests/integration/test_sites_control.py."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from netpeer import errors
from netpeer.core.models import Caller, Phase, Quotas
from netpeer.service import Service
from netpeer.service.budget import Disclosure, Validation
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore
from tests.unit.test_sites import Federation

ADMIN = Caller("admin", frozenset(), True)


class Clock:
    def __init__(self):
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self):
        return self.now

    def seconds(self) -> float:
        return self.now.timestamp()


def tenant(ns: str) -> Caller:
    return Caller(f"tok-{ns}", frozenset({ns}))


@pytest.fixture
def world(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    clock = Clock()
    service = Service(store, MemoryDataplane(), clock=clock)
    service.budgets.disclosure = Disclosure(5 / 60, 5.0, clock.seconds)
    yield service, clock
    store.close()


def ghosts(ns: str, count: int):
    from netpeer.service.batch import PeeringRequest
    return [PeeringRequest(ns, f"n{i % 4}", f"p{i}", f"ghost{i}", "nowhere") for i in range(count)]


def test_validate_only_calls_are_charged_the_time_they_ran_and_refused_once_spent(world):
    service, clock = world
    mallory = tenant("m")
    for i in range(4):
        service.create_network(mallory, "m", f"n{i}", [f"10.{i}.0.0/24"])
    # A bucket that any dry run empties: the first is admitted, the next refused until it refilled.
    service.budgets.validation = Validation(0.1, 1e-9, clock.seconds)
    made = service.create_peerings(mallory, ghosts("m", 200), validate_only=True)
    assert [p.phase for p in made] == [Phase.PENDING] * 200
    spent = -service.budgets.validation.level(mallory.token_id)
    assert spent > 0
    with pytest.raises(errors.ResourceExhausted) as err:
        service.create_peerings(mallory, ghosts("m", 200), validate_only=True)
    assert err.value.retry_after == pytest.approx(spent / 0.1, rel=0.01)
    assert err.value.message.startswith("validate_only: this token used its share of validation time")
    with pytest.raises(errors.ResourceExhausted):
        service.update_network(mallory, "m", "n0", description="x", validate_only=True)
    # Nothing was made; real writes, other tokens and the admin are not held back.
    assert service.list_peerings(mallory, "m", "n0") == []
    service.create_peering(mallory, "m", "n0", "real", "nowhere", "ghost")
    service.create_network(tenant("v"), "v", "nv", ["10.9.0.0/24"], validate_only=True)
    service.create_peerings(ADMIN, ghosts("m", 10), validate_only=True)
    clock.now += timedelta(seconds=spent / 0.1 + 0.5)
    service.create_network(mallory, "m", "n9", ["10.8.0.0/24"], validate_only=True)


def test_a_dry_run_lets_the_writes_queued_before_it_go_first(world):
    service, _ = world
    import threading
    from netpeer.service.writes import _Pending
    writes = service.writes
    writes.YIELD_WAIT = 30.0     # far longer than any run of this test could take, slow machine or not
    order: list[str] = []
    with writes._pending_lock:      # a write queued, not taken by a group yet
        writes._pending.append(_Pending(lambda tx: (order.append("queued write"), set())))
    dry = threading.Thread(target=writes.dry_run, args=(lambda tx: (order.append("dry run"), set()),))
    started = time.monotonic()
    dry.start()
    time.sleep(0.2)
    assert order == []              # the dry run waits for it ...
    writes.run(lambda tx: (order.append("next write"), set()))   # a group takes the queue
    dry.join(5)
    assert order == ["queued write", "next write", "dry run"]
    assert time.monotonic() - started < writes.YIELD_WAIT / 2   # ... until the queue drained, not for its YIELD_WAIT
    # A queue that never drains holds a dry run back for YIELD_WAIT at most.
    writes.YIELD_WAIT = 0.5
    with writes._pending_lock:
        writes._pending.append(_Pending(lambda tx: (None, set())))
    started = time.monotonic()
    writes.dry_run(lambda tx: (None, set()))
    assert 0.45 < time.monotonic() - started < 2
    with writes._pending_lock:
        writes._pending.clear()


def third_world(service):
    """b/nb is Bound to c/nc (10.121.37.0/24); b declares its half towards a/na."""
    a, b, c = tenant("a"), tenant("b"), tenant("c")
    service.create_network(a, "a", "na", ["10.1.0.0/24"])
    service.create_network(b, "b", "nb", ["10.2.0.0/24"])
    service.create_network(c, "c", "nc", ["10.121.37.0/24"])
    service.create_peering(b, "b", "nb", "to-c", "c", "nc")
    assert service.create_peering(c, "c", "nc", "to-b", "b", "nb").phase == Phase.BOUND
    service.create_peering(b, "b", "nb", "to-a", "a", "na")
    return a, b, c


def probe(service, a, subnet):
    """a/na takes ``subnet`` and asks what its half towards b/nb would be."""
    service.update_network(a, "a", "na", subnets=[subnet])
    return service.create_peering(a, "a", "na", "to-b", "b", "nb", validate_only=True)


def secret_free(text: str) -> bool:
    return "10.121.37" not in text and "c/nc" not in text and "nc" not in text.replace("once", "")


def test_a_pair_says_nothing_of_third_networks_until_it_is_otherwise_ready(world):
    service, _ = world
    a, _, _ = third_world(service)
    # Overlapping b/nb itself (and c/nc too): only the direct overlap is told, and it costs nothing.
    p = probe(service, a, "10.0.0.0/8")
    assert p.phase == Phase.FAILED and p.message == "10.2.0.0/24 of b/nb overlaps 10.0.0.0/8 of a/na"
    assert service.budgets.disclosure.level(a.token_id) == 5
    # Ready otherwise: told that it overlaps a network peered with b/nb, never which one.
    p = probe(service, a, "10.121.0.0/16")
    assert p.phase == Phase.FAILED
    assert p.message == "10.121.0.0/16 of a/na overlaps a network already peered with b/nb"
    assert secret_free(p.message) and service.budgets.disclosure.level(a.token_id) == 4
    assert probe(service, a, "10.122.0.0/16").phase == Phase.BOUND        # nothing found: free
    assert service.budgets.disclosure.level(a.token_id) == 4


def test_probing_a_third_network_is_stopped_by_the_budget(world):
    """The attack of issue 29: a/na halves its prefix towards c/nc's,
    asking with validate-only creates; the sixth conflict is never told."""
    service, clock = world
    a, _, _ = third_world(service)
    told, refused, lo, length = 0, None, 0x0A000000 + (121 << 16), 16   # start from 10.121.0.0/16
    for i in range(1, 20):
        half = f"10.{(lo >> 16) & 255}.{(lo >> 8) & 255}.0/{length + 1}"
        try:
            p = probe(service, a, half)
        except errors.ResourceExhausted as exc:
            refused = (i, exc)
            break
        assert secret_free(p.message)
        length += 1
        if p.phase == Phase.FAILED:
            told += 1
        else:
            lo += 1 << (32 - length)     # the other half, then
    i, exc = refused
    assert told == 5 and i <= 10, (told, i)
    assert length < 24, "the search found the third network's prefix"
    assert exc.retry_after == pytest.approx(12.0) and "\n" not in exc.message
    assert "limits.conflict_disclosures_per_minute" in exc.message
    # While spent, every answer needing the check is refused, conflict or not (a refusal tells nothing),
    # real writes too, and nothing is changed.
    for subnet in ("10.121.37.0/24", "10.200.0.0/16"):
        with pytest.raises(errors.ResourceExhausted):
            probe(service, a, subnet)
        with pytest.raises(errors.ResourceExhausted):
            service.create_peering(a, "a", "na", "to-b", "b", "nb")
    assert service.list_peerings(a, "a", "na") == []
    clock.now += timedelta(seconds=12)
    assert probe(service, a, "10.200.0.0/16").phase == Phase.BOUND


def test_prefix_changes_of_a_bound_network_tell_the_same_and_cost_the_same(world):
    service, _ = world
    a, b, _ = third_world(service)
    assert service.create_peering(a, "a", "na", "to-b", "b", "nb").phase == Phase.BOUND
    with pytest.raises(errors.FailedPrecondition) as err:   # a direct overlap: that alone, for free
        service.update_network(a, "a", "na", subnets=["10.0.0.0/8"], validate_only=True)
    assert "10.0.0.0/8 overlaps 10.2.0.0/24 of Bound peer b/nb" in err.value.message
    assert "peered with" not in err.value.message
    for i, subnet in enumerate(("10.121.0.0/16", "10.121.32.0/19", "10.121.32.0/20", "10.121.32.0/21",
                                "10.121.36.0/22")):
        with pytest.raises(errors.FailedPrecondition) as err:   # validate-only or not, alike
            service.update_network(a, "a", "na", subnets=[subnet], validate_only=i % 2 == 0)
        assert err.value.message == f"subnets/routes of a/na: {subnet} overlaps a network already peered with b/nb; " \
                                    "nothing was changed"
    with pytest.raises(errors.ResourceExhausted):
        service.update_network(a, "a", "na", subnets=["10.200.0.0/24"], validate_only=True)
    assert service.get_network(a, "a", "na").network.subnets == ("10.1.0.0/24",)
    # The other side's budget is its own: b changing its prefixes is told what b may know.
    service.update_network(b, "b", "nb", subnets=["10.3.0.0/24"], validate_only=True)


def test_the_other_side_is_told_alike_and_charged_for_it(world):
    """Symmetric: when b's write completes the pair, b is told that a/na
    overlaps one of b's own peers (nothing b did not know), charged to b."""
    service, _ = world
    a, b, c = tenant("a"), tenant("b"), tenant("c")
    service.create_network(a, "a", "na", ["10.121.0.0/16"])
    service.create_network(b, "b", "nb", ["10.2.0.0/24"])
    service.create_network(c, "c", "nc", ["10.121.37.0/24"])
    service.create_peering(b, "b", "nb", "to-c", "c", "nc")
    service.create_peering(c, "c", "nc", "to-b", "b", "nb")
    service.create_peering(a, "a", "na", "to-b", "b", "nb")
    p = service.create_peering(b, "b", "nb", "to-a", "a", "na")
    assert p.phase == Phase.FAILED and p.message == "10.121.0.0/16 of a/na overlaps a network already peered " \
                                                    "with b/nb"
    assert service.get_peering(a, "a", "na", "to-b").message == p.message
    assert (service.budgets.disclosure.level(b.token_id), service.budgets.disclosure.level(a.token_id)) == (4, 5)


def hub(service, caller, spokes_ns, count=7):
    service.create_network(caller, "h", "hub", ["10.0.0.0/24"])
    owner = caller if spokes_ns == "h" else tenant(spokes_ns)
    for i in range(count):
        service.create_network(owner, spokes_ns, f"s{i}", [f"10.{i + 1}.0.0/24"])
        service.create_peering(caller, "h", "hub", f"to-s{i}", spokes_ns, f"s{i}")
        assert service.create_peering(owner, spokes_ns, f"s{i}", "to-hub", "h", "hub").phase == Phase.BOUND


def test_a_withdrawal_that_leaves_its_own_namespace_over_the_pending_quota_is_refused(world):
    service, _ = world
    service.quotas = Quotas(pending_peerings_per_namespace=5)
    h = tenant("h")
    hub(service, h, "h")
    for i in range(5):
        service.delete_peering(h, "h", "hub", f"to-s{i}")
    with pytest.raises(errors.ResourceExhausted) as err:
        service.delete_peering(h, "h", "hub", "to-s5")
    assert err.value.message == (
        "quota: deleting h/hub/to-s5 would turn its Bound other half h/s5/to-hub Pending and leave namespace 'h' 6 "
        "Pending or Failed peerings, more than allowed (quotas.pending_peerings_per_namespace = 5); nothing was "
        "changed: delete 1 Pending or Failed peering(s) of 'h' first, or ask the operator to raise the quota")
    assert service.get_peering(h, "h", "s5", "to-hub").phase == Phase.BOUND
    assert service.get_peering(h, "h", "hub", "to-s5").phase == Phase.BOUND
    # The way out: the Pending halves go first (that never adds one), then the rest.
    service.delete_peering(h, "h", "s0", "to-hub")
    service.delete_peering(h, "h", "hub", "to-s5")
    with service.store.read() as tx:
        assert tx.count_pending("h") == 5


def test_halves_of_another_namespace_a_withdrawal_turns_pending_are_not_the_writers_to_refuse(world):
    service, _ = world
    service.quotas = Quotas(pending_peerings_per_namespace=5)
    h, s = tenant("h"), tenant("s")
    hub(service, h, "s")
    for i in range(7):
        service.delete_peering(h, "h", "hub", f"to-s{i}")
    with service.store.read() as tx:
        assert tx.count_pending("s") == 7
    with pytest.raises(errors.ResourceExhausted, match="quotas.pending_peerings_per_namespace"):
        service.create_peering(s, "s", "s0", "to-x", "x", "nx")


@pytest.fixture
def fed(tmp_path):
    f = Federation(tmp_path)
    clock = Clock()
    for svc in f.services.values():
        svc.clock = clock
    f.clock = clock
    yield f
    f.close()


def attached(svc, uid):
    with svc.store.read() as tx:
        return tx.attachments_of(uid)


def test_slots_on_a_link_are_counted_per_namespace(fed):
    east = fed["east"]
    east.quotas = east.sites.quotas = Quotas(site_attachments_per_namespace=2)
    a = tenant("a")
    nets = [east.create_network(a, "a", f"n{i}", [f"10.{i}.0.0/24"]).network for i in range(3)]
    east.create_peering(a, "a", "n0", "p1", "b", "x1", remote_site="west")
    east.create_peering(a, "a", "n0", "p2", "b", "x2", remote_site="west")   # the same slot
    east.create_peering(a, "a", "n1", "p1", "b", "x1", remote_site="west")
    with pytest.raises(errors.ResourceExhausted) as err:
        east.create_peering(a, "a", "n2", "p1", "b", "x1", remote_site="west")
    assert err.value.message.startswith("quota: namespace 'a' has 2 networks attached to the link with site west, "
                                        "the most allowed (quotas.site_attachments_per_namespace = 2); nothing was "
                                        "changed: withdraw the halves towards west")
    assert attached(east, nets[2].uid) == {} and east.list_peerings(a, "a", "n2") == []
    east.create_network(tenant("o"), "o", "m", ["10.9.0.0/24"])
    east.create_peering(tenant("o"), "o", "m", "p", "b", "x1", remote_site="west")   # another namespace
    [link] = east.status().links
    assert (link.site, link.capacity, link.slots_used, link.top_namespaces) == ("west", 1000, 3, (("a", 2), ("o", 1)))


def test_a_slot_is_kept_for_its_grace_then_released_with_its_transit_port(fed):
    east, clock = fed["east"], fed.clock
    east.reconciler.attachment_grace = timedelta(seconds=60)
    a = tenant("a")
    n = east.create_network(a, "a", "na", ["10.1.0.0/24"]).network
    east.create_peering(a, "a", "na", "p", "b", "nb", remote_site="west")
    east.delete_peering(a, "a", "na", "p")
    assert attached(east, n.uid) == {"west": 0}
    clock.now += timedelta(seconds=40)
    east.sweep()
    assert attached(east, n.uid) == {"west": 0}                         # within its grace
    east.create_peering(a, "a", "na", "p", "b", "nb", remote_site="west")   # re-used, in use again
    clock.now += timedelta(seconds=40)
    east.sweep()
    assert attached(east, n.uid) == {"west": 0}
    east.delete_peering(a, "a", "na", "p")
    clock.now += timedelta(seconds=59)
    east.sweep()
    assert fed.dataplanes["east"].networks[n.uid].attachments == (("west", 0),)
    clock.now += timedelta(seconds=2)
    east.sweep()
    assert attached(east, n.uid) == {} and fed.dataplanes["east"].networks[n.uid].attachments == ()
    assert east.status().links[0].slots_used == 0
    # Made again within seconds of its release: asked to wait (OVN 23.03, docs/cross-site.md) ...
    with pytest.raises(errors.Unavailable, match="retry in"):
        east.create_peering(a, "a", "na", "p", "b", "nb", remote_site="west")
    assert east.list_peerings(a, "a", "na") == []
    east.sites.REATTACH_HOLD = 0.05
    time.sleep(0.06)
    east.create_peering(a, "a", "na", "p", "b", "nb", remote_site="west")   # ... then made afresh
    assert attached(east, n.uid) == {"west": 0}


def test_halves_that_expire_give_their_slots_back(fed):
    """30 halves with a 5 s TTL left 30 transit ports 20 s later (issue 29)."""
    east, clock = fed["east"], fed.clock
    a = tenant("a")
    for i in range(30):
        east.create_network(a, "a", f"n{i}", [f"10.{i}.0.0/24"])
        east.create_peering(a, "a", f"n{i}", "p", "b", f"x{i}", ttl="5s", remote_site="west")
    assert east.status().links[0].slots_used == 30
    clock.now += timedelta(seconds=6)
    east.sweep()
    assert east.status().links[0].slots_used == 30
    clock.now += east.reconciler.attachment_grace
    east.sweep()
    assert east.status().links[0].slots_used == 0
    assert all(s.attachments == () for s in fed.dataplanes["east"].networks.values())
