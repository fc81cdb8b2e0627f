"""``netpeer dev up --ha``: PostgreSQL, an NB Raft cluster of three, SB,
northd and netpeerd replicas on one machine, as a user runs it: the export
lines, ``dev status -o json`` (each process with its role and pid), a peering
bound through the printed endpoints, and ``dev down --purge`` leaving no
process and no directory behind."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from netpeer_dev.daemons import alive
from tests.support import require_ovn, short_tmpdir


def netpeer(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netpeer.cli.main", *args], capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL,
                          env=dict({k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}, **(env or {})))


def test_dev_up_ha_status_and_down():
    require_ovn()
    state = short_tmpdir("npd-")
    pids: list[int] = []
    pg_dir = None
    try:
        up = netpeer("dev", "up", "--ha", "--replicas", "3", "--state-dir", str(state))
        assert up.returncode == 0, up.stderr
        exports = dict(line.removeprefix("export ").split("=", 1) for line in up.stdout.splitlines())
        endpoints = exports["NETPEER_ENDPOINT"].split(",")
        assert len(endpoints) == 3 and all(e.startswith("unix://") for e in endpoints)
        assert exports["NETPEER_TOKEN"].startswith("np_")
        status = netpeer("dev", "status", "--state-dir", str(state), "-o", "json")
        assert status.returncode == 0, status.stderr
        daemons = {d["name"]: d for d in json.loads(status.stdout)["daemons"]}
        assert set(daemons) == {"postgres", "ovsdb-server-nb-1", "ovsdb-server-nb-2", "ovsdb-server-nb-3",
                                "ovsdb-server-sb", "ovn-northd", "netpeerd-1", "netpeerd-2", "netpeerd-3"}
        assert all(d["state"] == "running" and d["pid"] for d in daemons.values()), daemons
        pids = [d["pid"] for d in daemons.values()]
        pg_dir = Path(daemons["postgres"]["detail"])
        assert sorted(daemons[f"ovsdb-server-nb-{i}"]["role"] for i in (1, 2, 3)) == ["follower", "follower", "leader"]
        assert sorted(daemons[f"netpeerd-{i}"]["role"] for i in (1, 2, 3)) == ["leader", "replica", "replica"]
        env = {k: shlex.split(v)[0] for k, v in exports.items() if k in ("NETPEER_ENDPOINT", "NETPEER_TOKEN")}
        for ns, net, subnet in (("a", "na", "10.1.0.0/24"), ("b", "nb", "10.2.0.0/24")):
            assert netpeer("network", "create", net, "--subnet", subnet, "-n", ns, env=env).returncode == 0
        assert netpeer("peering", "create", "na", "to-b", "b/nb", "-n", "a", env=env).returncode == 0
        bound = netpeer("peering", "create", "nb", "to-a", "a/na", "-n", "b", "-o", "json", env=env)
        assert json.loads(bound.stdout)["phase"] == "Bound", bound.stderr
    finally:
        down = netpeer("dev", "down", "--purge", "--state-dir", str(state))
        shutil.rmtree(state, ignore_errors=True)
    assert down.returncode == 0, down.stderr
    assert not [p for p in pids if alive(p)], "dev down left processes running"
    assert pg_dir is not None and not pg_dir.exists() and not state.exists()
