"""The memory dataplane as netpeerd's dataplane in simulation
(``netpeer serve --dataplane memory``; the processes are tested in
tests/integration/test_simulation.py): it reports what changed, as OVN's
replica does, so that a sweep at rest compares a slice of the networks,
not every one of them; and it starts holding what the store implies."""

from __future__ import annotations

from netpeer import simulation
from netpeer.core.dataplane import NetworkState
from netpeer.core.models import Caller, Quotas
from netpeer.service import Service, Settings
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore

ADMIN = Caller("admin", frozenset(), True)


class Counting(MemoryDataplane):
    def __init__(self):
        super().__init__(track_changes=True)
        self.checked: list[str] = []

    def drifted(self, desired):
        self.checked += list(desired)
        return super().drifted(desired)


def bind(service, i: int):
    a = service.create_network(ADMIN, "a", f"n{i}", [f"10.1.{i}.0/24"]).network
    b = service.create_network(ADMIN, "b", f"n{i}", [f"10.2.{i}.0/24"]).network
    service.create_peering(ADMIN, "a", f"n{i}", "p", "b", f"n{i}")
    service.create_peering(ADMIN, "b", f"n{i}", "p", "a", f"n{i}")
    return a, b


def test_a_sweep_at_rest_compares_a_slice_and_what_changed(tmp_path):
    store = SqliteStore(tmp_path / "netpeer.db")
    dataplane = Counting()
    service = Service(store, dataplane, Settings(quotas=Quotas(networks_per_namespace=100)))
    pairs = [bind(service, i) for i in range(10)]
    service.reconciler.interval, service.reconciler.full_pass = 30.0, 120.0   # a slice of 5 of 20 per sweep
    service.sweep()
    assert len(dataplane.checked) == 20                 # the first sweep compares everything
    dataplane.checked.clear()
    service.sweep()
    assert len(dataplane.checked) == 5                  # at rest: the slice only
    a, b = pairs[7]
    dataplane.tamper(a.uid, NetworkState(a, ()))        # a change it reports: repaired by the next sweep
    dataplane.checked.clear()
    assert service.sweep().repaired_rows == 1 and a.uid in dataplane.checked
    assert dataplane.peers_of(a.uid) == {b.uid}
    store.close()


def test_it_starts_holding_what_the_store_implies(tmp_path):
    store = SqliteStore(tmp_path / "netpeer.db")
    service = Service(store, MemoryDataplane(), Settings(quotas=Quotas(networks_per_namespace=100)))
    a, b = bind(service, 0)
    bind(service, 1)
    fresh = Counting()
    assert simulation.fill(store, fresh) == 4
    assert fresh.peers_of(a.uid) == {b.uid} and fresh.read_stamp().store_id == store.store_id
    again = Service(store, fresh)
    assert again.sweep().repaired_rows == 0
    # The pairs that waited for the dataplane that ran before are applied in this one.
    assert fresh.programmed() >= max(p.dataplane_cfg or 0 for p in again.list_peerings(ADMIN, "a", "n0"))
    store.close()
