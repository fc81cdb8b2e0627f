"""The store and the dataplane must belong together (netpeer.service.epoch):
a lost, replaced or rolled-back store is refused with one line instead of a
sweep that silently wipes the dataplane. On the in-memory dataplane; the real
OVN case is tests/integration/test_epoch.py."""

from __future__ import annotations

import shutil

import pytest

from netpeer.core.dataplane import NetworkState
from netpeer.core.models import Caller
from netpeer.service import Service
from netpeer.service import epoch
from netpeer.service.epoch import EpochMismatch, Mode
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore

ADMIN = Caller("admin", frozenset(), True)


def deployment(path, dataplane=None):
    store = SqliteStore(path)
    return store, Service(store, dataplane or MemoryDataplane())


def populate(service, count=3):
    for i in range(count):
        service.create_network(ADMIN, "t", f"n{i}", [f"10.{i}.0.0/24"])
    service.create_peering(ADMIN, "t", "n0", "to-1", "t", "n1")
    service.create_peering(ADMIN, "t", "n1", "to-0", "t", "n0")


def settle(store, dataplane, mode=Mode.CHECK):
    return epoch.settle(store, dataplane, "netpeer", mode,
                        adopt=lambda: epoch.adopt(store, dataplane.read_back(), service_clock()))


def service_clock():
    from netpeer.core.models import utcnow
    return utcnow()


def test_a_new_deployment_and_a_restart_are_fine(tmp_path):
    store, service = deployment(tmp_path / "a.db")
    assert settle(store, service.dataplane) == "store and OVN belong together"
    populate(service)
    assert service.dataplane.read_stamp().generation == store_generation(store) > 0
    store.close()
    again = SqliteStore(tmp_path / "a.db")
    assert settle(again, service.dataplane) == "store and OVN belong together"


def store_generation(store):
    with store.read() as tx:
        return tx.generation()


def test_a_replaced_store_is_refused_in_one_line(tmp_path):
    store, service = deployment(tmp_path / "a.db")
    populate(service)
    store.close()
    (tmp_path / "a.db").unlink()
    fresh = SqliteStore(tmp_path / "a.db")
    with pytest.raises(EpochMismatch) as err:
        settle(fresh, service.dataplane)
    message = err.value.message
    assert "\n" not in message and "another store" in message and "--adopt-ovn" in message
    assert len(service.dataplane.networks) == 3   # nothing was changed


def backup(store, path):
    """A consistent copy, as an operator's backup would be."""
    import sqlite3
    with sqlite3.connect(path) as dst:
        store._db.backup(dst)


def test_an_older_store_is_refused_but_a_write_that_died_halfway_is_not(tmp_path):
    store, service = deployment(tmp_path / "a.db")
    populate(service, 2)
    backup(store, tmp_path / "one-behind.db")
    service.create_network(ADMIN, "t", "later", ["10.50.0.0/24"])        # one more acknowledged write
    backup(store, tmp_path / "current.db")
    service.create_network(ADMIN, "t", "later2", ["10.51.0.0/24"])       # and another
    store.close()
    dataplane = service.dataplane
    # One behind the dataplane: indistinguishable from a write that died between its
    # OVN commit and its store commit, whose rows the sweep removes, as always.
    assert settle(SqliteStore(tmp_path / "current.db"), dataplane) == "store and OVN belong together"
    # Two behind: acknowledged writes would be undone.
    with pytest.raises(EpochMismatch, match="older than OVN"):
        settle(SqliteStore(tmp_path / "one-behind.db"), dataplane)


def test_an_empty_store_beside_rows_without_a_stamp_is_refused(tmp_path):
    store, service = deployment(tmp_path / "a.db")
    populate(service)
    service.dataplane.stamp = None   # a deployment from before stamps
    store.close()
    (tmp_path / "a.db").unlink()
    with pytest.raises(EpochMismatch, match="holds no network"):
        settle(SqliteStore(tmp_path / "b.db"), service.dataplane)


def test_adopt_rebuilds_the_store_and_the_pair_stays_bound(tmp_path):
    store, service = deployment(tmp_path / "a.db")
    populate(service)
    uids = {n.network.name: n.network.uid for n in service.dataplane.networks.values()}
    store.close()
    (tmp_path / "a.db").unlink()
    fresh, revived = deployment(tmp_path / "a.db", service.dataplane)
    assert "3 networks adopted" in settle(fresh, service.dataplane, Mode.ADOPT)
    views = {v.network.name: v for v in revived.list_networks(ADMIN, "t")}
    assert {k: v.network.uid for k, v in views.items()} == uids
    assert [p.phase for p in views["n0"].peerings] == ["Bound"] and views["n0"].peerings[0].name == "to-1"
    assert revived.repair().repaired_rows == 0           # the dataplane already matches
    assert settle(fresh, service.dataplane) == "store and OVN belong together"


def test_accept_rollback_lets_the_next_sweep_converge(tmp_path):
    store, service = deployment(tmp_path / "a.db")
    populate(service, 30)
    store.close()
    (tmp_path / "a.db").unlink()
    fresh, revived = deployment(tmp_path / "a.db", service.dataplane)
    # Without a decision, the sweep holds back: 30 networks nobody explains.
    revived.reconciler.MIN_GUARDED = 5
    report = revived.repair()
    assert report.errors == 1 and len(service.dataplane.networks) == 30
    assert "would delete 30" in revived.reconciler._blocked
    settle(fresh, service.dataplane, Mode.ACCEPT_ROLLBACK)
    revived.reconciler.allow_mass_delete_once = True
    assert revived.repair().repaired_rows == 30 and service.dataplane.networks == {}


def test_states_carry_peering_names(tmp_path):
    store, service = deployment(tmp_path / "a.db")
    populate(service, 2)
    state = next(s for s in service.dataplane.networks.values() if s.network.name == "n0")
    assert isinstance(state, NetworkState) and state.peering_name(state.peers[0].uid) == "to-1"
