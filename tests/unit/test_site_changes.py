"""What crosses a link: changes, not sides (netpeer.core.sides,
netpeer.service.sitelog). Two or three services with their own stores,
joined by a transport that records every message; the gRPC link carries the
same messages (tests/integration/test_sites_control.py, tests/sites)."""

from __future__ import annotations

import dataclasses
import logging
import sqlite3

import pytest

from netpeer import errors
from netpeer.core import sides
from netpeer.core.models import Caller, Phase, Quotas
from netpeer.service import Service, Settings, sitelog
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore

ADMIN = Caller("admin", frozenset(), True)


class Link:
    """Services joined directly; every message and answer is kept."""

    def __init__(self, tmp_path, names=("east", "west")):
        self.tmp, self.names = tmp_path, names
        self.sent: list[sides.Sync] = []
        self.cut = False
        self.services = {n: self.open(n) for n in names}

    def open(self, name: str, store_path=None) -> Service:
        svc = Service(SqliteStore(store_path or self.tmp / f"{name}.db"), MemoryDataplane(),
                      Settings(quotas=Quotas(networks_per_namespace=10_000, pending_peerings_per_namespace=10_000)))
        svc.link_sites(name, {o: 1000 for o in self.names if o != name}, transport=self._transport(name))
        svc.sites.prepare()
        return svc

    def _transport(self, here):
        def call(site, msg):
            if self.cut:
                raise ConnectionError("cut")
            self.sent.append(msg)
            answer = self.services[site].sites.receive(msg)
            self.sent.append(answer)
            return answer
        return call

    def __getitem__(self, name):
        return self.services[name]

    def settle(self, rounds=4):
        for _ in range(rounds):
            for a in self.names:
                for b in self.names:
                    if a != b:
                        self.services[a].sites.exchange(b)

    def items(self) -> int:
        return sum(len(m.delta.items) for m in self.sent)

    def close(self):
        for svc in self.services.values():
            svc.store.close()


@pytest.fixture
def link(tmp_path):
    f = Link(tmp_path)
    yield f
    f.close()


def pairs(link: Link, first: int, count: int) -> None:
    """``count`` cross-site pairs east team-a/n<i> <-> west team-b/n<i>."""
    e, w = link["east"], link["west"]
    for i in range(first, first + count):
        e.create_network(ADMIN, "team-a", f"n{i}", [f"10.1.{i}.0/24"])
        w.create_network(ADMIN, "team-b", f"n{i}", [f"10.2.{i}.0/24"])
        e.create_peering(ADMIN, "team-a", f"n{i}", "p", "team-b", f"n{i}", remote_site="west")
        w.create_peering(ADMIN, "team-b", f"n{i}", "p", "team-a", f"n{i}", remote_site="east")
    link.settle()


def phases(link: Link, i: int) -> tuple:
    return (link["east"].get_peering(ADMIN, "team-a", f"n{i}", "p").phase,
            link["west"].get_peering(ADMIN, "team-b", f"n{i}", "p").phase)


def held(svc: Service, site: str) -> sides.LinkState:
    with svc.store.read() as tx:
        return tx.get_link(site)


def test_one_more_bind_crosses_as_the_same_few_items_at_5_or_60_pairs(tmp_path):
    """What one bind sends does not grow with the pairs already Bound."""
    counts = []
    for size in (5, 60):
        link = Link(tmp_path / str(size))
        try:
            pairs(link, 0, size)
            assert phases(link, size - 1) == (Phase.BOUND, Phase.BOUND)
            link.sent.clear()
            pairs(link, size, 1)
            assert phases(link, size) == (Phase.BOUND, Phase.BOUND)
            assert not any(m.delta.full for m in link.sent)
            counts.append(link.items())
        finally:
            link.close()
    assert counts[0] == counts[1] and counts[1] <= 12, counts


def test_an_exchange_with_nothing_to_say_carries_nothing_and_writes_nothing(link, monkeypatch):
    pairs(link, 0, 20)
    runs = []
    for svc in link.services.values():
        real = svc.writes.run
        monkeypatch.setattr(svc.writes, "run", lambda fn, weight=1, real=real: runs.append(1) or real(fn, weight))
    link.sent.clear()
    for _ in range(5):
        assert link["east"].sites.exchange("west") and link["west"].sites.exchange("east")
    assert link.items() == 0 and runs == []
    assert all(m.delta.digest.count == 40 for m in link.sent)   # 20 networks + 20 halves, in one digest


def test_a_mirror_that_lost_an_item_asks_for_a_full_copy_and_is_whole_again(link, caplog):
    pairs(link, 0, 3)
    db = sqlite3.connect(link.tmp / "west.db")
    db.execute("DELETE FROM remote_halves WHERE network='n1'")   # a change lost, however it happened
    db.commit()
    db.close()
    # West's digest says what it holds now, as a lost change would leave it.
    with link["west"].store.write() as tx:
        tx.put_link(dataclasses.replace(tx.get_link("east"), mirror=rebuilt_mirror_digest(tx, "east")))
    # A new change on east: west applies it, compares digests, and asks for everything.
    link["east"].create_network(ADMIN, "team-a", "n9", ["10.1.9.0/24"])
    link["east"].create_peering(ADMIN, "team-a", "n9", "p", "team-b", "n9", remote_site="west")
    with caplog.at_level(logging.WARNING):
        link.settle()
    assert "asking for a full copy" in caplog.text
    assert held(link["west"], "east").resyncs_received >= 1
    assert held(link["west"], "east").mirror == held(link["east"], "west").out
    assert phases(link, 1) == (Phase.BOUND, Phase.BOUND)


def rebuilt_mirror_digest(tx, site) -> sides.Digest:
    networks, halves = tx.mirror_of(site)
    items = [sides.ToldNetwork(n.namespace, n.name, n.uid, n.subnets, slot) for n, slot in networks]
    items += [sides.ToldHalf(h.namespace, h.network, h.name, h.remote_namespace, h.remote_network, h.network_uid,
                             h.remote_uid or "", h.create_time, h.phase, h.conflicts, h.ready) for h in halves]
    return sides.digest_of(items)


def test_a_site_away_longer_than_the_removals_kept_gets_a_full_copy(link, monkeypatch):
    monkeypatch.setattr(sitelog, "TOMBSTONES_MAX", 2)
    pairs(link, 0, 6)
    link.cut = True
    for i in range(5):
        link["east"].delete_peering(ADMIN, "team-a", f"n{i}", "p")
    link.cut = False
    link.sent.clear()
    link.settle()
    assert any(m.delta.full and m.site == "east" for m in link.sent)
    assert held(link["west"], "east").resyncs_received == 1
    west = [link["west"].get_peering(ADMIN, "team-b", f"n{i}", "p") for i in range(6)]
    assert [(p.phase, p.reason) for p in west] == [(Phase.PENDING, "RemoteWithdrawn")] * 5 + [(Phase.BOUND, "Bound")]


def test_a_store_restored_from_a_backup_is_told_everything_again(link, tmp_path):
    pairs(link, 0, 2)
    backup = tmp_path / "east-backup.db"
    src = sqlite3.connect(link.tmp / "east.db")
    dst = sqlite3.connect(backup)
    src.backup(dst)
    src.close()
    dst.close()
    pairs(link, 2, 2)              # changes the backup does not have
    link["east"].store.close()
    link.services["east"] = link.open("east", backup)   # east restored: its numbering went back
    link.settle()
    assert held(link["east"], "west").mirror == held(link["west"], "east").out
    assert held(link["west"], "east").mirror == held(link["east"], "west").out
    # East's halves of n2, n3 are gone with the backup: west is told, and shows them withdrawn.
    assert [phases(link, i)[0] for i in range(2)] == [Phase.BOUND, Phase.BOUND]
    assert link["west"].get_peering(ADMIN, "team-b", "n3", "p").phase == Phase.PENDING


def test_the_outbox_checked_against_the_whole_side_is_mended(link, caplog):
    pairs(link, 0, 3)
    db = sqlite3.connect(link.tmp / "east.db")
    db.execute("DELETE FROM site_outbox WHERE network='n1'")
    db.commit()
    db.close()
    with caplog.at_level(logging.WARNING):
        assert link["east"].sites.verify() == 2      # the network and its half
    assert "mended" in caplog.text
    link.settle()
    assert held(link["west"], "east").mirror == held(link["east"], "west").out
    assert phases(link, 1) == (Phase.BOUND, Phase.BOUND)


def test_a_mismatch_that_stays_after_a_full_copy_is_an_alert_not_a_loop(link, monkeypatch, caplog):
    pairs(link, 0, 2)
    real = sitelog.message

    def wrong_digest(*args, **kwargs):   # a teller whose digest never matches what it sends
        msg = real(*args, **kwargs)
        if msg.site == "east":
            msg = dataclasses.replace(msg, delta=dataclasses.replace(msg.delta, digest=sides.Digest(99, 1)))
        return msg
    monkeypatch.setattr(sitelog, "message", wrong_digest)
    link.sent.clear()
    with caplog.at_level(logging.WARNING):
        link.settle(rounds=10)
    fulls = [m for m in link.sent if m.site == "east" and m.delta.full]
    assert len(fulls) == 1                                       # one full copy, then an alert
    assert caplog.text.count("does not match the digest it sent") == 1
    assert any(s.diverged for s in link["west"].sites.status())
    assert phases(link, 1) == (Phase.BOUND, Phase.BOUND)         # consent goes on meanwhile


def test_a_delta_from_beyond_what_the_receiver_holds_changes_nothing_and_the_next_heals(link):
    pairs(link, 0, 2)
    before = held(link["west"], "east")
    with link["east"].store.read() as tx:
        msg = sitelog.message(tx, "east", "west", ("nothing", 0))
    gap = dataclasses.replace(msg, delta=dataclasses.replace(msg.delta, full=False, since=before.in_seq + 5,
                                                             head=before.in_seq + 9))
    answer = link["west"].sites.receive(gap)
    assert held(link["west"], "east").in_seq == before.in_seq and answer.ack == before.in_seq
    link.settle()
    assert held(link["west"], "east").mirror == held(link["east"], "west").out


def test_an_exchange_from_a_site_that_is_not_linked_is_refused_with_one_line(link):
    with link["east"].store.read() as tx:
        msg = sitelog.message(tx, "east", "west")
    stranger = dataclasses.replace(msg, site="north")
    with pytest.raises(errors.PermissionDenied) as info:
        link["west"].sites.receive(stranger)
    assert "'north'" in info.value.message and "\n" not in info.value.message
    assert "both sides" in info.value.message
    with link["west"].store.read() as tx:
        assert tx.get_link("north") is None and tx.mirror_of("north") == ([], [])


def test_a_site_joins_a_running_region_and_another_is_retired(tmp_path):
    """North joins east and west while they run (each reconfigured, no
    restart); then east retires north: its pairs with north are withdrawn
    with a reason that says so, its slots on that link are given back, and
    north, still configured with east, is told in one line why east refuses."""
    region = Link(tmp_path, ("east", "west"))
    try:
        pairs(region, 0, 1)
        region.names = ("east", "west", "north")
        region.services["north"] = region.open("north")
        for name in ("east", "west"):
            added, removed = region[name].sites.reconfigure({o: 1000 for o in region.names if o != name})
            assert (added, removed) == (["north"], [])
        e, n = region["east"], region["north"]
        e.create_network(ADMIN, "team-a", "east-1", ["10.5.1.0/24"])
        n.create_network(ADMIN, "team-c", "north-1", ["10.5.2.0/24"])
        e.create_peering(ADMIN, "team-a", "east-1", "p", "team-c", "north-1", remote_site="north")
        n.create_peering(ADMIN, "team-c", "north-1", "p", "team-a", "east-1", remote_site="east")
        region.settle()
        assert e.get_peering(ADMIN, "team-a", "east-1", "p").phase == Phase.BOUND
        assert n.get_peering(ADMIN, "team-c", "north-1", "p").phase == Phase.BOUND
        uid = e.get_network(ADMIN, "team-a", "east-1").network.uid
        assert region.services["east"].dataplane.networks[uid].attachments == (("north", 0),)

        assert e.sites.reconfigure({"west": 1000}) == ([], ["north"])
        p = e.get_peering(ADMIN, "team-a", "east-1", "p")
        assert (p.phase, p.reason) == (Phase.PENDING, "SiteRetired") and "north" in p.message
        assert region.services["east"].dataplane.networks[uid].attachments == ()
        with e.store.read() as tx:
            assert tx.mirror_of("north") == ([], []) and tx.get_link("north") is None
        assert phases(region, 0) == (Phase.BOUND, Phase.BOUND)       # the other link goes on
        with pytest.raises(errors.InvalidArgument, match="remote.site: 'north' is not a site"):
            e.create_peering(ADMIN, "team-a", "east-1", "q", "team-c", "north-2", remote_site="north")
        assert not n.sites.exchange("east")
        [status] = [s for s in n.sites.status() if s.site == "east"]
        assert "'north' is not linked to site east" in status.last_error and "\n" not in status.last_error
        region.settle()
        q = n.get_peering(ADMIN, "team-c", "north-1", "p")
        assert q.phase == Phase.BOUND    # north never heard east withdraw: it stays until north retires east too
        assert n.sites.reconfigure({"west": 1000}) == ([], ["east"])
        assert n.get_peering(ADMIN, "team-c", "north-1", "p").reason == "SiteRetired"
    finally:
        region.close()
