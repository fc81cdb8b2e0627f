"""A sync planned from plain data (``netpeer.ovn.plan``), checked on a real
ovsdb-server against an independent reader of the NB: ``ovn-nbctl``.

After each plan's transaction, every table is listed with ``ovn-nbctl`` and
compared with the desired rows themselves (``netpeer.ovn.rows``): each
network's rows of ours are exactly its desired rows, by ``netpeer:id``, with
the desired columns and tags, each child under its desired parent; and a
plan made on the result has nothing to do. Through binds, unbinds, a network
going, hand edits (a column changed, a child detached, a child's id removed,
a stray child of ours) and the stamp; the backend netpeerd runs writes and
reads the same database alongside.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from netpeer.core.dataplane import NetworkState, RemotePeer, Stamp
from netpeer.core.models import Network
from netpeer.ovn import ic_rows, names, rows
from netpeer.ovn.backend import OvnBackend
from netpeer.ovn.ic_rows import Keys
from netpeer.ovn.plan import ForeignRowConflict, drifted, plan_sync
from netpeer.ovn.plan import waiting as plan_waiting
from netpeer.ovn.row import Parent, Row
from tests.functional.nbfeed import Feed
from tests.support import wait_until

OWNER = "netpeer"


def network(i: int) -> Network:
    return Network(f"team-{i}", f"net-{i}", str(uuid.UUID(int=i + 1)), (f"10.{i}.0.0/24",))


def states(nets: dict[int, Network], pairs: list[tuple[int, int]]) -> dict[str, NetworkState]:
    peers: dict[int, list[Network]] = {i: [] for i in nets}
    for i, j in pairs:
        peers[i].append(nets[j])
        peers[j].append(nets[i])
    return {n.uid: NetworkState(n, tuple(sorted(peers[i], key=lambda p: p.key)),
                                tuple(sorted((p.uid, f"to-{p.name}") for p in peers[i])))
            for i, n in nets.items()}


def desired_rows(desired: dict[str, NetworkState | None]) -> dict[str, list | None]:
    return {uid: rows.desired_rows(OWNER, s) if s is not None else None for uid, s in desired.items()}


@pytest.fixture
def nb(ovn):
    backend = OvnBackend(ovn.nb_remote, owner=OWNER, timeout=30)
    feed = Feed(ovn.nb_remote)
    try:
        assert backend.wait_connected(30)
        feed.start(named=rows.ROOT_TABLES + ("HA_Chassis_Group",))
        yield ovn, backend, feed
    finally:
        feed.close()
        backend.close()


def apply(feed: Feed, desired, stamp: Stamp | None = None):
    marker = rows.state_row(OWNER, stamp.store_id, stamp.generation) if stamp else None
    plan = plan_sync(feed.replica, OWNER, desired_rows(desired), marker)
    if plan.ops:
        feed.transact(list(plan.ops))
    return plan


def settle(ovn, backend: OvnBackend, feed: Feed) -> None:
    """Both replicas have seen everything written so far."""
    cfg = str(int(ovn.nbctl("get", "NB_Global", ".", "nb_cfg").strip()) + 1)
    ovn.nbctl("set", "NB_Global", ".", f"nb_cfg={cfg}")
    feed.catch_up(cfg)
    wait_until(lambda: backend.nb_cfg()[0] == int(cfg), 30, "the backend's replica did not catch up", step=0.05)


def _plain(value):
    """An ``ovn-nbctl --data=json`` value as plain data: sets as sorted strings, maps as dicts."""
    if isinstance(value, list) and value and value[0] == "map":
        return {str(k): str(v) for k, v in value[1]}
    if isinstance(value, list) and value and value[0] == "set":
        return sorted(str(_plain(v)) for v in value[1])
    if isinstance(value, list) and value and value[0] in ("uuid", "named-uuid"):
        return value[1]
    return value


def nb_tables(ovn) -> dict[str, dict[str, dict]]:
    """Every table netpeer writes, as ovn-nbctl lists it: table -> uuid -> column -> value."""
    out = {}
    for table in ("Logical_Router", "Logical_Router_Port", "Logical_Router_Static_Route", "Logical_Router_Policy",
                  "Logical_Switch", "Logical_Switch_Port", "Address_Set"):
        listed = json.loads(ovn.nbctl("--format=json", "--data=json", "list", table))
        heads = listed["headings"]
        out[table] = {}
        for data in listed["data"]:
            row = {h: _plain(v) for h, v in zip(heads, data)}
            out[table][row["_uuid"]] = row
    return out


def _as_listed(value):
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return sorted(str(v) for v in value)
    return value


def _refs(value) -> list:
    """A column of references as a list (one is listed bare)."""
    return [value] if isinstance(value, str) else list(value)


def mismatches(ovn, desired) -> list[str]:
    """How the NB, as ovn-nbctl lists it, differs from the desired rows (empty: it does not)."""
    tables = nb_tables(ovn)
    # Children count where one of our rows holds them (a hand edit may also hang one elsewhere).
    ours = {u for table in rows.ROOT_TABLES for u, r in tables[table].items()
            if r["external_ids"].get(names.OWNER) == OWNER}
    held_by_ours = {c for table, column in rows.CHILD_COLUMNS for u, r in tables[table].items() if u in ours
                    for c in _refs(r[column])}
    found = []
    for uid, wanted in desired_rows(desired).items():
        held = {(table, row["external_ids"].get(names.ID)): (uuid, row) for table, rows_ in tables.items()
                for uuid, row in rows_.items() if row["external_ids"].get(names.OWNER) == OWNER
                and row["external_ids"].get(names.NETWORK) == uid and (uuid in ours or uuid in held_by_ours)}
        want = {(w.table, w.ident): w for w in wanted or []}
        found += [f"{uid}: {key} is extra" for key in held.keys() - want.keys()]
        found += [f"{uid}: {key} is missing" for key in want.keys() - held.keys()]
        for key in want.keys() & held.keys():
            w, (uuid, row) = want[key], held[key]
            for column, value in w.columns.items():
                have = row[column]
                if isinstance(value, (list, tuple)) and not isinstance(have, list):
                    have = [have]   # a one-atom set, listed bare
                if _as_listed(have) != _as_listed(value):
                    found.append(f"{uid}: {key} {column} is {have!r}, not {value!r}")
            if row["external_ids"] != dict(w.external_ids):
                found.append(f"{uid}: {key} tags are {row['external_ids']!r}")
            if w.parent is not None:
                parents = [p for p in tables[w.parent.table].values() if p["name"] == w.parent.name]
                if len(parents) != 1 or uuid not in _refs(parents[0][w.parent.column]):
                    found.append(f"{uid}: {key} is not in {w.parent.table} {w.parent.name} {w.parent.column}")
    return found


def agree(ovn, backend: OvnBackend, feed: Feed, desired) -> None:
    """The NB holds exactly the desired rows, and a plan on it has nothing to do."""
    settle(ovn, backend, feed)
    assert mismatches(ovn, desired) == []
    assert plan_sync(feed.replica, OWNER, desired_rows(desired)).ops == ()
    assert backend.drifted(desired) == set()


def test_plans_and_the_backend_agree_both_ways(nb):
    ovn, backend, feed = nb
    nets = {i: network(i) for i in range(4)}
    desired = states(nets, [(0, 1), (0, 2), (1, 3)])

    first = apply(feed, desired, Stamp("store-1", 1))
    assert first.report.created > 20 and first.report.updated == first.report.deleted == 0
    agree(ovn, backend, feed, desired)
    assert backend.read_stamp() == Stamp("store-1", 1)
    assert plan_sync(feed.replica, OWNER, desired_rows(desired)).ops == ()   # idempotent

    # An unbind, a new bind, a network going: planned on what the plan wrote.
    later = states(nets, [(0, 2), (2, 3)])
    later[nets[1].uid] = None
    second = apply(feed, later, Stamp("store-1", 2))
    assert second.report.deleted > 0 and second.report.created > 0
    agree(ovn, backend, feed, later)
    assert backend.read_stamp() == Stamp("store-1", 2)

    # netpeerd's backend writes through its own connection; the plan on the test's agrees.
    again = states(nets, [(0, 1), (1, 2), (2, 3)])
    assert backend.sync(again).changed > 0
    agree(ovn, backend, feed, again)


def test_hand_edits_are_repaired_as_the_backend_repairs_them(nb):
    ovn, backend, feed = nb
    nets = {i: network(i) for i in range(3)}
    desired = states(nets, [(0, 1), (1, 2)])
    apply(feed, desired)
    settle(ovn, backend, feed)
    lr0, lr1 = names.router(nets[0].uid), names.router(nets[1].uid)
    port = next(r["name"] for r in feed.replica.tables["Logical_Router_Port"].values()
                if r["external_ids"].get(names.KIND) == "peer-port"
                and r["external_ids"].get(names.NETWORK) == nets[0].uid)
    ovn.nbctl("set", "Logical_Router_Port", port, "mac=\"0a:00:00:00:00:99\"")            # a column changed
    routes = [u for u, r in feed.replica.tables["Logical_Router_Static_Route"].items()
              if r["external_ids"].get(names.NETWORK) == nets[1].uid]
    assert len(routes) == 2
    for route in routes:   # their ids removed
        ovn.nbctl("remove", "Logical_Router_Static_Route", route, "external_ids", f'"{names.ID}"')
    policy = next(u for u, r in feed.replica.tables["Logical_Router_Policy"].items()
                  if r["external_ids"].get(names.NETWORK) == nets[1].uid)
    ovn.nbctl("remove", "Logical_Router", lr1, "policies", policy)                        # detached (and gone)
    ovn.nbctl("--", "--id=@p", "create", "Logical_Router_Policy", "priority=5", "match=\"1\"", "action=allow",
              f'external_ids:"{names.OWNER}"={OWNER}', f'external_ids:"{names.KIND}"=policy',
              f'external_ids:"{names.NETWORK}"={nets[0].uid}', f'external_ids:"{names.ID}"="policy/extra"',
              "--", "add", "Logical_Router", lr0, "policies", "@p")                       # a stray of ours
    settle(ovn, backend, feed)
    plan = apply(feed, desired)
    assert plan.report.updated >= 1 and plan.report.created >= 2 and plan.report.deleted >= 2
    agree(ovn, backend, feed, desired)


def test_a_foreign_row_on_our_name_stops_its_network(nb):
    ovn, backend, feed = nb
    net = network(7)
    ovn.nbctl("lr-add", names.router(net.uid))   # someone else's router on our name
    settle(ovn, backend, feed)
    with pytest.raises(ForeignRowConflict, match=f"Logical_Router {names.router(net.uid)} exists but is not owned"):
        plan_sync(feed.replica, OWNER, desired_rows(states({7: net}, [])))


def test_a_child_hung_elsewhere_by_hand_is_only_taken_out_of_ours(nb):
    """A child goes by leaving its parent (OVSDB collects it when nothing
    refers to it): a route of ours that a hand edit also hung under someone
    else's router stays there, and the unbind still commits."""
    ovn, backend, feed = nb
    nets = {i: network(i) for i in range(2)}
    apply(feed, states(nets, [(0, 1)]))
    settle(ovn, backend, feed)
    route = next(u for u, r in feed.replica.tables["Logical_Router_Static_Route"].items()
                 if r["external_ids"].get(names.NETWORK) == nets[0].uid)
    ovn.nbctl("lr-add", "their-router", "--", "add", "Logical_Router", "their-router", "static_routes", route)
    settle(ovn, backend, feed)
    unbound = states(nets, [])
    plan = apply(feed, unbound)
    assert plan.report.deleted > 0
    agree(ovn, backend, feed, unbound)
    assert route in ovn.nbctl("--bare", "--columns=static_routes", "list", "Logical_Router", "their-router")


def test_a_tracked_plan_bumps_nb_cfg_only_when_it_changes_something(nb):
    ovn, backend, feed = nb
    desired = desired_rows(states({0: network(0)}, []))
    plan = plan_sync(feed.replica, OWNER, desired, track=True)
    assert plan.cfg_op is not None and plan.ops[-2]["mutations"] == [["nb_cfg", "+=", 1]]
    before = int(ovn.nbctl("get", "NB_Global", ".", "nb_cfg").strip())
    result = feed.transact(list(plan.ops))
    assert result[plan.cfg_op]["rows"][0]["nb_cfg"] == before + 1
    settle(ovn, backend, feed)
    again = plan_sync(feed.replica, OWNER, desired, track=True)
    assert again.ops == () and again.cfg_op is None


def test_pairs_another_daemon_adds_to_a_shared_map_are_kept(nb):
    """ovn-ic adds ``options:requested-tnl-key`` to our ports on a transit
    switch; a sync compares and writes our pairs only (``Keys``), so it never
    takes ovn-ic's away, and puts ours back when they drift."""
    ovn, backend, feed = nb
    ovn.nbctl("ls-add", "np-ts-a-b")   # the transit switch (ovn-ic makes it in a real site)
    settle(ovn, backend, feed)
    net = network(9)
    tags = {names.OWNER: OWNER, names.KIND: "transit-port", names.NETWORK: net.uid, names.ID: "ts-lsp/x"}
    want = Row("Logical_Switch_Port", "ts-lsp/x", "transit-port",
               {"name": "np-tsp-x", "type": "router", "addresses": ["router"],
                "options": Keys({"router-port": "np-tsr-x"})},
               tags, Parent("Logical_Switch", "np-ts-a-b", "ports"))
    desired = {net.uid: [want]}
    feed.transact(list(plan_sync(feed.replica, OWNER, desired).ops))
    ovn.nbctl("set", "Logical_Switch_Port", "np-tsp-x", "options:requested-tnl-key=7")
    settle(ovn, backend, feed)
    assert plan_sync(feed.replica, OWNER, desired).ops == ()
    ovn.nbctl("set", "Logical_Switch_Port", "np-tsp-x", "options:router-port=wrong")
    settle(ovn, backend, feed)
    repair = plan_sync(feed.replica, OWNER, desired)
    assert repair.report.updated == 1
    feed.transact(list(repair.ops))
    settle(ovn, backend, feed)
    options = ovn.nbctl("get", "Logical_Switch_Port", "np-tsp-x", "options").strip()
    assert options == '{requested-tnl-key="7", router-port=np-tsr-x}', options
    assert plan_sync(feed.replica, OWNER, desired).ops == ()


def test_a_plan_from_a_replica_that_lags_another_writer_is_made_again(nb):
    """Two netpeerd replicas on one NB write one after the other, each
    planning from its own copy of the NB. Here B's copy has not yet heard of
    A's bind when B writes the unbind: planned from that copy, the unbind
    deletes nothing and would still commit, leaving the pair's rows behind.
    The plan waits on the state marker, so B's transaction fails until its
    copy has caught up, and is then made again: the rows go."""
    ovn, a, feed = nb
    b = OvnBackend(ovn.nb_remote, owner=OWNER, timeout=30)
    try:
        assert b.wait_connected(30)
        nets = {i: network(i) for i in range(2)}
        a.sync(states(nets, []), Stamp("store-1", 1))
        wait_until(lambda: b.read_stamp() == Stamp("store-1", 1), 30, "B's replica did not catch up")
        replica, held = b._conn.replica, []
        replica.apply = held.append   # B's copy stops here: updates wait
        try:
            bound = a.sync(states(nets, [(0, 1)]), Stamp("store-1", 2))
            assert bound.created > 0
            done: list = []
            writer = threading.Thread(target=lambda: done.append(b.sync(states(nets, []), Stamp("store-1", 3))))
            writer.start()
            writer.join(1.0)
            assert not done, f"B wrote from a copy that had not seen A's bind: {done}"
            assert held, "A's bind never reached B's connection"
        finally:
            with b._conn.lock:
                del replica.apply
                for update in held:
                    replica.apply(update)
        writer.join(30)
        assert done and done[0].deleted == bound.created, (done, bound)
        agree(ovn, a, feed, states(nets, []))
        assert a.read_stamp() == Stamp("store-1", 3)
    finally:
        b.close()


def test_a_transit_router_port_waits_for_the_switch_ports_key_across_sites(nb):
    """A network's first attachment to a link: its switch port on the transit
    switch goes in alone; the router port, the drop-in policy and the Bound
    pair's routes and policies wait until ovn-ic has written the port's key
    across sites (``requested-tnl-key``), then go in as rows that waited, not
    as drift, and the change tracker says so the moment the key lands. Once
    the router port is there, a key that goes takes nothing away."""
    ovn, backend, feed = nb
    here = ic_rows.SiteContext("east", "np-gw-east")
    ovn.nbctl("ls-add", names.transit_switch("east", "west"))   # the operator's (ovn-ic's) rows
    ovn.nbctl("ha-chassis-group-add", "np-gw-east")
    keyed = []
    backend.changes.on_keyed = lambda: keyed.append(time.monotonic())
    settle(ovn, backend, feed)
    net = network(3)
    remote = RemotePeer(Network("team-w", "net-w", str(uuid.UUID(int=99)), ("10.99.0.0/24",), site="west"), 0)
    state = NetworkState(net, attachments=(("west", 0),), remote_peers=(remote,))
    desired = {net.uid: rows.desired_rows(OWNER, state, here)}
    att = ic_rows.Attachment("east", "west", net.uid, 0, ic_rows.DEFAULT_TRANSIT_IPV4)
    waiting = {w.ident for w in desired[net.uid] if w.after is not None}
    assert {f"ts-lrp/{net.uid}/west", f"policy/{net.uid}/west/drop-in"} <= waiting
    assert any(i.startswith(f"route/{net.uid}/west/") for i in waiting)

    first = plan_sync(feed.replica, OWNER, desired)
    feed.transact(list(first.ops))
    settle(ovn, backend, feed)
    lrps = ovn.nbctl("--bare", "--columns=name", "list", "Logical_Router_Port").split()
    assert att.router_port not in lrps and att.switch_port in ovn.nbctl("lsp-list", att.transit_switch)
    assert ovn.nbctl("--bare", "--columns=_uuid", "list", "Logical_Router_Static_Route").strip() == ""
    assert first.report.released == 0 and first.report.waiting == {(net.uid, "west")}
    assert plan_waiting(feed.replica, OWNER, desired) == {(net.uid, "west")}
    assert plan_sync(feed.replica, OWNER, desired).ops == ()
    assert drifted(feed.replica, OWNER, desired) == set() and keyed == []

    ovn.nbctl("set", "Logical_Switch_Port", att.switch_port, "options:requested-tnl-key=2")   # as ovn-ic does
    settle(ovn, backend, feed)
    assert len(keyed) == 1
    assert drifted(feed.replica, OWNER, desired) == {net.uid}
    second = plan_sync(feed.replica, OWNER, desired)
    assert second.report.created == second.report.released == len(waiting) and second.report.waiting == set()
    assert plan_waiting(feed.replica, OWNER, desired) == set()
    feed.transact(list(second.ops))
    settle(ovn, backend, feed)
    assert att.router_port in ovn.nbctl("--bare", "--columns=name", "list", "Logical_Router_Port").split()
    assert ovn.nbctl("--bare", "--columns=output_port", "list", "Logical_Router_Static_Route").split() == \
        [att.router_port]
    assert plan_sync(feed.replica, OWNER, desired).ops == ()

    ovn.nbctl("remove", "Logical_Switch_Port", att.switch_port, "options", "requested-tnl-key")
    settle(ovn, backend, feed)
    assert plan_sync(feed.replica, OWNER, desired).ops == () and drifted(feed.replica, OWNER, desired) == set()
