"""Leader loss: the sweeps (repair, TTL expiry) run on one replica and move
to the other when it dies.

Two real netpeerd processes on one PostgreSQL database and an NB Raft
cluster, ``sweep_interval`` 1 s, ``leader_lease`` 2 s. The sweeping replica
is killed (SIGKILL); meanwhile a route of a Bound pair is deleted by hand in
OVN and a Pending peering's TTL runs out. The other replica must restore the
route within the sweep interval plus the lease (plus a second of slack),
report itself as leader, and the expired peering must be collected exactly
once (one Deleted event, one "expired" line in the two logs together).
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from datetime import timedelta

from netpeer.api.client import Client
from netpeer.core.dataplane import NetworkState, Stamp
from netpeer.core.models import Network, utcnow
from netpeer.ovn import names
from netpeer.ovn.backend import OvnBackend
from netpeer.service import Service
from netpeer.store.postgres import PostgresStore
from tests.faults.harness import actual_ids, diff_ovn, expected_ids, publish
from tests.support import ADMIN_TOKEN, wait_until

SWEEP, LEASE = 1.0, 2.0


def leaders(daemons) -> list[int]:
    out = []
    for i, d in enumerate(daemons):
        if d.pid is None:
            continue
        with Client(d.endpoint, ADMIN_TOKEN, timeout=5) as c:
            if c.status()["leading"]:
                out.append(i)
    return out


def wait_for(what: str, condition, timeout: float, step: float = 0.02) -> float:
    """``wait_until``, and how long it took (s)."""
    start = time.monotonic()
    wait_until(condition, timeout, what, step=step)
    return time.monotonic() - start


def in_sync(store: PostgresStore, checker: OvnBackend) -> bool:
    """OVN holds exactly the rows the store explains."""
    with store.read() as tx:
        return not diff_ovn(expected_ids(tx), actual_ids(checker))


def land_dead_write(checker: OvnBackend, name: str, prefix: str) -> None:
    """What a write that died after its OVN transaction leaves: the rows of
    a network the store never got, with the stamp that write would have set."""
    stamp = checker.read_stamp()
    net = Network("a", name, str(uuid.uuid4()), (prefix,), (), "", utcnow(), utcnow(), 1)
    checker.sync({net.uid: NetworkState(net, (), ())}, Stamp(stamp.store_id, stamp.generation + 1))


@contextlib.contextmanager
def two_replicas(replicas, nb3, **config):
    """Two replicas started (periodic sweeps 30 s apart) holding one network,
    with the shared store and an OVN reader of the test's own: (replicas, the
    leader's index, store, reader)."""
    daemons = replicas(2, nb3.nb_remote, sweep_interval="30s", leader_lease=timedelta(seconds=LEASE), **config)
    for d in daemons:
        d.start()
    wait_for("one leader", lambda: len(leaders(daemons)) == 1, 10)
    leader = leaders(daemons)[0]
    store = PostgresStore(daemons[0].config.store)
    checker = OvnBackend(nb3.nb_remote)
    try:
        assert checker.wait_connected(30)
        with Client(daemons[leader].endpoint, ADMIN_TOKEN) as admin:
            admin.create_network("a", "kept", ["10.1.0.0/24"])
        yield daemons, leader, store, checker
    finally:
        checker.close()
        store.close()


def assert_nothing_to_repair(store: PostgresStore, checker: OvnBackend) -> None:
    report = Service(store, checker).repair()
    assert (report.repaired_rows, report.errors) == (0, 0), report


def test_the_sweeps_move_to_the_survivor(replicas, nb3, request):
    daemons = replicas(2, nb3.nb_remote, sweep_interval="1s", leader_lease=timedelta(seconds=LEASE))
    for d in daemons:
        d.start()
    wait_for("one leader", lambda: len(leaders(daemons)) == 1, 10)
    assert len(leaders(daemons)) == 1, "two replicas sweep at once"
    both = ",".join(d.endpoint for d in daemons)
    store = PostgresStore(daemons[0].config.store)
    checker = OvnBackend(nb3.nb_remote)
    assert checker.wait_connected(30)
    try:
        with Client(both, ADMIN_TOKEN) as admin:
            a = admin.create_network("a", "net-a", ["10.1.0.0/24"])
            b = admin.create_network("b", "net-b", ["10.2.0.0/24"])
            admin.create_peering("a", "net-a", "to-b", "net-b", "b")
            assert admin.create_peering("b", "net-b", "to-a", "net-a", "a")["phase"] == "Bound"
            admin.create_network("c", "net-c", ["10.3.0.0/24"])
            admin.create_peering("c", "net-c", "short", "nowhere", "x", ttl=timedelta(seconds=4))
        leader = leaders(daemons)[0]
        survivor = daemons[1 - leader]

        synced = functools.partial(in_sync, store, checker)
        wait_for("OVN matches the store", synced, 10)
        daemons[leader].kill9()
        killed = time.monotonic()
        nb3.nbctl("lr-route-del", names.router(b["uid"]), "10.1.0.0/24")   # drift, while nobody leads
        assert not synced()
        wait_for("the survivor leads", lambda: leaders([survivor]) == [0], SWEEP + LEASE + 5)
        took_over = time.monotonic() - killed
        wait_for("the drifted route is restored", synced, SWEEP + LEASE + 5)
        repaired = time.monotonic() - killed

        with Client(survivor.endpoint, ADMIN_TOKEN) as admin:
            status = admin.status()
            assert status["leading"] and status["leader"] == status["replica"]

            def collected() -> bool:
                return not admin.list_peerings("c", "net-c")
            wait_for("the expired peering is collected", collected, 4 + SWEEP + LEASE + 5, step=0.1)
        with store.read() as tx:
            deleted = [e for e in tx.events_after("c", "net-c", 0, 100) if e.name == "short" and e.type == "Deleted"]
        expired_lines = sum(d.log.read_text().count("peering c/net-c/short expired") for d in daemons)
        assert len(deleted) == 1 and expired_lines == 1, (deleted, expired_lines)
        # The lease runs out, then the survivor's first sweep repairs (3 s of slack for a loaded machine).
        assert repaired <= SWEEP + LEASE + 3.0, f"repaired {repaired:.2f}s after the leader died"
        # A replica started again follows; the lease stays where it is.
        daemons[leader].spawn()
        daemons[leader].wait_ready()
        time.sleep(LEASE)   # not polling: a whole lease passes, and the lease must not move meanwhile
        assert leaders(daemons) == [1 - leader]
    finally:
        checker.close()
        store.close()
    for d in daemons:
        d.assert_no_internal_errors()
    publish(request, "replicas_leader_loss", {
        "sweep_interval_s": SWEEP, "lease_s": LEASE, "kill_to_drift_repaired_s": round(repaired, 2),
        "kill_to_survivor_leading_s": round(took_over, 2), "expired_peering_deleted_events": len(deleted)})


def test_the_leader_repairs_at_once_when_a_replica_goes_away(replicas, nb3, request):
    """A replica killed between its OVN commit and its store commit leaves
    rows of a write nobody acknowledged; alone, its restart would sweep them.
    Here the leader does, as soon as the replica's sessions are gone, long
    before its next periodic sweep (30 s). And a transaction the replica sent
    just before it died may commit in the NB after its sessions are gone
    (here: just after the leader's first repair): the leader sweeps again
    over the next ``ovn_timeout`` and removes those rows too."""
    with two_replicas(replicas, nb3, ovn_timeout="4s") as (daemons, leader, store, checker):
        synced = functools.partial(in_sync, store, checker)
        # The sweeps of its takeover are over (at once, then 1 s, 3 s and ovn_timeout later).
        daemons[leader].wait_sweep(3)
        land_dead_write(checker, "ghost", "10.9.0.0/24")
        assert not synced()
        time.sleep(1.0)   # not polling: nothing may remove them in this second
        assert not synced(), "something removed the rows before any replica went away"
        daemons[1 - leader].kill9()
        killed = time.monotonic()
        wait_for("the leader removed the dead write's rows", synced, 10)   # well before the 30 s sweep
        took = time.monotonic() - killed
        land_dead_write(checker, "late", "10.8.0.0/24")
        assert not synced()
        wait_for("the leader removed the rows of a write that landed late", synced, 15)
        took_late = time.monotonic() - killed
        assert_nothing_to_repair(store, checker)
    publish(request, "replicas_dead_write_repaired", {"kill_to_rows_removed_s": round(took, 2),
                                                      "kill_to_late_rows_removed_s": round(took_late, 2)})


def test_a_new_leader_sweeps_again_for_the_old_leaders_last_write(replicas, nb3, request):
    """The leader dies with an NB transaction under way; it commits after the
    survivor took over and ran its first sweep (a Raft round, an NB leader
    election). The survivor never saw the old leader go (it was gone before
    the survivor led), so what makes it look again is the takeover itself:
    it sweeps again over the next ``ovn_timeout``, long before its next
    periodic sweep (30 s)."""
    with two_replicas(replicas, nb3) as (daemons, leader, store, checker):
        synced = functools.partial(in_sync, store, checker)
        survivor = daemons[1 - leader]
        daemons[leader].kill9()
        killed = time.monotonic()
        wait_for("the survivor leads", lambda: leaders([survivor]) == [0], LEASE + 10)
        survivor.wait_sweep(0)
        assert synced()
        land_dead_write(checker, "late", "10.8.0.0/24")   # the dead leader's last transaction, landing now
        landed = time.monotonic()
        assert not synced()
        wait_for("the new leader removed the rows of the old leader's late write", synced, 15)
        took = time.monotonic() - landed
        assert_nothing_to_repair(store, checker)
    for d in daemons:
        d.assert_no_internal_errors()
    publish(request, "replicas_takeover_late_write_repaired", {
        "kill_to_takeover_sweep_s": round(landed - killed, 2), "landing_to_rows_removed_s": round(took, 2)})


def test_the_watch_sees_a_replica_that_goes_before_its_first_round(pg_url):
    """The leader looks at who is connected as it takes over, before its
    first sweep: a replica that dies a moment later (before the watch's
    first round) is still reported gone."""
    import psycopg

    from netpeer.service.leader import ReplicaWatch
    from netpeer.store.pg_lease import APP_PREFIX
    other = psycopg.connect(pg_url, application_name=f"{APP_PREFIX}elsewhere:1")
    watch = ReplicaWatch(pg_url)
    try:
        watch.look()
        other.close()
        gone = set()
        wait_for("the replica's session is gone", lambda: gone.update(watch.departed()) or gone, 10, step=0.05)
        assert gone == {f"{APP_PREFIX}elsewhere:1"}
    finally:
        other.close()
        watch.close()
