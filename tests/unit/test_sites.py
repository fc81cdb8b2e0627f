"""Consent across sites, on two (or three) services with their own stores and
in-memory dataplanes, joined by a transport a test can cut. What crosses
between them is exactly what crosses the gRPC link (``SiteView``); the
same behaviour on real daemons, OVN-IC and WireGuard is in tests/sites."""

from __future__ import annotations

import contextlib
import dataclasses
import threading

import pytest

from netpeer import errors
from netpeer.core.models import Caller, Phase, Reason
from netpeer.service import Service
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore
from tests.support import wait_until

ADMIN = Caller("admin", frozenset(), True)


class Federation:
    """Sites joined directly: ``transport`` hands a view to the other
    service's ``receive`` unless the link between the two is cut."""

    def __init__(self, tmp_path, names=("east", "west"), dataplane=MemoryDataplane):
        self.cut: set[frozenset] = set()
        self.services: dict[str, Service] = {}
        self.dataplanes: dict[str, MemoryDataplane] = {}
        for name in names:
            store = SqliteStore(tmp_path / f"{name}.db")
            dp = dataplane()
            svc = Service(store, dp)
            others = {o: 1000 for o in names if o != name}
            svc.link_sites(name, others, transport=self._transport(name))
            self.services[name] = svc
            self.dataplanes[name] = dp

    def _transport(self, here: str):
        def call(site, view):
            if frozenset((here, site)) in self.cut:
                raise ConnectionError(f"link {here}-{site} is cut")
            return self.services[site].sites.receive(view)
        return call

    def __getitem__(self, name: str) -> Service:
        return self.services[name]

    def settle(self, rounds: int = 6) -> None:
        """Runs exchanges until nothing changes (what the link threads do)."""
        for _ in range(rounds):
            for name, svc in self.services.items():
                for other in svc.sites.capacity:
                    svc.sites.exchange(other)

    def close(self):
        for svc in self.services.values():
            svc.store.close()


@pytest.fixture
def fed(tmp_path):
    f = Federation(tmp_path)
    yield f
    f.close()


def net(svc, ns, name, *subnets):
    return svc.create_network(ADMIN, ns, name, list(subnets)).network


def peer(svc, ns, network, name, remote, site=""):
    rns, rnet = remote.split("/")
    return svc.create_peering(ADMIN, ns, network, name, rns, rnet, remote_site=site)


def get(svc, ns, network, name):
    return svc.get_peering(ADMIN, ns, network, name)


def test_a_cross_site_pair_binds_on_both_sides_and_each_side_programs_its_own(fed):
    a = net(fed["east"], "team-a", "net-a", "10.1.0.0/24")
    b = net(fed["west"], "team-b", "net-b", "10.2.0.0/24")
    fed.settle()
    first = peer(fed["east"], "team-a", "net-a", "to-b", "team-b/net-b", "west")
    assert (first.phase, first.reason, first.remote_site) == (Phase.PENDING, Reason.AWAITING_REMOTE, "west")
    fed.settle()
    second = peer(fed["west"], "team-b", "net-b", "to-a", "team-a/net-a", "east")
    # The second consent answers like any consent (nothing is revealed before binding) ...
    assert second.phase == Phase.PENDING and second.message == first.message.replace("team-b/net-b", "team-a/net-a") \
        .replace("west:", "east:")
    fed.settle()
    # ... and binds on both sides within an exchange.
    pa, pb = get(fed["east"], "team-a", "net-a", "to-b"), get(fed["west"], "team-b", "net-b", "to-a")
    assert (pa.phase, pb.phase) == (Phase.BOUND, Phase.BOUND)
    assert (pa.remote_uid, pb.remote_uid) == (b.uid, a.uid)
    # The remote network is represented locally: site, uid, prefixes.
    view = fed["east"].get_network(ADMIN, "team-a", "net-a")
    [peered] = view.peered_networks
    assert (peered.site, peered.namespace, peered.name, peered.uid, peered.prefixes) == \
        ("west", "team-b", "net-b", b.uid, ("10.2.0.0/24",))
    # Each site's dataplane holds only its own side: a's attachment to west and b as a remote peer.
    state = fed.dataplanes["east"].networks[a.uid]
    assert state.attachments == (("west", 0),)
    [remote] = state.remote_peers
    assert (remote.network.uid, remote.network.site, remote.attachment) == (b.uid, "west", 0)
    assert b.uid not in fed.dataplanes["east"].networks


def test_withdrawal_on_either_side_unbinds_both(fed):
    net(fed["east"], "a", "na", "10.1.0.0/24")
    net(fed["west"], "b", "nb", "10.2.0.0/24")
    peer(fed["east"], "a", "na", "p", "b/nb", "west")
    peer(fed["west"], "b", "nb", "p", "a/na", "east")
    fed.settle()
    fed["west"].delete_peering(ADMIN, "b", "nb", "p")
    fed.settle()
    pa = get(fed["east"], "a", "na", "p")
    assert (pa.phase, pa.reason) == (Phase.PENDING, Reason.REMOTE_WITHDRAWN)
    assert fed.dataplanes["east"].networks[pa.network_uid].remote_peers == ()
    # West's network keeps its attachment to east (a transit port re-created at once confuses OVN 23.03's
    # ovn-controller) without any remote peer: nothing crosses. Deleting the network releases it.
    b_uid = fed["west"].get_network(ADMIN, "b", "nb").network.uid
    state = fed.dataplanes["west"].networks[b_uid]
    assert (state.attachments, state.remote_peers) == ((("east", 0),), ())
    fed["west"].delete_network(ADMIN, "b", "nb")
    fed.settle()
    assert b_uid not in fed.dataplanes["west"].networks
    with fed["west"].store.read() as tx:
        assert tx.attachments_of(b_uid) == {}


def test_a_withdrawal_stays_remote_withdrawn_through_a_lost_exchange(fed):
    net(fed["east"], "a", "na", "10.1.0.0/24")
    net(fed["west"], "b", "nb", "10.2.0.0/24")
    peer(fed["east"], "a", "na", "p", "b/nb", "west")
    peer(fed["west"], "b", "nb", "p", "a/na", "east")
    fed.settle()
    fed["west"].delete_peering(ADMIN, "b", "nb", "p")
    fed.settle()
    fed.cut.add(frozenset(("east", "west")))
    fed.settle(rounds=1)
    fed.cut.clear()
    fed.settle()
    pa = get(fed["east"], "a", "na", "p")
    assert (pa.phase, pa.reason) == (Phase.PENDING, Reason.REMOTE_WITHDRAWN)


def test_overlap_across_sites_fails_both_sides_naming_the_prefixes(fed):
    net(fed["east"], "a", "na", "10.1.0.0/24")
    net(fed["west"], "b", "nb", "10.1.0.128/25")
    peer(fed["east"], "a", "na", "p", "b/nb", "west")
    peer(fed["west"], "b", "nb", "p", "a/na", "east")
    fed.settle()
    pa, pb = get(fed["east"], "a", "na", "p"), get(fed["west"], "b", "nb", "p")
    assert (pa.phase, pb.phase) == (Phase.FAILED, Phase.FAILED)
    assert "10.1.0.0/24 of a/na overlaps 10.1.0.128/25 of west:b/nb" in pa.message.replace("east:", "")
    assert "10.1.0.128/25" in pb.message and "east:a/na" in pb.message


def test_a_third_network_bound_in_another_site_fails_the_pair_on_both_sides(fed):
    # west:B is Bound to east:A; east:C overlaps A and asks B: west sees it (A is Bound to B there).
    net(fed["east"], "a", "na", "10.1.0.0/24")
    net(fed["west"], "b", "nb", "10.2.0.0/24")
    net(fed["east"], "c", "nc", "10.1.0.0/25")
    peer(fed["east"], "a", "na", "p", "b/nb", "west")
    peer(fed["west"], "b", "nb", "to-a", "a/na", "east")
    fed.settle()
    peer(fed["east"], "c", "nc", "p", "b/nb", "west")
    peer(fed["west"], "b", "nb", "to-c", "c/nc", "east")
    fed.settle()
    pc, pb = get(fed["east"], "c", "nc", "p"), get(fed["west"], "b", "nb", "to-c")
    assert (pc.phase, pb.phase) == (Phase.FAILED, Phase.FAILED), (pc.message, pb.message)
    assert "overlaps a network already peered with west:b/nb" in pc.message
    # The first pair is untouched.
    assert get(fed["east"], "a", "na", "p").phase == Phase.BOUND


def test_not_transitive_across_sites(tmp_path):
    fed = Federation(tmp_path)
    try:
        net(fed["east"], "a", "na", "10.1.0.0/24")
        net(fed["west"], "b", "nb", "10.2.0.0/24")
        net(fed["east"], "c", "nc", "10.3.0.0/24")
        for n in ("na", "nc"):
            ns = n[1]
            peer(fed["east"], ns, n, "p", "b/nb", "west")
            peer(fed["west"], "b", "nb", f"to-{ns}", f"{ns}/{n}", "east")
        fed.settle()
        dp = fed.dataplanes["east"]
        a = fed["east"].get_network(ADMIN, "a", "na").network
        c = fed["east"].get_network(ADMIN, "c", "nc").network
        assert [r.network.name for r in dp.networks[a.uid].remote_peers] == ["nb"]
        assert dp.networks[a.uid].peers == () and c.uid not in {p.uid for p in dp.networks[a.uid].peers}
    finally:
        fed.close()


def test_partition_new_pairs_wait_with_their_reason_and_heal_by_themselves(fed):
    net(fed["east"], "a", "na", "10.1.0.0/24")
    net(fed["west"], "b", "nb", "10.2.0.0/24")
    net(fed["east"], "x", "nx", "10.5.0.0/24")
    net(fed["west"], "y", "ny", "10.6.0.0/24")
    peer(fed["east"], "x", "nx", "p", "y/ny", "west")
    peer(fed["west"], "y", "ny", "p", "x/nx", "east")
    fed.settle()
    fed.cut.add(frozenset(("east", "west")))
    fed.settle(rounds=1)
    # Within a site, everything still works.
    net(fed["east"], "a", "na2", "10.7.0.0/24")
    peer(fed["east"], "a", "na", "local", "a/na2")
    assert peer(fed["east"], "a", "na2", "local", "a/na").phase == Phase.BOUND
    # A new cross-site consent waits, saying why, and says nothing of the remote network.
    pa = peer(fed["east"], "a", "na", "p", "b/nb", "west")
    ghost = peer(fed["east"], "a", "na2", "p", "b/no-such-network", "west")
    assert (pa.phase, pa.reason) == (Phase.PENDING, Reason.REMOTE_SITE_UNREACHABLE)
    assert (ghost.phase, ghost.reason) == (Phase.PENDING, Reason.REMOTE_SITE_UNREACHABLE)
    assert pa.message.replace("nb", "?") == ghost.message.replace("no-such-network", "?")
    peer(fed["west"], "b", "nb", "p", "a/na", "east")
    fed.settle()
    assert get(fed["east"], "a", "na", "p").phase == Phase.PENDING
    assert get(fed["west"], "b", "nb", "p").reason == Reason.REMOTE_SITE_UNREACHABLE
    # Bound pairs stay Bound through the partition.
    assert get(fed["east"], "x", "nx", "p").phase == Phase.BOUND
    fed.cut.clear()
    fed.settle()
    assert get(fed["east"], "a", "na", "p").phase == Phase.BOUND
    assert get(fed["west"], "b", "nb", "p").phase == Phase.BOUND
    assert get(fed["east"], "a", "na2", "p").reason == Reason.AWAITING_REMOTE


def test_an_exchange_lost_midway_never_leaves_one_side_bound_past_the_next_exchange(fed):
    net(fed["east"], "a", "na", "10.1.0.0/24")
    net(fed["west"], "b", "nb", "10.2.0.0/24")
    peer(fed["west"], "b", "nb", "p", "a/na", "east")
    fed.settle()
    # West takes east's side and binds, but its answer never arrives.
    real = fed["east"].sites.transport

    def lose_answer(site, view):
        real(site, view)
        raise ConnectionError("answer lost")
    fed["east"].sites.transport = lose_answer
    peer(fed["east"], "a", "na", "p", "b/nb", "west")
    fed["east"].sites.exchange("west")
    assert get(fed["west"], "b", "nb", "p").phase == Phase.BOUND
    assert get(fed["east"], "a", "na", "p").phase == Phase.PENDING
    fed["east"].sites.transport = real
    fed["east"].sites.exchange("west")
    assert get(fed["east"], "a", "na", "p").phase == Phase.BOUND


def test_routes_follow_a_remote_prefix_change(fed):
    a = net(fed["east"], "a", "na", "10.1.0.0/24")
    net(fed["west"], "b", "nb", "10.2.0.0/24")
    peer(fed["east"], "a", "na", "p", "b/nb", "west")
    peer(fed["west"], "b", "nb", "p", "a/na", "east")
    fed.settle()
    fed["west"].update_network(ADMIN, "b", "nb", subnets=["10.2.0.0/24", "10.9.0.0/24"])
    fed.settle()
    [remote] = fed.dataplanes["east"].networks[a.uid].remote_peers
    assert remote.network.subnets == ("10.2.0.0/24", "10.9.0.0/24")


def test_bad_sites_are_refused_with_one_line_and_change_nothing(fed):
    net(fed["east"], "a", "na", "10.1.0.0/24")
    cases = {"north": "is not a site this netpeerd is linked to (known: west)",
             "East": "is not a valid site name", "east": "is this site",
             "a" * 11: "is not a valid site name"}
    for site, words in cases.items():
        with pytest.raises(errors.InvalidArgument) as exc:
            peer(fed["east"], "a", "na", "p", "b/nb", site)
        assert exc.value.field == "remote.site" and words in exc.value.message and "\n" not in exc.value.message
    assert fed["east"].list_peerings(ADMIN, "a", "na") == []


def test_a_single_site_service_refuses_a_remote_site(tmp_path):
    store = SqliteStore(tmp_path / "one.db")
    try:
        svc = Service(store, MemoryDataplane())
        svc.create_network(ADMIN, "a", "na", ["10.1.0.0/24"])
        with pytest.raises(errors.InvalidArgument, match="remote.site.*serves no sites"):
            svc.create_peering(ADMIN, "a", "na", "p", "b", "nb", remote_site="west")
    finally:
        store.close()


def test_the_link_threads_exchange_after_each_commit(fed):
    stop = threading.Event()
    for svc in fed.services.values():
        svc.sites.interval = 60   # only pokes
        svc.sites.start(stop)
    try:
        net(fed["east"], "a", "na", "10.1.0.0/24")
        net(fed["west"], "b", "nb", "10.2.0.0/24")
        peer(fed["east"], "a", "na", "p", "b/nb", "west")
        peer(fed["west"], "b", "nb", "p", "a/na", "east")
        # the link interval is 60 s: only a poke binds this soon
        wait_until(lambda: get(fed["east"], "a", "na", "p").phase == get(fed["west"], "b", "nb", "p").phase
                   == Phase.BOUND, 30, "the pair did not bind within 30 s of its second half", step=0.01)
    finally:
        stop.set()
        for svc in fed.services.values():
            svc.sites.poke(svc.sites.capacity)
            svc.sites.join()


class KeyedDataplane(MemoryDataplane):
    """A network's rows for its link to another site wait for a key the
    dataplane gives itself (OVN: ovn-ic's tunnel key on its transit port):
    until ``keyed`` holds (uid, site), every sync reports that link
    ``waiting``; the sync after that writes them and reports them
    ``released``, as the OVN backend does. A sync that changes nothing asks
    the chassis for nothing (no ``cfg``), as OVN's does. Its chassis apply
    every change at once."""

    def __init__(self):
        super().__init__()
        self.keyed: set[tuple[str, str]] = set()
        self.written: set[tuple[str, str]] = set()

    @staticmethod
    def _links(desired) -> set[tuple[str, str]]:
        return {(uid, site) for uid, state in desired.items() if state is not None for site, _ in state.attachments}

    def _due(self, desired) -> set[tuple[str, str]]:
        return (self._links(desired) & self.keyed) - self.written

    def drifted(self, desired):
        return super().drifted(desired) | {uid for uid, _ in self._due(desired)}

    def waiting(self, desired):
        return self._links(desired) - self.keyed

    def sync(self, desired, stamp=None, track=False):
        due = self._due(desired)
        before = self.cfg, self.applied_cfg
        report = super().sync(desired, stamp, track)
        self.written |= due
        if not report.changed and not due:   # nothing changed: nothing asked of the chassis
            self.cfg, self.applied_cfg = before
            report = dataclasses.replace(report, cfg=None)
        return dataclasses.replace(report, created=report.created + 3 * len(due), released=3 * len(due),
                                   waiting=frozenset(self.waiting(desired)))


def bound_across(fed, sites=("west",)):
    """net-a (east) Bound to net-c (east) and to a network in each of ``sites``."""
    east = fed["east"]
    a = net(east, "team-a", "net-a", "10.1.0.0/24")
    net(east, "team-c", "net-c", "10.3.0.0/24")
    peer(east, "team-a", "net-a", "to-c", "team-c/net-c")
    peer(east, "team-c", "net-c", "to-a", "team-a/net-a")
    for k, site in enumerate(sites):
        net(fed[site], "team-b", "net-b", f"10.2.{k}.0/24")
        fed.settle()
        peer(east, "team-a", "net-a", f"to-{site}", "team-b/net-b", site)
        fed.settle()
        peer(fed[site], "team-b", "net-b", "to-a", "team-a/net-a", "east")
        fed.settle()
        assert get(east, "team-a", "net-a", f"to-{site}").phase == Phase.BOUND
    return a


def dataplanes_of(svc, ns, network):
    return {p.name: p.dataplane for p in svc.list_peerings(ADMIN, ns, network)}


@contextlib.contextmanager
def keyed_federation(tmp_path, names=("east", "west")):
    fed = Federation(tmp_path, names=names, dataplane=KeyedDataplane)
    try:
        yield fed
    finally:
        fed.close()


def test_a_cross_site_pair_is_programmed_only_once_the_rows_that_waited_are_in(tmp_path):
    with keyed_federation(tmp_path) as fed:
        east, dp = fed["east"], fed.dataplanes["east"]
        a = bound_across(fed)
        # Every chassis applied the bind, but its router port and routes wait for the key: no traffic yet.
        east.programmer.check()
        assert dataplanes_of(east, "team-a", "net-a") == {"to-west": "Programming", "to-c": "Programmed"}
        east.repair()
        east.programmer.check()
        assert dataplanes_of(east, "team-a", "net-a")["to-west"] == "Programming"   # a sweep changes nothing
        dp.keyed.add((a.uid, "west"))
        assert east.repair().repaired_rows == 0     # the rows go in; not drift
        east.programmer.check()
        assert dataplanes_of(east, "team-a", "net-a") == {"to-west": "Programmed", "to-c": "Programmed"}


def test_a_link_still_waiting_holds_back_only_the_pairs_over_it(tmp_path):
    with keyed_federation(tmp_path, names=("east", "west", "north")) as fed:
        east, dp = fed["east"], fed.dataplanes["east"]
        a = bound_across(fed, sites=("west",))
        dp.keyed.add((a.uid, "west"))
        east.repair()
        east.programmer.check()
        assert dataplanes_of(east, "team-a", "net-a")["to-west"] == "Programmed"
        # A new pair towards north: its link waits; the pair over west does not go back to waiting.
        net(fed["north"], "team-n", "net-n", "10.4.0.0/24")
        fed.settle()
        peer(east, "team-a", "net-a", "to-north", "team-n/net-n", "north")
        peer(fed["north"], "team-n", "net-n", "to-a", "team-a/net-a", "east")
        fed.settle()
        for _ in range(2):   # as the bind left them, and after a sweep
            east.programmer.check()
            assert dataplanes_of(east, "team-a", "net-a") == {"to-c": "Programmed", "to-north": "Programming",
                                                              "to-west": "Programmed"}
            east.repair()
        dp.keyed.add((a.uid, "north"))
        east.repair()
        east.programmer.check()
        assert set(dataplanes_of(east, "team-a", "net-a").values()) == {"Programmed"}


def test_a_mark_lost_after_the_rows_went_in_is_made_by_the_next_sweep(tmp_path):
    with keyed_federation(tmp_path) as fed:
        east, dp = fed["east"], fed.dataplanes["east"]
        a = bound_across(fed)
        dp.keyed.add((a.uid, "west"))
        dp.written.add((a.uid, "west"))   # in OVN already; the process that wrote them died before the mark
        dp.apply_at_once = False           # and the chassis have not caught up with them yet
        dp.cfg += 1
        east.programmer.check()
        assert dataplanes_of(east, "team-a", "net-a")["to-west"] == "Programming"
        east.repair()
        east.programmer.check()
        assert dataplanes_of(east, "team-a", "net-a")["to-west"] == "Programming"   # marked, not yet applied
        dp.applied_cfg = dp.cfg
        east.programmer.check()
        assert dataplanes_of(east, "team-a", "net-a")["to-west"] == "Programmed"


def test_one_key_of_two_programs_the_pairs_over_its_link_only(tmp_path):
    with keyed_federation(tmp_path, names=("east", "west", "north")) as fed:
        east, dp = fed["east"], fed.dataplanes["east"]
        a = bound_across(fed, sites=("west", "north"))
        east.programmer.check()
        assert dataplanes_of(east, "team-a", "net-a") == {"to-c": "Programmed", "to-north": "Programming",
                                                          "to-west": "Programming"}
        dp.keyed.add((a.uid, "west"))
        east.repair()
        east.programmer.check()
        assert dataplanes_of(east, "team-a", "net-a") == {"to-c": "Programmed", "to-north": "Programming",
                                                          "to-west": "Programmed"}
