"""The store interface (netpeer.store.base), the same checks on each store:
SQLite and PostgreSQL answer alike. The PostgreSQL-only part is what
replicas rely on: two processes' writes serialize, revisions follow commit
order, a newer schema and another owner are refused in one line."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sqlite3
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from netpeer import errors
from netpeer.core.dataplane import WAITS_FOR_DATAPLANE
from netpeer.core import sides
from netpeer.core.models import Network, NetworkKey, Peering, PeeringKey, Phase, Token
from netpeer.store import migrations
from netpeer.store.base import open_store
from tests.pgsupport import make_store

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    cluster = request.getfixturevalue("pg_cluster") if request.param == "postgresql" else None
    s = make_store(request.param, tmp_path, cluster)
    yield s
    s.close()


def net(ns: str, name: str, i: int) -> Network:
    return Network(ns, name, f"{i:08d}-0000-4000-8000-000000000000", (f"10.{i}.0.0/24",), (), "", T0, T0, 1)


def half(a: Network, b: Network, name: str = "p", phase: Phase = Phase.PENDING) -> Peering:
    return Peering(a.namespace, a.name, name, b.namespace, b.name, a.uid, None, timedelta(hours=1), "", phase,
                   "AwaitingRemote", "", T0, T0, 1)


def test_a_write_that_raises_keeps_nothing_and_a_savepoint_only_its_own(store):
    with pytest.raises(RuntimeError):
        with store.write() as tx:
            tx.put_network(net("a", "n1", 1))
            raise RuntimeError("boom")
    with store.write() as tx:
        tx.put_network(net("a", "n2", 2))
        with pytest.raises(RuntimeError):
            with tx.savepoint():
                tx.put_network(net("a", "n3", 3))
                raise RuntimeError("only this one")
        tx.put_network(net("a", "n4", 4))
    with store.read() as tx:
        assert [n.name for n in tx.list_networks("a")] == ["n2", "n4"]
        assert [e.name for e in tx.events_after("a", None, 0, 100)] == ["n2", "n4"]


def test_reads_in_a_write_see_its_writes_and_not_what_a_savepoint_undid(store):
    """A write's reads are answered from the rows it already read or wrote
    (the consent logic asks for the same ones many times): they must still
    see every later write of the transaction, and forget what a rollback to
    a savepoint undid."""
    a, b = net("a", "na", 1), net("b", "nb", 2)
    with store.write() as tx:
        for n in (a, b):
            tx.put_network(n)
        tx.put_peering(half(a, b))
    with store.write() as tx:
        assert tx.find_peering_to(b.key, a.key) is None and tx.bound_peerings_of(a.key) == []
        tx.put_peering(half(b, a, "q"))
        assert tx.find_peering_to(b.key, a.key).name == "q"
        bound = dataclasses.replace(half(a, b), phase=Phase.BOUND, revision=2)
        tx.put_peering(bound)
        assert [p.phase for p in tx.bound_peerings_of(a.key)] == [Phase.BOUND]
        with pytest.raises(RuntimeError):
            with tx.savepoint():
                tx.put_network(dataclasses.replace(a, subnets=("10.9.0.0/24",), revision=2))
                tx.put_peering(dataclasses.replace(bound, phase=Phase.FAILED, revision=3))
                tx.delete_peering(PeeringKey("b", "nb", "q"))
                assert tx.find_peering_to(b.key, a.key) is None and tx.bound_peerings_of(a.key) == []
                assert tx.get_network(a.key).subnets == ("10.9.0.0/24",)
                raise RuntimeError("undone")
        assert tx.get_network(a.key).subnets == a.subnets
        assert tx.get_peering(bound.key).phase == Phase.BOUND
        assert [p.name for p in tx.bound_peerings_of(a.key)] == ["p"]
        assert tx.find_peering_to(b.key, a.key).name == "q"
        tx.set_dataplane_cfg(a.key, 7)
        assert tx.get_peering(bound.key).dataplane_cfg == 7
        tx.delete_peering(bound.key)
        assert tx.get_peering(bound.key) is None and tx.find_peering_to(a.key, b.key) is None
    with store.read() as tx:
        assert [p.name for p in tx.peerings_of(b.key)] == ["q"] and tx.peerings_of(a.key) == []


def test_networks_and_peerings_read_back_as_written(store):
    a, b = net("a", "na", 1), net("b", "nb", 2)
    with store.write() as tx:
        tx.put_network(a)
        tx.put_network(b)
        tx.put_peering(half(a, b))
        tx.put_peering(half(b, a, "q", Phase.BOUND))
    with store.read() as tx:
        assert tx.get_network(a.key) == a and tx.get_network_by_uid(b.uid) == b
        assert [n.name for n in tx.list_networks(None)] == ["na", "nb"]
        assert [n.name for n in tx.list_networks(None, after="a/na")] == ["nb"]
        assert tx.get_peering(PeeringKey("a", "na", "p")) == half(a, b)
        assert tx.find_peering_to(a.key, b.key).name == "p"
        assert [p.name for p in tx.peerings_towards(a.key)] == ["q"]
        assert [p.name for p in tx.bound_peerings_of(b.key)] == ["q"] and tx.failed_peerings_of(b.key) == []
        assert tx.count_networks("a") == 1 and tx.count_peerings_of(a.key) == 1 and tx.count_pending("a") == 1
        assert tx.count_by_phase() == {"Pending": 1, "Bound": 1, "Failed": 0}
        assert [p.name for p in tx.expired_peerings(T0 + timedelta(hours=2))] == ["p"]
        assert tx.expired_peerings(T0 + timedelta(minutes=59)) == []
    with store.write() as tx:
        assert tx.set_dataplane_cfg(b.key, 7) == [PeeringKey("b", "nb", "q")]
        assert [p.name for p in tx.programming(7)] == ["q"] and tx.programming(6) == []
        tx.delete_peering(PeeringKey("a", "na", "p"))
        tx.delete_network(NetworkKey("x", "missing"))     # nothing, no event
    with store.read() as tx:
        assert tx.get_peering(PeeringKey("a", "na", "p")) is None
        kinds = [(e.kind, e.name, e.type) for e in tx.events_after("a", None, 0, 100)]
        assert kinds == [("network", "na", "Created"), ("peering", "p", "Created"), ("peering", "p", "Deleted")]


def test_a_namespaces_halves_read_in_network_and_name_order_page_by_page(store):
    nets = [net("a", name, i) for i, name in enumerate(("n1", "n2", "n3"), 1)]
    remotes = [net("b", f"m{i}", 10 + i) for i in range(5)]
    with store.write() as tx:
        for n in nets + remotes:
            tx.put_network(n)
        for i, (a, name) in enumerate(((nets[1], "z"), (nets[0], "y"), (nets[1], "a"), (nets[2], "q"))):
            tx.put_peering(half(a, remotes[i], name))
        tx.put_peering(half(remotes[4], nets[0], "x"))
    with store.read() as tx:
        every = [(p.network, p.name) for p in tx.peerings_in("a")]
        first = [(p.network, p.name) for p in tx.peerings_in("a", limit=2)]
        rest = [(p.network, p.name) for p in tx.peerings_in("a", after=first[-1])]
        assert tx.peerings_in("c") == []
    assert every == [("n1", "y"), ("n2", "a"), ("n2", "z"), ("n3", "q")]
    assert first + rest == every


def test_halves_naming_another_site_are_their_own_and_mark_their_network(store):
    a, b = net("a", "na", 1), net("b", "nb", 2)
    here = half(a, b, "here")
    there = dataclasses.replace(half(a, b, "there"), remote_site="west", conflicts=("10.1.0.0/24",))
    with store.write() as tx:
        tx.put_network(a)
        tx.put_network(b)
        tx.networks_changed.clear()
        tx.put_peering(here)
        tx.put_peering(there)   # same remote namespace and name, another site: allowed
        assert tx.networks_changed == {a.key}
        assert tx.halves_of_to_site(a.key, "west") == [there] and tx.halves_of_to_site(b.key, "west") == []
        assert tx.sites_of(a.key) == {"west"} and tx.networks_towards(NetworkKey("b", "nb", "west")) == {a.key}
    with store.read() as tx:
        assert tx.find_peering_to(a.key, NetworkKey("b", "nb")).name == "here"
        assert tx.find_peering_to(a.key, NetworkKey("b", "nb", "west")) == there
        assert [p.name for p in tx.peerings_towards(NetworkKey("b", "nb", "west"))] == ["there"]
        assert [p.name for p in tx.peerings_towards(b.key)] == ["here"]
        assert tx.halves_to_site("west") == [there]
        assert tx.peering_sites() == ["west"]
        assert tx.has_peering_to_site(a.key, "west") and not tx.has_peering_to_site(b.key, "west")
    with store.write() as tx:
        # What another site is told of a network or half changes: marked; anything else is not.
        tx.put_network(dataclasses.replace(a, description="changed", revision=2))
        tx.put_peering(dataclasses.replace(there, description="changed", revision=2))
        assert tx.networks_changed == set()
        tx.put_network(dataclasses.replace(a, subnets=("10.7.0.0/24",), revision=3))
        assert tx.networks_changed == {a.key}
    with store.write() as tx:
        tx.delete_peering(there.key)
        assert tx.networks_changed == {a.key}


def test_marks_for_the_dataplane_reach_the_pairs_of_their_sites_and_never_go_back(store):
    a, b, c = net("a", "na", 1), net("b", "nb", 2), net("c", "nc", 3)
    local = half(a, c, "local", Phase.BOUND)
    cross = dataclasses.replace(half(a, b, "cross", Phase.BOUND), remote_site="west")
    with store.write() as tx:
        for n in (a, b, c):
            tx.put_network(n)
        tx.put_peering(local)
        tx.put_peering(cross)
        assert tx.set_dataplane_cfg(a.key, 5) == [cross.key, local.key]
        assert tx.set_dataplane_cfg(a.key, WAITS_FOR_DATAPLANE, sites={"north"}) == []
        assert tx.set_dataplane_cfg(a.key, WAITS_FOR_DATAPLANE, sites={"west", "north"}) == [cross.key]
    with store.read() as tx:
        assert tx.awaiting_dataplane() == {(a.uid, "west")}
        assert [p.name for p in tx.programming(10 ** 6)] == ["local"]   # the waiting pair is not acknowledged
        assert tx.get_peering(cross.key).dataplane == "Programming"
    with store.write() as tx:
        assert tx.set_dataplane_cfg(a.key, 9, newer_only=True) == [cross.key, local.key]   # 5 < 9, and the wait
        assert tx.set_dataplane_cfg(a.key, 8, newer_only=True) == []                        # never back to 8
        assert sorted((p.name, p.dataplane_cfg) for p in tx.programming(9)) == [("cross", 9), ("local", 9)]
        assert tx.awaiting_dataplane() == set()


def test_the_mirror_of_another_site_holds_what_it_told_item_by_item(store):
    a = net("a", "na", 1)
    theirs = dataclasses.replace(net("x", "nx", 9), site="west", subnets=("10.9.0.0/24", "10.99.0.0/16"))
    mirrored = dataclasses.replace(half(theirs, a, "to-a"), site="west", remote_uid=a.uid, conflicts=("c",),
                                   ready=True, reason="AwaitingRemote", ttl=timedelta(0))
    told_n, told_h = sides.told_network(theirs, 3), sides.told_half(mirrored)
    with store.write() as tx:
        tx.put_network(a)
        tx.mirror_put("west", told_n, 7)
        tx.mirror_put("west", told_h, 1 << 100)
        assert tx.mirror_hash("west", told_n.key) == 7 and tx.mirror_hash("west", told_h.key) == 1 << 100
        assert tx.mirror_hash("east", told_n.key) is None
    with store.read() as tx:
        got = tx.get_network(NetworkKey("x", "nx", "west"))
        assert (got.uid, got.subnets, got.site) == (theirs.uid, theirs.subnets, "west")
        assert tx.get_network(NetworkKey("x", "nx", "east")) is None
        assert tx.remote_attachment("west", theirs.uid) == 3
        key = PeeringKey("x", "nx", "to-a", "west")
        h = tx.get_peering(key)
        assert (h.remote_namespace, h.remote_network, h.remote_uid, h.conflicts, h.ready, h.phase) == \
            ("a", "na", a.uid, ("c",), True, Phase.PENDING)
        assert tx.find_peering_to(NetworkKey("x", "nx", "west"), a.key) == h
        assert tx.find_peering_to(NetworkKey("x", "nx", "west"), NetworkKey("a", "na", "east")) is None
        assert tx.peerings_of(NetworkKey("x", "nx", "west")) == [h]
        assert tx.peerings_of(NetworkKey("x", "nx", "west"), after="to-a") == []
        assert tx.bound_peerings_of(NetworkKey("x", "nx", "west")) == []
        networks, halves = tx.mirror_of("west")
        assert [(n.uid, slot) for n, slot in networks] == [(theirs.uid, 3)] and halves == [h]
        assert tx.mirrored_sites() == ["west"]
    with store.write() as tx:
        tx.mirror_remove("west", told_h.key)
        assert tx.mirror_of("west")[1] == [] and tx.mirror_hash("west", told_h.key) is None
        tx.forget_site("west")
    with store.read() as tx:
        assert tx.mirror_of("west") == ([], []) and tx.mirrored_sites() == []


def test_the_outbox_numbers_changes_keeps_removals_until_pruned_and_the_link_reads_back(store):
    k1, k2 = sides.ItemKey("n", "a", "na", ""), sides.ItemKey("h", "a", "na", "p")
    with store.write() as tx:
        tx.outbox_put("west", k1, "[1]", 5, 1)
        tx.outbox_put("west", k2, "[2]", 1 << 127, 2)
        tx.outbox_put("west", k1, None, 0, 3)          # removed: a tombstone
        tx.outbox_put("east", k1, "[9]", 9, 1)
        link = sides.LinkState("west", "s1", head=3, out=sides.Digest(1, 1 << 127), peer_stream="p", peer_ack=2,
                               in_stream="t", in_seq=7, mirror=sides.Digest(2, 3), resyncs_received=1, reachable=True,
                               last_ok=datetime(2026, 1, 1, tzinfo=timezone.utc), last_error="")
        tx.put_link(link)
    with store.read() as tx:
        assert tx.outbox_of("west", NetworkKey("a", "na")) == {k1: (None, 0, 3), k2: ("[2]", 1 << 127, 2)}
        assert tx.outbox_since("west", 1, 10) == [(k2, "[2]", 2), (k1, None, 3)]
        assert tx.outbox_since("west", 0, 1) == [(k2, "[2]", 2)]
        assert tx.outbox_live("west") == [(k2, "[2]")]
        assert tx.outbox_tombstones("west") == [3]
        assert tx.get_link("west") == link and tx.get_link("north") is None
        assert [x.site for x in tx.links()] == ["west"]
    with store.write() as tx:
        assert tx.outbox_prune("west", 2) == 0 and tx.outbox_prune("west", 3) == 1
        tx.forget_site("west")
    with store.read() as tx:
        assert tx.outbox_live("west") == [] and tx.get_link("west") is None and tx.outbox_live("east") != []


def test_attachments_take_the_lowest_free_slot_and_mark_the_network(store):
    n1 = dataclasses.replace(net("a", "n1", 1), uid="u1")
    with store.write() as tx:
        tx.put_network(n1)
        tx.networks_changed.clear()
        assert [tx.attach(u, "west") for u in ("u1", "u2", "u3")] == [0, 1, 2]
        assert tx.attach("u2", "west") == 1          # idempotent
        assert tx.attach("u1", "east") == 0
        assert tx.networks_changed == {n1.key}       # (u2, u3: no such network here)
    with store.write() as tx:
        tx.release_attachment("u1", "west")
        assert tx.networks_changed == {n1.key}
        assert tx.attach("u4", "west") == 0
    with store.read() as tx:
        assert tx.attachments_of("u1") == {"east": 0}
        assert tx.attachment("u4", "west") == 0 and tx.attachment("u1", "west") is None


def test_attachments_count_per_namespace_and_know_since_when_they_are_unused(store):
    a1, a2, b1 = net("a", "n1", 1), net("a", "n2", 2), net("b", "n1", 3)
    with store.write() as tx:
        for n in (a1, a2, b1):
            tx.put_network(n)
            tx.attach(n.uid, "west")
        tx.attach(a1.uid, "east")
        tx.put_peering(dataclasses.replace(half(a1, b1), remote_site="west"))
    with store.read() as tx:
        assert (tx.count_attachments("a", "west"), tx.count_attachments("a", "east"),
                tx.count_attachments("b", "west"), tx.count_attachments("c", "west")) == (2, 1, 1, 0)
        assert tx.attachment_use() == {"west": {"a": 2, "b": 1}, "east": {"a": 1}}
        # a1 has a half towards west: in use; the others have none, not noted yet.
        assert sorted(tx.idle_attachments()) == sorted([(a1.uid, "east", None), (a2.uid, "west", None),
                                                        (b1.uid, "west", None)])
    with store.write() as tx:
        tx.attachment_unused(a2.uid, "west", T0)
        tx.attachment_unused(a2.uid, "west", T0 + timedelta(hours=1))   # the first time stays
        tx.attachment_unused(b1.uid, "west", T0)
        assert tx.attach(b1.uid, "west") == 2                            # in use again, same slot
    with store.read() as tx:
        assert sorted(tx.idle_attachments()) == sorted([(a1.uid, "east", None), (a2.uid, "west", T0),
                                                        (b1.uid, "west", None)])


def test_a_released_slot_below_the_highest_is_the_next_taken_and_one_above_is_not_remembered(store):
    with store.write() as tx:
        assert [tx.attach(f"u{i}", "west") for i in range(6)] == [0, 1, 2, 3, 4, 5]
        tx.release_attachment("u3", "west")
        tx.release_attachment("u1", "west")
        assert [tx.attach("v1", "west"), tx.attach("v2", "west"), tx.attach("v3", "west")] == [1, 3, 6]
        tx.release_attachment("v3", "west")      # the highest: 6 is free again, from the top
        tx.release_attachment("u4", "west")
        tx.release_attachment("u5", "west")      # 4 and 5 free: the highest taken is 3
        assert tx.attach("v4", "west") == 4
    with store.write() as tx:
        for uid in tx.attached_to("west"):
            tx.release_attachment(uid, "west")
        assert tx.attached_to("west") == []
        assert tx.attach("w", "west") == 0 and tx.attach("w", "east") == 0


def test_a_first_attachment_reads_the_same_at_3000_networks_on_the_link_as_at_30(tmp_path):
    """Counted in SQLite's virtual machine steps, so the machine's speed
    does not matter: finding the lowest free slot does not read the link's
    other slots (it read every one of them: 4.4 ms at 10,000)."""
    from netpeer.store.sqlite import SqliteStore
    store = SqliteStore(tmp_path / "netpeer.db")
    steps = [0]

    def count():
        steps[0] += 1
        return 0

    cost = {}
    try:
        with store.write() as tx:
            for size in (30, 3000):
                for i in range(len(tx.attached_to("west")), size):
                    tx.attach(f"u{i}", "west")
                tx.release_attachment(f"u{size // 2}", "west")   # a free slot below the highest, too
                steps[0] = 0
                store._db.set_progress_handler(count, 1)
                tx.attach(f"x{size}", "west")
                tx.attach(f"y{size}", "west")
                store._db.set_progress_handler(None, 1)
                cost[size] = steps[0]
    finally:
        store.close()
    assert cost[3000] <= 1.5 * cost[30], cost


def test_revisions_count_per_namespace_and_survive_pruning(store):
    """A namespace's revisions count its own changes only, one after the
    other, whatever other namespaces do in between; pruning never takes a
    namespace's newest revision back."""
    with store.write() as tx:
        for i in range(5):
            tx.put_network(net("a", f"n{i}", i))
            tx.put_network(net("b", f"m{i}", 10 + i))
    with store.read() as tx:
        assert tx.revisions("a") == (1, 5) and tx.revisions("b") == (1, 5)
        assert [e.revision for e in tx.events_after("a", None, 0, 10)] == [1, 2, 3, 4, 5]
        assert [e.name for e in tx.events_after("b", None, 3, 10)] == ["m3", "m4"]
        assert tx.revisions("c") == (1, 0)                # nothing yet
        newest, changed = tx.namespaces_changed(0)
        assert changed == {"a", "b"} and tx.namespaces_changed(newest) == (newest, set())
    with store.write() as tx:
        assert tx.prune_events(T0 + timedelta(days=10_000), keep=4) == 6   # a4 b4 a5 b5 kept
    with store.read() as tx:
        assert tx.revisions("a") == (4, 5) and tx.revisions("b") == (4, 5)
    with store.write() as tx:
        assert tx.prune_events(T0 + timedelta(days=10_000), keep=0) == 4
    with store.read() as tx:
        assert tx.revisions("a") == (6, 5)                # none kept: the head stays where it was
        assert tx.namespaces_changed(0) == (newest, set())
    with store.write() as tx:
        tx.put_network(net("a", "later", 9))
    with store.read() as tx:
        assert [(e.revision, e.name) for e in tx.events_after("a", None, 5, 10)] == [(6, "later")]
        assert tx.revisions("a") == (6, 6) and tx.revisions("b") == (6, 5)
        assert tx.namespaces_changed(newest)[1] == {"a"}


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_store_of_the_previous_version_upgrades_and_stays_resumable(kind, tmp_path, request):
    """A store written before revisions were per namespace: its events keep
    the revisions clients saw (each namespace's still increase), so a watch
    resumed from one misses and repeats nothing; from the upgrade on, each
    namespace counts its own changes, all from the newest revision then."""
    from netpeer.store.sqlite import _network_values
    rows = [(i, ns, f"x{i}", json.dumps(list(_network_values(net(ns, f"x{i}", i)))))
            for i, ns in enumerate(["a", "b", "a", "b", "a", "b"], start=1)]
    if kind == "sqlite":
        where = tmp_path / "old.db"
        db = sqlite3.connect(where, isolation_level=None)
        run = db.execute
    else:
        import psycopg
        where = request.getfixturevalue("pg_url")
        db = psycopg.connect(where, autocommit=True)

        def run(sql, args=()):
            return db.execute(sql.replace("?", "%s"), args)
    for m in migrations.MIGRATIONS:
        if m.version <= 4:
            for statement in (m.sqlite if kind == "sqlite" else m.postgresql):
                run(statement)
    run("INSERT INTO meta VALUES ('schema_version', '4')")
    for i, ns, name, body in rows:
        run("INSERT INTO events (time, namespace, network, kind, name, type, body) VALUES (?,?,?,?,?,?,?)",
            (i, ns, name, "network", name, "Created", body))
    run("DELETE FROM events WHERE revision = 1")          # pruned before the upgrade
    db.close()

    store = open_store(where)
    try:
        assert migrations.LATEST in store.applied
        with store.read() as tx:
            assert [(e.revision, e.name) for e in tx.events_after("a", None, 0, 10)] == [(3, "x3"), (5, "x5")]
            assert tx.revisions("a") == (3, 6) and tx.revisions("b") == (2, 6) and tx.revisions("new") == (7, 6)
        with store.write() as tx:
            for i in range(3):
                tx.put_network(net("b", f"later{i}", 20 + i))
        with store.write() as tx:
            tx.put_network(net("a", "mine", 30))
        with store.read() as tx:
            assert tx.revisions("a") == (3, 7) and tx.revisions("b") == (2, 9)
            assert [e.revision for e in tx.events_after("a", None, 3, 10)] == [5, 7]   # resumed from a revision seen
            assert [e.name for e in tx.events_after("a", None, 6, 10)] == ["mine"]      # from a list's
            assert [e.revision for e in tx.events_after("b", None, 6, 10)] == [7, 8, 9]
    finally:
        store.close()


def test_tokens_and_the_decoy(store):
    token = Token("abc", "f" * 64, frozenset({"t"}), False, "d", T0, T0 + timedelta(days=1))
    with store.write() as tx:
        tx.put_token(token)
        assert tx.get_token("abc") == token
        assert tx.get_token("nope") is None        # read through the decoy row: same work
        assert [t.token_id for t in tx.list_tokens()] == ["abc"] and tx.count_tokens() == 1
        assert tx.delete_token("abc") and not tx.delete_token("abc")


def test_identity_and_generation(store):
    first = store.store_id
    with store.write() as tx:
        assert tx.generation() == 0
        tx.set_generation(5)
    with store.read() as tx:
        assert tx.generation() == 5
    assert len(first) == 32 and store.store_id == first


def _set_version(store, version: int) -> None:
    with store.write() as tx:
        if hasattr(tx, "execute"):
            tx.execute("UPDATE meta SET value=%s WHERE key='schema_version'", (str(version),))
        else:
            tx._db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))


def test_a_newer_schema_is_refused_in_one_line(store):
    where = store.url if hasattr(store, "url") else store.path
    _set_version(store, migrations.LATEST + 1)
    with pytest.raises(errors.FailedPrecondition) as err:
        open_store(where)
    assert "\n" not in err.value.message and f"schema version {migrations.LATEST + 1}" in err.value.message
    _set_version(store, migrations.LATEST)


# ---------------------------------------------------------------- read connections
def open_connections(store, at_most: int | None = None) -> int:
    """The store's connections as seen from outside it, its writer's
    included: descriptors of its SQLite WAL file open in this process (each
    connection has its own; SQLite keeps a closed one's descriptor of the
    main file for the next to open it while others hold locks on it), or its
    database's sessions in PostgreSQL (a session closed a moment ago may
    still be ending: waits up to 5 s for ``at_most``)."""
    if not hasattr(store, "url"):
        fds = []
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                fds.append(os.readlink(f"/proc/self/fd/{fd}"))
        return fds.count(str(store.path) + "-wal")
    import psycopg
    deadline = time.monotonic() + 5
    with psycopg.connect(store.url, autocommit=True) as db:
        while True:
            count = db.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                               "AND pid <> pg_backend_pid()").fetchone()[0]
            if at_most is None or count <= at_most or time.monotonic() > deadline:
                return count
            time.sleep(0.05)


@pytest.fixture(params=["sqlite", "postgresql"])
def pooled(request, tmp_path):
    """A store with at most 3 read connections, 1 of them kept when idle for 0.3 s."""
    cluster = request.getfixturevalue("pg_cluster") if request.param == "postgresql" else None
    s = make_store(request.param, tmp_path, cluster, readers=3, idle_readers=1, reader_idle_s=0.3)
    yield s
    s.close()


def read_in_threads(store, threads: int, hold: float = 0.0, at_once: int | None = None) -> list[str]:
    """``threads`` short-lived threads, each reading once (holding the read
    ``hold`` s), ``at_once`` of them at a time (default: all); what each got."""
    outcomes: list[str] = []

    def read():
        try:
            with store.read() as tx:
                tx.revisions("a")
                time.sleep(hold)
            outcomes.append("ok")
        except errors.NetpeerError as exc:
            outcomes.append(exc.message)

    at_once = at_once or threads
    for first in range(0, threads, at_once):
        batch = [threading.Thread(target=read) for _ in range(first, min(threads, first + at_once))]
        for t in batch:
            t.start()
        for t in batch:
            t.join()
    return outcomes


def test_threads_that_read_and_end_leave_no_connection_behind(store):
    """netpeerd serves some requests on threads that come and go (one per
    metrics scrape): what they read through stays open only while reads
    run, at most as many as ran at once."""
    before = open_connections(store)
    assert read_in_threads(store, 200, at_once=10) == ["ok"] * 200
    assert open_connections(store, at_most=before + 10) <= before + 10


def test_reads_beyond_the_maximum_wait_for_a_connection_and_never_open_more(pooled):
    writer = 1                          # the write connection; readers come on top
    peak = [0]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], open_connections(pooled))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        outcomes = read_in_threads(pooled, 12, hold=0.1)
    finally:
        done.set()
        watcher.join()
    assert outcomes == ["ok"] * 12
    assert writer < peak[0] <= writer + 3, (writer, peak)
    # Busy beyond the wait: one line, and the waiting read changed nothing.
    pooled.readers.wait = 0.2
    holding = threading.Semaphore(0)
    release = threading.Event()

    def hold():
        with pooled.read():
            holding.release()
            release.wait(10)

    holders = [threading.Thread(target=hold) for _ in range(3)]
    for t in holders:
        t.start()
    try:
        assert all(holding.acquire(timeout=30) for _ in holders)   # every connection is held
        with pytest.raises(errors.Unavailable) as err:
            with pooled.read():
                pass
        assert "\n" not in err.value.message and "all 3 read connections stayed busy for 0.2s" in err.value.message
    finally:
        release.set()
        for t in holders:
            t.join()
    assert open_connections(pooled, at_most=writer + 3) <= writer + 3


def test_idle_connections_beyond_the_minimum_are_closed(pooled):
    writer = 1                          # the write connection; readers come on top
    assert read_in_threads(pooled, 3, hold=0.1) == ["ok"] * 3
    assert open_connections(pooled) == writer + 3
    time.sleep(0.5)
    with pooled.read() as tx:          # the pool looks at its idle connections when used
        tx.revisions("a")
    assert open_connections(pooled, at_most=writer + 1) == writer + 1


def test_closing_the_store_closes_a_busy_reader_when_its_thread_is_done(pooled):
    inside, closed = threading.Event(), threading.Event()
    seen: list[object] = []

    def read():
        with pooled.read() as tx:
            seen.append(tx.revisions("a"))
            inside.set()
            closed.wait(10)
            seen.append(tx.revisions("a"))     # still usable: closing did not pull it away

    t = threading.Thread(target=read)
    t.start()
    assert inside.wait(10)
    pooled.close()
    assert open_connections(pooled, at_most=1) == 1     # the busy reader, not the writer
    closed.set()
    t.join()
    assert len(seen) == 2 and seen[0] == seen[1]
    assert open_connections(pooled, at_most=0) == 0
    with pytest.raises(errors.Unavailable, match="is closed"):
        with pooled.read():
            pass


def test_a_broken_postgresql_connection_is_dropped_not_given_back(pg_cluster, tmp_path):
    import psycopg
    store = make_store("postgresql", tmp_path, pg_cluster, readers=3, idle_readers=3)
    try:
        assert read_in_threads(store, 3, hold=0.1) == ["ok"] * 3
        assert open_connections(store) == 4

        def terminate_all():
            with psycopg.connect(store.url, autocommit=True) as db:
                db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            assert open_connections(store, at_most=0) == 0

        terminate_all()                     # PostgreSQL restarted, as far as the store can tell
        with store.read() as tx:            # the broken ones are dropped: this one is new
            assert tx.revisions("a")
        assert open_connections(store) == 1 and store.readers.open == 1
        # Broken while in use: the read fails in one line and its connection is not kept.
        with pytest.raises(errors.Unavailable) as err:
            with store.read() as tx:
                terminate_all()
                tx.revisions("a")
        assert "\n" not in err.value.message
        assert store.readers.open == 0
        with store.read() as tx:
            assert tx.revisions("a")
    finally:
        store.close()


def test_a_store_from_before_free_slots_were_kept_gets_the_gaps_of_its_links(store):
    where = store.url if hasattr(store, "url") else store.path
    with store.write() as tx:
        for i in range(6):
            tx.attach(f"u{i}", "west")
        tx.attach("e0", "east")
        run = tx.execute if hasattr(tx, "execute") else tx._db.execute
        mark = "%s" if hasattr(tx, "execute") else "?"
        run(f"DELETE FROM attachments WHERE network_uid IN ({mark}, {mark})", ("u1", "u3"))   # gaps, unrecorded
        run("DROP TABLE attachment_free")
    _set_version(store, 7)
    again = open_store(where)
    try:
        with again.write() as tx:
            assert [tx.attach(u, "west") for u in ("v1", "v2", "v3")] == [1, 3, 6]
            assert tx.attach("e1", "east") == 1
    finally:
        again.close()


# ---------------------------------------------------------------- replicas (PostgreSQL)
def test_two_processes_writes_serialize_and_revisions_follow_commit_order(pg_url):
    one, two = open_store(pg_url), open_store(pg_url)
    try:
        assert one.store_id == two.store_id
        inside = threading.Event()
        order: list[str] = []
        locked_at: list[float] = []

        def slow():
            with one.write() as tx:
                locked_at.append(time.monotonic())
                inside.set()
                tx.put_network(net("a", "first", 1))
                time.sleep(0.5)          # as if waiting for OVN, holding the write lock
                order.append("first")

        t = threading.Thread(target=slow)
        t.start()
        inside.wait(5)
        with two.write() as tx:        # waits for the other store's commit, then sees it
            assert tx.get_network(NetworkKey("a", "first")) is not None
            tx.put_network(net("a", "second", 2))
            order.append("second")
        # From when the first write took the lock, which it held for 0.5 s: a late wake-up here cannot shorten it.
        waited = time.monotonic() - locked_at[0]
        t.join()
        assert order == ["first", "second"] and waited >= 0.5
        with two.read() as tx:
            assert [e.name for e in tx.events_after("a", None, 0, 10)] == ["first", "second"]
    finally:
        one.close()
        two.close()


def test_a_write_lock_held_too_long_answers_unavailable(pg_url):
    one, two = open_store(pg_url), open_store(pg_url, lock_timeout=0.3)
    try:
        with one.write():
            with pytest.raises(errors.Unavailable, match="write lock"):
                with two.write() as tx:
                    tx.put_network(net("a", "never", 1))
        with two.read() as tx:
            assert tx.list_networks(None) == []
    finally:
        one.close()
        two.close()


def test_another_owner_is_refused_and_nothing_changes(pg_url):
    one, two = open_store(pg_url), open_store(pg_url)
    try:
        one.claim_owner("netpeer")
        one.claim_owner("netpeer")
        with pytest.raises(errors.FailedPrecondition) as err:
            two.claim_owner("other")
        assert "\n" not in err.value.message and "'other'" in err.value.message and "'netpeer'" in err.value.message
        with two.read() as tx:
            assert tx.meta("owner") == "netpeer"
    finally:
        one.close()
        two.close()


def test_bad_urls_are_one_line(pg_cluster):
    with pytest.raises(errors.Unavailable) as err:
        open_store(pg_cluster.url("netpeer").replace(str(pg_cluster.socket_dir), "/nonexistent"), connect_timeout=1)
    assert "\n" not in err.value.message and "cannot connect" in err.value.message
    with pytest.raises(errors.Unavailable, match="does not exist"):
        open_store(pg_cluster.url("no_such_database"))


def test_reading_the_revisions_costs_the_same_with_many_events_kept(tmp_path):
    """Every list, every sweep's pruning and every new Watch read a
    namespace's oldest and newest revision: that must not scan the events
    kept (of that namespace or of others). Counted in SQLite's virtual
    machine steps, not in time."""
    from netpeer.store.sqlite import SqliteStore
    store = SqliteStore(tmp_path / "s.db")

    def steps_after(events: int) -> int:
        with store.write() as tx:
            for ns in ("ns", "other"):
                start = tx.revisions(ns)[1]
                tx._q("INSERT INTO events (time, namespace, network, kind, name, type, body, ns_revision) "
                      "SELECT 0, ?, 'net', 'network', 'n', 'Created', '{}', ? + i FROM (WITH RECURSIVE c(i) AS "
                      "(SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) SELECT i FROM c)", (ns, start, events))
                tx._q("INSERT OR REPLACE INTO namespace_revisions VALUES (?, ?)", (ns, start + events))
        counted = [0]
        with store.read() as tx:
            tx._db.set_progress_handler(lambda: counted.__setitem__(0, counted[0] + 1), 10)
            try:
                first, last = tx.revisions("ns")
            finally:
                tx._db.set_progress_handler(None, 0)
        assert last - first + 1 >= events
        return counted[0]

    few, many = steps_after(10), steps_after(50_000)
    assert many <= few + 2, f"reading the revisions took {many} x 10 steps with 50,010 events, {few} x 10 with 10"
    store.close()
