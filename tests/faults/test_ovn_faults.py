"""OVN faults under a running netpeerd (a real process):

- a three-member clustered NB (Raft over unix sockets) whose leader is
  killed (and, twice, asked to hand over leadership) while a workload runs;
- a standalone NB killed and restarted with its data;
- ovn-northd killed and restarted;
- the SB database lost (killed, file deleted, recreated empty) and
  repopulated by northd.

Every call either completes or fails with UNAVAILABLE (never another code,
never slower than the configured ovn_timeout plus a small margin) and
succeeds when retried; afterwards the store matches the acknowledged
operations, the OVN rows match the store, repair finds nothing, and
northd's logical flows for bound pairs are back (ovn-trace reachability).
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import threading
import time

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.ovn import names
from netpeer.ovn.backend import OvnBackend
from netpeer.service import Service
from netpeer.store.sqlite import SqliteStore
from tests.faults import harness
from tests.faults.harness import Model, publish, summary, wait_ovn_matches_store
from tests.support import wait_until

TENANTS = ["team-a", "team-b", "team-c"]
OVN_TIMEOUT = 5.0
# A call may take the OVN timeout plus this much (gRPC, SQLite fsync, a noisy
# 2-core machine) before it counts as a hang.
MARGIN = 2.5
SWEEP = 2.0   # the daemon's sweep_interval in these tests
QUORUM_OUTAGE = 8.0
SEED = int(os.environ.get("NETPEER_FAULTS_SEED", "20261121"))


class RetryingWorkload(threading.Thread):
    """The model's operations one at a time; an UNAVAILABLE answer is retried
    (the same call) until it succeeds. Any other failure stops the workload
    and is reported. Records every call as (start, duration, outcome)."""

    def __init__(self, model: Model, endpoint: str, tokens: dict[str, str], give_up_after: float = 90.0):
        super().__init__(name="workload", daemon=True)
        self.model = model
        self.clients = {ns: Client(endpoint, tokens[ns], timeout=60) for ns in tokens}
        self.give_up_after = give_up_after
        self.stop = threading.Event()
        self.calls: list[tuple[float, float, str, str]] = []
        self.acked = 0
        self.retried_ops = 0
        self.error: str | None = None
        self._lock = threading.Lock()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                op = self.model.next_op()
                first = time.monotonic()
                attempts = 0
                while True:
                    attempts += 1
                    start = time.monotonic()
                    try:
                        op.run(self.clients[op.ns])
                    except errors.Unavailable as exc:
                        self._record(start, "unavailable", op.kind)
                        if time.monotonic() - first > self.give_up_after:
                            self.error = f"{op} still UNAVAILABLE after {self.give_up_after:.0f}s: {exc}"
                            return
                        time.sleep(0.05)   # not polling: a client's pause before it sends the write again
                        continue
                    except errors.NetpeerError as exc:
                        self._record(start, type(exc).__name__, op.kind)
                        # After an UNAVAILABLE, AlreadyExists/NotFound would mean
                        # the failed attempt had changed something.
                        self.error = f"{op} (attempt {attempts}): {type(exc).__name__}: {exc}"
                        return
                    self._record(start, "ok", op.kind)
                    break
                self.model.apply(op)
                self.acked += 1
                self.retried_ops += attempts > 1
        finally:
            for c in self.clients.values():
                c.close()

    def _record(self, start: float, outcome: str, kind: str) -> None:
        with self._lock:
            self.calls.append((start, time.monotonic() - start, outcome, kind))

    def success_after(self, t: float) -> float | None:
        """The end time of the first successful call that started after ``t``
        and had to write OVN. Network writes always do; a one-sided peering
        (created Pending, or withdrawn while Pending) needs no OVN change and
        rightly succeeds without an NB quorum."""
        with self._lock:
            for start, duration, outcome, kind in self.calls:
                if start > t and outcome == "ok" and kind.endswith("_network"):
                    return start + duration
        return None

    def unavailable_between(self, t0: float, t1: float) -> int:
        with self._lock:
            return sum(1 for start, _, outcome, _ in self.calls if t0 <= start <= t1 and outcome == "unavailable")


def check_converged(store, checker, models: list[Model]) -> float:
    """After the workload and two of the daemon's sweep intervals (an OVN
    transaction that timed out may still commit late, and the next sweep
    removes what it left): store == model, OVN == store and nothing to
    repair. Returns how long the checker's replica took to match."""
    time.sleep(2 * SWEEP + 0.5)   # not polling: two sweeps pass, as said
    with store.read() as tx:
        problems = [p for m in models for p in m.diff_store(tx, only=m.tenants)]
    assert not problems, problems[:10]
    took = wait_ovn_matches_store(store, checker, timeout=30)
    report = Service(store, checker).repair()
    assert (report.repaired_rows, report.errors) == (0, 0), report
    return took


def assert_clean(workloads: list[RetryingWorkload]) -> dict:
    """Every call completed or failed with UNAVAILABLE, none too slow."""
    outcomes = {}
    for w in workloads:
        assert w.error is None, w.error
        for _, _, outcome, _ in w.calls:
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert set(outcomes) <= {"ok", "unavailable"}, outcomes
    slowest = max(d for w in workloads for _, d, _, _ in w.calls)
    assert slowest <= OVN_TIMEOUT + MARGIN, \
        f"a call took {slowest:.1f}s, more than ovn_timeout {OVN_TIMEOUT}s + {MARGIN}s"
    return {"calls": outcomes, "slowest_call_s": round(slowest, 2)}


def first_success_after(workloads: list[RetryingWorkload], t: float, timeout: float) -> float:
    def first() -> float | None:
        ends = [e for e in (w.success_after(t) for w in workloads) if e is not None]
        if ends:
            return min(ends)
        for w in workloads:
            if w.error or not w.is_alive():
                raise AssertionError(f"a workload stopped: {w.error}")
        return None
    return wait_until(first, timeout, "no write succeeded after the fault", step=0.01,
                      until=lambda end: end is not None)


@pytest.mark.slow
def test_nb_cluster_leader_failover(nb_cluster, netpeerd_factory, request):
    """Two clients at once (tenants a+b peering across, tenant c peering
    within itself) while the NB leader is killed ten times and asked to hand
    over leadership twice, then the cluster loses its quorum for a while."""
    cluster = nb_cluster
    rnd = random.Random(SEED)
    daemon = netpeerd_factory(cluster.nb_remote, ovn_timeout=f"{OVN_TIMEOUT:.0f}s",
                              sweep_interval=f"{SWEEP:.0f}s")
    daemon.start()
    daemon.wait_sweep(0)
    tokens = harness.tokens(daemon, TENANTS)
    models = [Model(["team-a", "team-b"], seed=SEED), Model(["team-c"], seed=SEED + 1, prefix_offset=8000)]
    store = SqliteStore(daemon.config.store)
    checker = OvnBackend(cluster.nb_remote)
    assert checker.wait_connected(30), "the checker cannot reach the NB cluster"
    workloads = [RetryingWorkload(m, daemon.endpoint, {ns: tokens[ns] for ns in m.tenants}) for m in models]
    faults = ["kill"] * 10 + ["transfer"] * 2
    rnd.shuffle(faults)
    to_leader, to_write, unavailable = {"kill": [], "transfer": []}, {"kill": [], "transfer": []}, []
    try:
        for w in workloads:
            w.start()
        first_success_after(workloads, time.monotonic(), 30)
        for fault in faults:
            time.sleep(rnd.uniform(0.5, 1.5))   # not polling: the workload runs a while between faults
            old = cluster.wait_leader()
            t0 = time.monotonic()
            if fault == "kill":
                cluster.kill(old)
            else:
                cluster.transfer_leadership(old)
            cluster.wait_leader(timeout=30, exclude=old)
            to_leader[fault].append(time.monotonic() - t0)
            t1 = first_success_after(workloads, t0, 60)
            to_write[fault].append(t1 - t0)
            unavailable.append(sum(w.unavailable_between(t0, t1) for w in workloads))
            if fault == "kill":
                cluster.start_member(old)
                cluster.wait_members_joined()
        # Found by this test: with python-ovs's default reconnect backoff
        # (up to 8 s) netpeerd needed 15-16 s after a leader kill; the median
        # is 2-4 s since the backend caps it at 1 s (netpeer/ovn/backend.py).
        assert statistics.median(to_write["kill"]) <= 8.0, to_write["kill"]
        # Quorum lost: the leader and one follower die together. No leader
        # can be elected; writes must keep failing cleanly (not hang) until
        # the two come back.
        time.sleep(1)   # not polling: the workload runs a while before the fault
        old = cluster.wait_leader()
        gone = [old, next(i for i in cluster.members() if i != old)]
        t0 = time.monotonic()
        for i in gone:
            cluster.kill(i)
        dead = time.monotonic()   # a write that started before this may have reached the old leader
        time.sleep(QUORUM_OUTAGE)   # not polling: the outage lasts this long
        assert not any(w.success_after(dead) for w in workloads), "a write succeeded without an NB quorum"
        for i in gone:
            cluster.start_member(i)
        t_back = time.monotonic()
        t1 = first_success_after(workloads, dead, 60)
        quorum = {"outage_s": QUORUM_OUTAGE, "restart_to_first_write_s": round(t1 - t_back, 2),
                  "unavailable_answers": sum(w.unavailable_between(dead, t1) for w in workloads)}
        cluster.wait_members_joined()
        time.sleep(1)   # not polling: the workload runs a while with the whole cluster back
        for w in workloads:
            w.stop.set()
        for w in workloads:
            w.join(60)
            assert not w.is_alive(), "a workload hung"
        figures = assert_clean(workloads)
        catch_up = check_converged(store, checker, models)
    finally:
        for w in workloads:
            w.stop.set()
        checker.close()
        store.close()
    daemon.assert_no_internal_errors()
    publish(request, "nb_cluster_failover", {
        "seed": SEED, "clients": len(workloads), "failovers_survived": len(faults),
        "leader_kills": faults.count("kill"), "leadership_transfers": faults.count("transfer"),
        "acknowledged": sum(w.acked for w in workloads),
        "ops_retried_after_unavailable": sum(w.retried_ops for w in workloads), "lost": 0,
        "fault_to_new_leader_s": {k: summary(v) for k, v in to_leader.items()},
        "fault_to_first_write_s": {k: summary(v) for k, v in to_write.items()},
        "unavailable_answers_per_failover": summary(unavailable), "quorum_loss": quorum,
        "ovn_timeout_s": OVN_TIMEOUT, "checker_catch_up_s": round(catch_up, 3), **figures,
        "end_state": [m.counts() for m in models],
    })


# --------------------------------------------------------------------------- standalone OVN
class Pairs:
    """Bound pairs of networks (team-a <-> team-b), each with one instance
    port per side for ovn-trace."""

    def __init__(self, ovn, daemon):
        self.ovn = ovn
        tokens = harness.tokens(daemon, ["team-a", "team-b"])
        self.a = Client(daemon.endpoint, tokens["team-a"], timeout=60)
        self.b = Client(daemon.endpoint, tokens["team-b"], timeout=60)
        self.pairs: list[tuple[dict, dict]] = []

    def close(self) -> None:
        self.a.close()
        self.b.close()

    def networks(self, tag: int) -> tuple[dict, dict]:
        """Create the two networks of pair ``tag`` (not peered yet)."""
        na = self.a.create_network("team-a", f"a{tag}", [f"10.{tag}.1.0/24"])
        nb = self.b.create_network("team-b", f"b{tag}", [f"10.{tag}.2.0/24"])
        for net, side in ((na, "a"), (nb, "b")):
            port = f"vm-{side}{tag}"
            mac = names.instance_mac(net["uid"], port)
            self.ovn.nbctl("lsp-add", names.switch(net["uid"]), port, "--",
                           "lsp-set-addresses", port, f"{mac} 10.{tag}.{1 if side == 'a' else 2}.10")
        return na, nb

    def bind(self, tag: int, networks: tuple[dict, dict] | None = None) -> None:
        na, nb = networks or self.networks(tag)
        self.a.create_peering("team-a", f"a{tag}", "to-b", f"b{tag}", "team-b")
        assert self.b.create_peering("team-b", f"b{tag}", "to-a", f"a{tag}", "team-a")["phase"] == "Bound"
        self.pairs.append((na, nb))

    def reaches(self, na: dict, nb: dict) -> bool:
        """ovn-trace on the SB logical flows: does a packet from A's instance
        to B's instance leave on B's instance port?"""
        tag = int(na["name"][1:])
        port = f"vm-a{tag}"
        mac = names.instance_mac(na["uid"], port)
        flow = (f'inport == "{port}" && eth.src == {mac} && eth.dst == {names.router_mac(na["uid"])} '
                f'&& ip4.src == 10.{tag}.1.10 && ip4.dst == 10.{tag}.2.10 && ip.ttl == 64 && icmp4.type == 8')
        out = subprocess.run(["ovn-trace", f"--db={self.ovn.sb_remote}", "--minimal", names.switch(na["uid"]), flow],
                             capture_output=True, text=True, env=self.ovn.env(), timeout=30)
        assert out.returncode == 0, out.stderr
        return f'output("vm-b{tag}")' in out.stdout

    def check_dataplane(self) -> None:
        """northd has caught up, every bound pair's peer ports appear in the
        logical flows and its instances reach each other (ovn-trace)."""
        self.ovn.wait_sb_sync(timeout=60)
        lflows = self.ovn.sbctl("lflow-list")
        for na, nb in self.pairs:
            for local, remote in ((na, nb), (nb, na)):
                port = names.peer_router_port(local["uid"], remote["uid"])
                assert port in lflows, f"no logical flow mentions {port}"
            assert self.reaches(na, nb), f"{na['name']} does not reach {nb['name']}"


def daemon_pid(ovn, name: str) -> int:
    pid = ovn.pids().get(name)
    assert pid is not None, f"{name} is not running"
    return pid


def kill_daemon(ovn, name: str) -> None:
    """SIGKILL one OVN daemon of the state dir by its pid; wait until gone."""
    os.kill(daemon_pid(ovn, name), signal.SIGKILL)
    wait_until(lambda: name not in ovn.pids(), 10, f"{name} survived SIGKILL", step=0.01)


def timed(call) -> tuple[float, Exception | None]:
    start = time.monotonic()
    try:
        call()
        return time.monotonic() - start, None
    except errors.NetpeerError as exc:
        return time.monotonic() - start, exc


def retry_until_ok(call, timeout: float = 60.0) -> tuple[float, int]:
    """Retry ``call`` while it answers UNAVAILABLE; (seconds until it
    succeeded, UNAVAILABLE answers). Any other error fails the test."""
    start, unavailable = time.monotonic(), []

    def ok() -> bool:
        took, exc = timed(call)
        assert exc is None or isinstance(exc, errors.Unavailable), f"{type(exc).__name__}: {exc}"
        assert took <= OVN_TIMEOUT + MARGIN, f"a call took {took:.1f}s"
        if exc is not None:
            unavailable.append(exc)
        return exc is None
    wait_until(ok, timeout, lambda _: f"still UNAVAILABLE: {unavailable[-1]}", step=0.05)
    return time.monotonic() - start, len(unavailable)


def converged(daemon, ovn) -> None:
    """OVN == store and nothing left to repair (the checker is independent)."""
    store = SqliteStore(daemon.config.store)
    checker = OvnBackend(ovn.nb_remote)
    try:
        assert checker.wait_connected(30)
        wait_ovn_matches_store(store, checker, timeout=30)
        report = Service(store, checker).repair()
        assert (report.repaired_rows, report.errors) == (0, 0), report
    finally:
        checker.close()
        store.close()


@pytest.fixture
def standalone(ovn, netpeerd_factory):
    daemon = netpeerd_factory(ovn.nb_remote, ovn_timeout=f"{OVN_TIMEOUT:.0f}s", sweep_interval=f"{SWEEP:.0f}s")
    daemon.start()
    daemon.wait_sweep(0)
    pairs = Pairs(ovn, daemon)
    pairs.bind(1)
    pairs.check_dataplane()
    yield ovn, daemon, pairs
    pairs.close()
    daemon.assert_no_internal_errors()


def test_nb_restart(standalone, request):
    """NB killed with SIGKILL and restarted on its database file: writes
    fail fast with UNAVAILABLE meanwhile (reads still work), then succeed."""
    ovn, daemon, pairs = standalone
    kill_daemon(ovn, "ovsdb-server-nb")
    down = []
    for i in range(3):
        took, exc = timed(lambda: pairs.a.create_network("team-a", "during", ["10.99.0.0/24"]))
        assert isinstance(exc, errors.Unavailable), f"{type(exc).__name__}: {exc}"
        assert took <= OVN_TIMEOUT + MARGIN, took
        down.append(took)
    assert pairs.a.get_network("team-a", "a1")["peered_networks"], "reads are served from the store"
    assert pairs.a.list_networks("team-a") and not any(n["name"] == "during" for n in pairs.a.list_networks("team-a"))

    t0 = time.monotonic()
    ovn.start()                      # the same database file
    restarted = time.monotonic() - t0
    _, unavailable = retry_until_ok(lambda: pairs.a.create_network("team-a", "during", ["10.99.0.0/24"]))
    reconnect = time.monotonic() - t0
    pairs.bind(2)
    pairs.check_dataplane()
    converged(daemon, ovn)
    publish(request, "nb_restart", {"unavailable_while_down_s": summary(down), "nb_start_s": round(restarted, 2),
                                    "start_to_first_write_s": round(reconnect, 2),
                                    "unavailable_after_restart": unavailable})


def test_northd_restart(standalone, request):
    """northd killed: NB writes go on (the dataplane waits); after a restart
    northd catches up with what was written meanwhile."""
    ovn, daemon, pairs = standalone
    kill_daemon(ovn, "ovn-northd")
    took, exc = timed(lambda: pairs.bind(2))
    assert exc is None, f"{type(exc).__name__}: {exc}"
    t0 = time.monotonic()
    ovn.start()                      # starts northd, waits for --wait=sb sync
    pairs.check_dataplane()
    caught_up = time.monotonic() - t0
    converged(daemon, ovn)
    publish(request, "northd_restart", {"bind_while_northd_down_s": round(took, 2),
                                        "restart_to_flows_back_s": round(caught_up, 2)})


def test_sb_loss_and_recovery(standalone, request):
    """SB killed and its database deleted: NB writes go on; SB recreated
    empty, northd rebuilds every logical flow from NB."""
    ovn, daemon, pairs = standalone
    kill_daemon(ovn, "ovsdb-server-sb")
    sb_db = ovn.state_dir / "ovnsb_db.db"
    assert sb_db.exists()
    sb_db.unlink()
    took, exc = timed(lambda: pairs.bind(2))
    assert exc is None, f"{type(exc).__name__}: {exc}"
    t0 = time.monotonic()
    ovn.start()                      # creates an empty SB; northd reconnects and fills it
    pairs.check_dataplane()
    rebuilt = time.monotonic() - t0
    flows = len([line for line in ovn.sbctl("--bare", "--columns=_uuid", "list", "Logical_Flow").split() if line])
    converged(daemon, ovn)
    publish(request, "sb_loss", {"bind_while_sb_down_s": round(took, 2),
                                 "recreate_to_flows_back_s": round(rebuilt, 2), "logical_flows_rebuilt": flows})


def test_nb_frozen(standalone, request):
    """NB stops answering without closing its socket (SIGSTOP: a stuck
    server, a paused VM): a write that touches a network with many Bound
    peers (a large NB transaction) fails with UNAVAILABLE after ovn_timeout
    with a short message, then succeeds once NB runs again; the late commit
    of the abandoned transaction is undone by the sweep."""
    ovn, daemon, pairs = standalone
    hub = pairs.a.create_network("team-a", "hub", ["10.200.0.0/24"])
    for i in range(12):
        pairs.b.create_network("team-b", f"spoke{i}", [f"10.201.{i}.0/24"])
        pairs.b.create_peering("team-b", f"spoke{i}", "to-hub", "hub", "team-a")
        pairs.a.create_peering("team-a", "hub", f"to-spoke{i}", f"spoke{i}", "team-b")
    assert len(pairs.a.get_network("team-a", "hub")["peered_networks"]) == 12
    change = lambda: pairs.a.update_network("team-a", "hub", subnets=["10.200.0.0/24"],  # noqa: E731
                                            routes=[f"10.202.{i}.0/24" for i in range(40)])
    pid = daemon_pid(ovn, "ovsdb-server-nb")
    os.kill(pid, signal.SIGSTOP)
    try:
        took, exc = timed(change)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert isinstance(exc, errors.Unavailable), f"{type(exc).__name__}: {str(exc)[:300]}"
    assert len(str(exc)) < 1000, len(str(exc))
    assert OVN_TIMEOUT - 0.5 <= took <= OVN_TIMEOUT + MARGIN, took
    assert pairs.a.get_network("team-a", "hub")["routes"] == [], "the refused change was recorded"
    retry, unavailable = retry_until_ok(change)
    assert len(pairs.a.get_network("team-a", "hub")["routes"]) == 40
    time.sleep(2 * SWEEP + 0.5)   # not polling: two sweeps pass (a transaction that timed out may commit late)
    pairs.check_dataplane()
    converged(daemon, ovn)
    publish(request, "nb_frozen", {"call_while_frozen_s": round(took, 2), "answer_chars": len(str(exc)),
                                   "retry_after_resume_s": round(retry, 2), "unavailable_on_retry": unavailable})
