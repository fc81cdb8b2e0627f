"""The service on an in-memory dataplane: what the service itself decides
(group commit, expiry, repair, errors), fast and without root or OVN, on
each store (SQLite, and PostgreSQL from tests/pgsupport.py). The
same behaviour on real OVN daemons is covered by tests/integration,
tests/functional and tests/trust."""

from __future__ import annotations

import dataclasses
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from netpeer import errors
from netpeer.core.dataplane import NetworkState
from netpeer.core.models import Caller
from netpeer.service import Service
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore
from tests.pgsupport import make_store
from tests.support import wait_until

ADMIN = Caller("admin", frozenset(), True)


class Clock:
    def __init__(self):
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self):
        return self.now


class SlowDataplane(MemoryDataplane):
    """Holds every sync for a while, so that concurrent writes queue up."""

    delay = 0.05

    def sync(self, desired, stamp=None, track=False):
        time.sleep(self.delay)
        return super().sync(desired, stamp, track)


@pytest.fixture(params=["sqlite", "postgresql"])
def world(request, tmp_path):
    cluster = request.getfixturevalue("pg_cluster") if request.param == "postgresql" else None
    store = make_store(request.param, tmp_path, cluster)
    dataplane = SlowDataplane()
    clock = Clock()
    service = Service(store, dataplane, clock=clock)
    yield service, dataplane, clock
    store.close()


def bind(service, a="a", b="b", subnet_a="10.1.0.0/24", subnet_b="10.2.0.0/24"):
    na = service.create_network(ADMIN, a, f"net-{a}", [subnet_a]).network
    nb = service.create_network(ADMIN, b, f"net-{b}", [subnet_b]).network
    service.create_peering(ADMIN, a, f"net-{a}", f"to-{b}", b, f"net-{b}")
    p = service.create_peering(ADMIN, b, f"net-{b}", f"to-{a}", a, f"net-{a}")
    return na, nb, p


def test_a_bound_pair_is_programmed_on_both_sides(world):
    service, dataplane, _ = world
    na, nb, p = bind(service)
    assert p.phase == "Bound"
    assert dataplane.peers_of(na.uid) == {nb.uid} and dataplane.peers_of(nb.uid) == {na.uid}


def test_concurrent_writes_share_transactions_and_each_gets_its_own_answer(world):
    service, dataplane, _ = world
    before = dataplane.transactions
    results: dict[int, object] = {}

    def create(i):
        try:
            results[i] = service.create_network(ADMIN, "t", f"n{i}", [f"10.{i}.0.0/24"]).network.name
        except errors.NetpeerError as exc:
            results[i] = exc

    # n3 twice: exactly one of the two wins, the other gets ALREADY_EXISTS.
    jobs = [threading.Thread(target=create, args=(i,)) for i in (1, 2, 3, 4, 5, 6, 7, 8)]
    dup = threading.Thread(target=lambda: results.__setitem__(
        "dup", _catch(lambda: service.create_network(ADMIN, "t", "n3", ["10.99.0.0/24"]))))
    for t in jobs + [dup]:
        t.start()
    for t in jobs + [dup]:
        t.join()
    assert sum(isinstance(r, errors.AlreadyExists) for r in results.values()) == 1
    # Eight writes that program a new network each, in fewer dataplane transactions.
    assert dataplane.transactions - before < 8
    assert len(dataplane.networks) == 8


def _catch(fn):
    try:
        return fn()
    except errors.NetpeerError as exc:
        return exc


def test_a_refused_network_fails_alone_and_changes_nothing(world):
    service, dataplane, _ = world
    service.create_network(ADMIN, "t", "ok", ["10.1.0.0/24"])
    # The dataplane refuses whatever network is created next: that write fails, nothing is stored.
    original = dataplane.sync

    def refuse_new(desired, stamp=None, track=False):
        if any(uid not in dataplane.networks and state is not None for uid, state in desired.items()):
            raise errors.FailedPrecondition("refused (test)")
        return original(desired, stamp, track)

    dataplane.sync = refuse_new
    with pytest.raises(errors.FailedPrecondition):
        service.create_network(ADMIN, "t", "bad", ["10.2.0.0/24"])
    dataplane.sync = original
    assert [v.network.name for v in service.list_networks(ADMIN, "t")] == ["ok"]


def test_an_unreachable_dataplane_fails_the_write_and_changes_nothing(world):
    service, dataplane, _ = world
    dataplane.unreachable = True
    with pytest.raises(errors.Unavailable):
        service.create_network(ADMIN, "t", "n", ["10.1.0.0/24"])
    dataplane.unreachable = False
    assert service.list_networks(ADMIN, "t") == []
    assert dataplane.networks == {}


def test_expiry_deletes_exactly_what_expired(world):
    service, dataplane, clock = world
    service.create_network(ADMIN, "a", "net-a", ["10.1.0.0/24"])
    service.create_peering(ADMIN, "a", "net-a", "short", "b", "net-x", ttl="60s")
    service.create_peering(ADMIN, "a", "net-a", "long", "b", "net-y", ttl="1h")
    bind(service, "c", "d", "10.3.0.0/24", "10.4.0.0/24")   # Bound: never expires
    clock.now += timedelta(seconds=59)
    assert service.expire() == 0
    clock.now += timedelta(seconds=2)
    assert service.expire() == 1
    assert [p.name for p in service.list_peerings(ADMIN, "a", "net-a")] == ["long"]
    clock.now += timedelta(days=365)
    assert service.expire() == 1
    assert [p.phase for p in service.list_peerings(ADMIN, "c", "net-c")] == ["Bound"]


def test_repair_restores_drift_and_removes_strays_one_network_at_a_time(world):
    service, dataplane, _ = world
    na, nb, _ = bind(service)
    nc = service.create_network(ADMIN, "c", "net-c", ["10.3.0.0/24"]).network
    # Hand edits: a's peering gone, c's network gone, a network nobody knows appears.
    dataplane.tamper(na.uid, NetworkState(na, ()))
    dataplane.tamper(nc.uid, None)
    dataplane.tamper("stray-uid", NetworkState(nc, ()))
    # The repair of b fails (refused): the others are repaired anyway.
    dataplane.refuse = {nb.uid}
    dataplane.tamper(nb.uid, NetworkState(nb, ()))
    report = service.repair()
    assert report.errors == 1
    assert dataplane.peers_of(na.uid) == {nb.uid} and nc.uid in dataplane.networks
    assert "stray-uid" not in dataplane.networks
    dataplane.refuse = set()
    assert service.repair().repaired_rows == 1          # b, now that it is accepted
    assert service.repair() == type(report)(0, 0, 0)     # nothing left


def test_sweep_progress_is_reported(world):
    service, dataplane, _ = world
    assert service.status().sweeps.sweeps == 0
    bind(service)
    dataplane.tamper(next(iter(dataplane.networks)), None)
    service.sweep()
    status = service.status().sweeps
    assert status.sweeps == 1 and status.last.repaired_rows == 1 and status.totals.repaired_rows == 1
    service.sweep()
    status = service.status().sweeps
    assert status.sweeps == 2 and status.last.repaired_rows == 0 and status.totals.repaired_rows == 1
    assert status.last_started <= status.last_finished


def test_a_re_created_remote_says_so_and_an_update_re_pins_it(world):
    service, dataplane, _ = world
    na, nb, _ = bind(service)
    # Team B destroys and re-creates its network and its half.
    service.delete_peering(ADMIN, "b", "net-b", "to-a")
    assert service.get_peering(ADMIN, "a", "net-a", "to-b").reason == "RemoteWithdrawn"
    service.delete_network(ADMIN, "b", "net-b")
    nb2 = service.create_network(ADMIN, "b", "net-b", ["10.2.0.0/24"]).network
    again = service.create_peering(ADMIN, "b", "net-b", "to-a", "a", "net-a")
    assert again.phase == "Pending" and again.reason == "AwaitingRemote"   # B learns nothing new
    mine = service.get_peering(ADMIN, "a", "net-a", "to-b")
    assert (mine.phase, mine.reason) == ("Pending", "RemoteReplaced")
    assert nb2.uid in mine.message and nb.uid in mine.message and "remote_uid" in mine.message
    # Re-pin (a validate-only call first: it answers the same and keeps nothing).
    preview = service.update_peering(ADMIN, "a", "net-a", "to-b", remote_uid=nb2.uid, validate_only=True)
    assert preview.phase == "Bound" and service.get_peering(ADMIN, "a", "net-a", "to-b").phase == "Pending"
    bound = service.update_peering(ADMIN, "a", "net-a", "to-b", remote_uid=nb2.uid)
    assert bound.phase == "Bound" and bound.remote_uid == nb2.uid
    assert dataplane.peers_of(na.uid) == {nb2.uid}
    # If the newcomer withdraws before the re-pin, the reason goes back to RemoteWithdrawn.
    service.delete_peering(ADMIN, "b", "net-b", "to-a")
    service.delete_network(ADMIN, "b", "net-b")
    nb3 = service.create_network(ADMIN, "b", "net-b", ["10.2.0.0/24"]).network
    service.create_peering(ADMIN, "b", "net-b", "to-a", "a", "net-a")
    assert service.get_peering(ADMIN, "a", "net-a", "to-b").reason == "RemoteReplaced"
    service.delete_peering(ADMIN, "b", "net-b", "to-a")
    assert service.get_peering(ADMIN, "a", "net-a", "to-b").reason == "RemoteWithdrawn"
    assert nb3.uid


def test_validate_only_answers_like_the_write_and_keeps_nothing(world):
    service, dataplane, _ = world
    service.create_network(ADMIN, "a", "net-a", ["10.1.0.0/24"])
    service.create_network(ADMIN, "b", "net-b", ["10.1.0.0/25"])   # overlaps: the pair would fail
    service.create_peering(ADMIN, "b", "net-b", "to-a", "a", "net-a")
    before = dataplane.transactions
    preview = service.create_peering(ADMIN, "a", "net-a", "to-b", "b", "net-b", validate_only=True)
    assert preview.phase == "Failed" and "overlaps" in preview.message
    assert service.list_peerings(ADMIN, "a", "net-a") == [] and dataplane.transactions == before
    with pytest.raises(errors.AlreadyExists):
        service.create_network(ADMIN, "a", "net-a", ["10.9.0.0/24"], validate_only=True)
    with pytest.raises(errors.PermissionDenied):
        service.create_network(Caller("t", frozenset({"a"})), "other", "n", ["10.9.0.0/24"], validate_only=True)
    view = service.create_network(ADMIN, "c", "net-c", ["10.9.0.0/24"], validate_only=True)
    assert view.network.name == "net-c" and service.list_networks(ADMIN, "c") == []


class ReportingDataplane(MemoryDataplane):
    """Reports the networks changed behind the service's back, as OVN's IDL
    does (``tamper``), except those changed by ``hide`` (a change it missed).
    Its first report is "unknown", as after connecting."""

    def __init__(self):
        super().__init__()
        self.heard: set[str] | None = None
        self.checked: list[str] = []

    def take_changes(self):
        heard, self.heard = self.heard, set()
        return heard

    def drifted(self, desired):
        self.checked += list(desired)
        return super().drifted(desired)

    def tamper(self, uid, state):
        super().tamper(uid, state)
        if self.heard is not None:
            self.heard.add(uid)

    def hide(self, uid, state):
        super().tamper(uid, state)


def test_a_sweep_checks_only_changed_networks_and_a_full_pass_finds_the_rest(tmp_path):
    store = SqliteStore(tmp_path / "netpeer.db")
    dataplane = ReportingDataplane()
    service = Service(store, dataplane, clock=Clock())
    na, nb, _ = bind(service)
    service.sweep()                                   # the first sweep compares everything
    assert set(dataplane.checked) == {na.uid, nb.uid}
    dataplane.checked.clear()
    service.sweep()                                   # at rest: only a slice of the slow pass (below)
    assert len(dataplane.checked) == 1
    dataplane.checked.clear()
    dataplane.tamper(na.uid, NetworkState(na, ()))    # a change it hears of: repaired by the next sweep
    assert service.sweep().repaired_rows == 1 and na.uid in dataplane.checked
    assert dataplane.peers_of(na.uid) == {nb.uid}
    dataplane.hide(nb.uid, NetworkState(nb, ()))      # one it missed: repaired by the slow full pass
    sweeps = 1
    while service.sweep().repaired_rows == 0:
        sweeps += 1
        assert sweeps <= 2, "a missed change must be repaired within one round of the slow pass"
    assert dataplane.peers_of(nb.uid) == {na.uid}
    store.close()


def test_a_sweep_after_a_write_reads_the_networks_it_compares_not_every_network(tmp_path, monkeypatch):
    """After a write the next sweep looks for strays, which needs the uid of
    every network of the store: reading every network whole for it cost
    1.3 s per sweep at 10,000 networks. A stray is still found and removed."""
    import netpeer.store.sql as sql_store
    store = SqliteStore(tmp_path / "netpeer.db")
    dataplane = MemoryDataplane(track_changes=True)   # reports what changed, as OVN's replica does
    service = Service(store, dataplane, clock=Clock())
    for i in range(40):
        bind(service, f"a{i}", f"b{i}", f"10.{i}.1.0/24", f"10.{i}.2.0/24")
    service.reconciler.interval, service.reconciler.full_pass = 1.0, 3600.0   # one network per slice
    service.sweep()
    service.sweep()
    a, b, _ = bind(service, "c", "d", "10.99.1.0/24", "10.99.2.0/24")
    read = []
    real = sql_store.network_from
    monkeypatch.setattr(sql_store, "network_from", lambda row: read.append(row[2]) or real(row))
    assert service.sweep().repaired_rows == 0
    assert len(set(read)) <= 6, f"the sweep read {len(set(read))} of 82 networks"
    ghost = dataclasses.replace(a, uid="00000000-0000-4000-8000-00000000dead", name="gone")
    dataplane.tamper(ghost.uid, NetworkState(ghost, ()))  # a row of no network: left by a crash, or by hand
    assert service.sweep().repaired_rows == 1 and ghost.uid not in dataplane.networks
    assert dataplane.peers_of(a.uid) == {b.uid}
    store.close()


def test_the_slow_full_pass_compares_a_slice_per_sweep_and_everyone_once_a_round(tmp_path):
    """At rest each sweep compares about networks x interval / full_pass of
    them, every network once per full_sweep_interval; so a change the
    reports missed, in any network, is repaired within that interval."""
    store = SqliteStore(tmp_path / "netpeer.db")
    dataplane = ReportingDataplane()
    service = Service(store, dataplane, clock=Clock())
    networks = [bind(service, f"a{i}", f"b{i}", f"10.{i}.1.0/24", f"10.{i}.2.0/24")[:2] for i in range(10)]
    uids = {n.uid for pair in networks for n in pair}
    service.reconciler.interval, service.reconciler.full_pass = 30.0, 120.0   # 4 sweeps a round
    service.sweep()
    assert set(dataplane.checked) == uids              # the first sweep compares everything
    for _ in range(2):                                 # two rounds at rest
        dataplane.checked.clear()
        slices = []
        for _ in range(4):
            service.sweep()
            slices.append(len(dataplane.checked) - sum(slices))
        assert slices == [5, 5, 5, 5], slices          # 20 networks x 30 s / 120 s
        assert sorted(dataplane.checked) == sorted(uids)
    victim = networks[7][1]
    dataplane.hide(victim.uid, NetworkState(victim, ()))
    repaired = [service.sweep().repaired_rows for _ in range(4)]
    assert sum(repaired) == 1 and dataplane.peers_of(victim.uid) == {networks[7][0].uid}
    store.close()


class CountingDataplane(MemoryDataplane):
    """Counts reads of the acknowledgement; the chassis apply nothing until told."""

    def __init__(self):
        super().__init__()
        self.apply_at_once = False
        self.reads = 0

    def programmed(self):
        self.reads += 1
        return super().programmed()


@pytest.mark.parametrize("committed_by", ["this process", "another replica"])
def test_the_acknowledgement_is_sampled_only_while_peerings_wait(tmp_path, committed_by):
    """At rest the Programmer's ticks read nothing (a look every ``idle``);
    while a peering waits for the chassis it samples every ``interval``, and
    a commit here wakes it at once. A write it did not see commit (another
    replica's) is noticed within ``idle``."""
    store = SqliteStore(tmp_path / "s.db")
    dataplane = CountingDataplane()
    service = Service(store, dataplane)
    stop = threading.Event()
    runner = threading.Thread(target=service.programmer.run, args=(stop, 0.01, 3.0), daemon=True)
    runner.start()
    try:
        time.sleep(0.3)                      # the first look finds nothing waiting
        rest = dataplane.reads
        time.sleep(0.5)
        assert dataplane.reads - rest <= 1, f"{dataplane.reads - rest} reads at rest in 0.5 s"
        if committed_by == "another replica":
            service.writes.on_commit.remove(service.programmer.poke)
        _, _, p = bind(service)
        assert p.dataplane == "Programming"
        with dataplane._lock:
            dataplane.applied_cfg = dataplane.cfg  # every chassis applied it
        wait_until(lambda: service.get_peering(ADMIN, "b", "net-b", "to-a").dataplane == "Programmed",
                   0.5 if committed_by == "this process" else 3.5, "not Programmed in time", step=0.01)
    finally:
        stop.set()
        runner.join(5)
        store.close()


class WaitingRowsDataplane(MemoryDataplane):
    """Some of a network's rows wait for the dataplane itself (OVN: a transit
    port's key across sites) and go in at its next sync, which reports them
    as ``released``, as the OVN backend does."""

    def __init__(self):
        super().__init__()
        self.waiting: set[str] = set()

    def drifted(self, desired):
        return super().drifted(desired) | (self.waiting & set(desired))

    def sync(self, desired, stamp=None, track=False):
        report = super().sync(desired, stamp, track)
        done, self.waiting = self.waiting & set(desired), self.waiting - set(desired)
        return dataclasses.replace(report, created=report.created + 3 * len(done), released=3 * len(done))


def test_rows_that_waited_are_not_drift_and_their_pairs_wait_for_the_chassis_again(tmp_path):
    store = SqliteStore(tmp_path / "netpeer.db")
    dataplane = WaitingRowsDataplane()
    service = Service(store, dataplane)
    try:
        na, nb, p = bind(service)
        service.programmer.check()
        assert service.get_peering(ADMIN, "a", "net-a", "to-b").dataplane == "Programmed"
        dataplane.apply_at_once = False
        dataplane.waiting = {na.uid}
        assert service.repair().repaired_rows == 0             # 3 rows went in, none of them drift
        assert dataplane.waiting == set()
        assert service.get_peering(ADMIN, "a", "net-a", "to-b").dataplane == "Programming"
        assert service.get_peering(ADMIN, "b", "net-b", "to-a").dataplane == "Programmed"
        dataplane.applied_cfg = dataplane.cfg
        service.programmer.check()
        assert service.get_peering(ADMIN, "a", "net-a", "to-b").dataplane == "Programmed"
    finally:
        store.close()


def test_the_service_and_its_parts_are_made_from_its_settings(tmp_path):
    """What netpeerd's configuration tells the service reaches every part
    that acts on it when the service is made (netpeer.daemon sets nothing
    on them afterwards)."""
    from netpeer.core.models import Quotas, TokenLimits
    from netpeer.observe.metrics import NoMetrics
    from netpeer.service import Settings
    from netpeer.service.leader import Solo

    settings = Settings(owner="other", quotas=Quotas(networks_per_namespace=7),
                        limits=TokenLimits(conflict_disclosures_per_minute=11),
                        attachment_grace=timedelta(seconds=5), repair_max_delete_share=0.5,
                        full_sweep_interval=timedelta(minutes=10))
    metrics, leadership = NoMetrics(), Solo()
    store = SqliteStore(tmp_path / "netpeer.db")
    try:
        service = Service(store, MemoryDataplane(), settings, metrics=metrics, leadership=leadership)
        assert (service.owner, service.quotas, service.budgets.limits) == ("other", settings.quotas, settings.limits)
        assert service.leadership is leadership
        r = service.reconciler
        assert (r.attachment_grace, r.max_delete_share, r.full_pass) == (timedelta(seconds=5), 0.5, 600.0)
        assert service.writes.metrics is metrics and r.metrics is metrics and service.programmer.metrics is metrics
        assert service.link_sites("east", {"west": 4}).verify_interval == 600.0
    finally:
        store.close()
