"""A store that lost acknowledged writes never silently wipes OVN: after
kill -9, a deleted SQLite WAL (or a deleted store, or an older backup) makes
netpeerd refuse to start with one line; ``--adopt-ovn`` rebuilds the store
from OVN's rows, ``--accept-rollback`` makes OVN match the store. Real
netpeerd processes on real OVN."""

from __future__ import annotations

import collections

from netpeer.api.client import Client
from netpeer.ovn.backend import OvnBackend
from tests.support import ADMIN_TOKEN, netpeerd_process

PAIRS = 12


def owned_count(ovn) -> int:
    backend = OvnBackend(ovn.nb_remote)
    try:
        assert backend.wait_connected(30)
        return sum(len(v) for v in backend.owned_rows().values())
    finally:
        backend.close()


def build(daemon) -> dict[str, str]:
    """PAIRS Bound pairs; the network uids by name."""
    with Client(daemon.endpoint, ADMIN_TOKEN) as c:
        uids = {}
        for i in range(PAIRS):
            for side, peer, octet in (("a", "b", 1), ("b", "a", 2)):
                uids[f"{side}{i}"] = c.create_network("t", f"{side}{i}", [f"10.{octet}.{i}.0/24"])["uid"]
        for i in range(PAIRS):
            c.create_peering("t", f"a{i}", "to-b", f"b{i}", "t")
            assert c.create_peering("t", f"b{i}", "to-a", f"a{i}", "t")["phase"] == "Bound"
    return uids


def refused(daemon, *args) -> str:
    """Starts netpeerd expecting it to refuse; its stderr's last line."""
    daemon.spawn(args=args)
    code = daemon.exit_code(60)
    assert code == 2, f"netpeerd did not refuse (exit {code}): {daemon.tail(800)}"
    return daemon.tail(2000).strip().splitlines()[-1]


def test_a_lost_wal_is_refused_then_adopted(ovn, state_dir):
    daemon = netpeerd_process(state_dir, ovn.nb_remote, sweep_interval="1s")
    try:
        daemon.start(sweep=True)
        uids = build(daemon)
        rows = owned_count(ovn)
        daemon.kill9()
        for suffix in ("-wal", "-shm"):
            (state_dir / f"netpeer.db{suffix}").unlink(missing_ok=True)

        line = refused(daemon)
        assert line.startswith("netpeerd: refusing to start:") and "--adopt-ovn" in line, line
        assert owned_count(ovn) == rows, "the refused start changed OVN"

        status = daemon.start(sweep=True, args=("--adopt-ovn",))
        assert status["last_sweep"] == {"expired": 0, "repaired_rows": 0, "errors": 0}, status
        with Client(daemon.endpoint, ADMIN_TOKEN) as c:
            nets = {n["name"]: n for n in c.list_networks("t")}
            assert {k: v["uid"] for k, v in nets.items()} == uids
            phases = collections.Counter(p["phase"] for n in nets for p in c.list_peerings("t", n))
            assert phases == {"Bound": 2 * PAIRS}
            assert c.get_peering("t", "a0", "to-b")["remote_uid"] == uids["b0"]
            c.create_network("t", "after", ["10.9.0.0/24"])           # writes work again
        assert owned_count(ovn) > rows
        daemon.stop()
        daemon.start(sweep=True)                                    # and a plain restart is fine
    finally:
        daemon.stop()


def test_a_deleted_store_is_refused_and_a_rollback_can_be_accepted(ovn, state_dir):
    daemon = netpeerd_process(state_dir, ovn.nb_remote, sweep_interval="1s")
    try:
        daemon.start(sweep=True)
        build(daemon)
        daemon.stop()
        for path in state_dir.glob("netpeer.db*"):
            path.unlink()
        line = refused(daemon)
        assert "another store" in line or "holds no network" in line, line
        assert owned_count(ovn) > 0
        daemon.start(sweep=True, args=("--accept-rollback",))
        assert owned_count(ovn) == 0, "OVN did not converge to the (empty) store"
    finally:
        daemon.stop()
