"""A sync planned from plain data (``netpeer.ovn.plan``) against netpeer's
python-ovs backend, on a real ovsdb-server.

The oracle is ``OvnBackend``, which netpeerd programs OVN with today: after
a plan's transaction it must find nothing to change (its own sync changes
no row, its drift check finds no network), and after its own sync the plan
must find nothing to do. Both ways, through binds, unbinds, a network going,
hand edits (a column changed, a child detached, a child's id removed, a
stray child of ours) and the stamp.
"""

from __future__ import annotations

import uuid

import pytest

from netpeer.core.dataplane import NetworkState, Stamp
from netpeer.core.models import Network
from netpeer.ovn import names, rows
from netpeer.ovn.backend import OvnBackend
from netpeer.ovn.plan import ForeignRowConflict, plan_sync
from tests.functional.nbfeed import Feed

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
    backend.nb_cfg()   # a command through the backend's connection: its replica is as new as the reply


def agree(ovn, backend: OvnBackend, feed: Feed, desired) -> None:
    """The backend finds the plan's result exactly what it would write."""
    settle(ovn, backend, feed)
    assert backend.drifted(desired) == set()
    assert backend.sync(desired).changed == 0


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

    # The other way: the backend writes, the plan has nothing to do.
    again = states(nets, [(0, 1), (1, 2), (2, 3)])
    assert backend.sync(again).changed > 0
    settle(ovn, backend, feed)
    assert plan_sync(feed.replica, OWNER, desired_rows(again)).ops == ()


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
