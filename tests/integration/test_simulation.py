"""netpeerd in simulation (``netpeer serve --dataplane memory``): real
netpeerd processes with real stores and real gRPC links between sites,
the in-memory dataplane instead of OVN. It binds across sites as netpeerd
on OVN does, says it is a simulation (log, ``netpeer status``), comes back
from a restart holding what its store implies, and is refused, with one
line naming the flag and exit code 2, when its configuration looks like
production."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netpeer.config import Config, SiteLink
from netpeer_dev.simulated import ADMIN_TOKEN, SimulatedRegion
from tests.support import short_tmpdir, wait_until


@pytest.fixture
def two_sites():
    root = short_tmpdir("np-sim-")
    region = SimulatedRegion(root, ["east", "west"], [("east", "west")], sweep_interval="1s")
    try:
        region.start()
        yield region
    finally:
        try:
            region.stop()
        finally:
            region.remove()


def phase(client, ns, net, name) -> str:
    return client.get_peering(ns, net, name)["phase"]


def cli_status(region, site: str) -> str:
    env = dict(os.environ, NETPEER_ENDPOINT=region[site].config.listen, NETPEER_TOKEN=ADMIN_TOKEN)
    return subprocess.run([sys.executable, "-m", "netpeer.cli.main", "status"], capture_output=True, text=True,
                          env=env, check=True, timeout=60).stdout


def test_two_simulated_sites_bind_over_grpc_and_say_they_are_a_simulation(two_sites):
    region = two_sites
    east, west = region["east"].client(), region["west"].client()
    try:
        east.create_network("team-a", "net-a", ["10.1.0.0/24"])
        west.create_network("team-b", "net-b", ["10.2.0.0/24"])
        first = east.create_peering("team-a", "net-a", "to-b", "net-b", "team-b", remote_site="west")
        assert (first["phase"], first["reason"]) == ("Pending", "AwaitingRemote")
        west.create_peering("team-b", "net-b", "to-a", "net-a", "team-a", remote_site="east")
        wait_until(lambda: phase(east, "team-a", "net-a", "to-b") == "Bound", 20, "east's half to bind")
        wait_until(lambda: phase(west, "team-b", "net-b", "to-a") == "Bound", 20, "west's half to bind")
        peered = east.get_network("team-a", "net-a")["peered_networks"]
        assert [(p["site"], p["namespace"], p["name"], p["prefixes"]) for p in peered] == \
            [("west", "team-b", "net-b", ["10.2.0.0/24"])]

        status = east.status()
        assert status["dataplane"] == "memory" and status["dataplane_connected"]
        assert [(x["site"], x["reachable"]) for x in status["sites"]] == [("west", True)]
        assert "dataplane:   memory (simulation: no traffic), connected" in cli_status(region, "east")
        for site in ("east", "west"):
            log = region[site].process.log.read_text()
            assert "WARNING netpeerd: SIMULATION: the dataplane is in memory" in log, log[-2000:]

        # A withdrawal crosses the link too.
        east.delete_peering("team-a", "net-a", "to-b")
        wait_until(lambda: west.get_peering("team-b", "net-b", "to-a")["reason"] == "RemoteWithdrawn", 20,
                   "west to see the withdrawal")
    finally:
        east.close()
        west.close()
    for site in ("east", "west"):
        region[site].process.assert_no_internal_errors()


def test_a_restarted_simulated_site_holds_what_its_store_implies(two_sites):
    """The memory dataplane starts with what the store implies (as OVN
    holds it across a restart of netpeerd): the first sweep repairs
    nothing and the pairs stay Bound and Programmed."""
    region = two_sites
    with region["east"].client() as east, region["west"].client() as west:
        for i in range(3):
            east.create_network("team-a", f"n{i}", [f"10.1.{i}.0/24"])
            west.create_network("team-b", f"n{i}", [f"10.2.{i}.0/24"])
            east.create_peering("team-a", f"n{i}", "p", f"n{i}", "team-b", remote_site="west")
            west.create_peering("team-b", f"n{i}", "p", f"n{i}", "team-a", remote_site="east")
        east.create_peering("team-a", "n0", "local", "n1", "team-a")
        east.create_peering("team-a", "n1", "local", "n0", "team-a")
        wait_until(lambda: all(east.get_peering("team-a", f"n{i}", "p")["dataplane"] == "Programmed"
                               for i in range(3)), 20, "east's pairs to be programmed")
    region["east"].process.stop()
    region.start(["east"])
    with region["east"].client() as east:
        status = east.status()
        assert status["sweeps"] >= 1 and status["sweep_totals"]["repaired_rows"] == 0, status
        for i in range(3):
            assert east.get_peering("team-a", f"n{i}", "p")["phase"] == "Bound"
        assert east.get_peering("team-a", "n0", "local")["phase"] == "Bound"
        # (The link's first exchange after the start marks its pairs again: Programmed once applied.)
        wait_until(lambda: all(east.get_peering("team-a", f"n{i}", "p")["dataplane"] == "Programmed"
                               for i in range(3)), 20, "east's pairs to be programmed after the restart")


def _config(root: Path, **changes) -> Path:
    token = root / "admin.token"
    token.write_text(ADMIN_TOKEN + "\n")
    secret = root / "east-west.secret"
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"x" * 32)
    os.close(fd)
    base = Config(listen=f"unix://{root / 'np.sock'}", store=root / "netpeer.db", ovn_nb="unix:/nonexistent",
                  admin_token_file=token, site="east", site_listen=f"unix://{root / 'site.sock'}",
                  gateway_group="np-gw-east", sites=(SiteLink("west", f"unix://{root / 'west.sock'}", secret),))
    return dataclasses.replace(base, **{k: (v(root) if callable(v) else v) for k, v in changes.items()}) \
        .write(root / "netpeerd.toml")


@pytest.mark.parametrize("changes, why", [
    ({"listen": "0.0.0.0:7443"}, "listen '0.0.0.0:7443' is not loopback or a unix socket"),
    ({"site_listen": "0.0.0.0:7444"}, "interconnect.listen '0.0.0.0:7444' is not loopback or a unix socket"),
    # Off loopback, metrics need TLS before anything else looks at them (Config.load).
    ({"metrics_listen": "0.0.0.0:9464", "metrics_cert": lambda r: r / "m.crt", "metrics_key": lambda r: r / "m.key"},
     "metrics_listen '0.0.0.0:9464' is not loopback or a unix socket"),
    ({"metrics_listen": "127.0.0.1:9464", "metrics_cert": lambda r: r / "m.crt",
      "metrics_key": lambda r: r / "m.key"}, "metrics.cert is configured (TLS is for a real deployment)"),
    ({"tls_cert": lambda r: r / "tls.crt", "tls_key": lambda r: r / "tls.key"},
     "tls.cert is configured (TLS is for a real deployment)"),
    ({"site_cert": lambda r: r / "s.crt", "site_key": lambda r: r / "s.key"},
     "interconnect.cert is configured (TLS is for a real deployment)"),
    ({"store": "postgresql://netpeer@db1/netpeer"}, "the store is PostgreSQL (replicas share one real dataplane)"),
    ({"sites": lambda r: (SiteLink("west", f"unix://{r / 'w.sock'},10.200.2.2:7443", r / "east-west.secret"),)},
     "sites.west.endpoint '10.200.2.2:7443' is not loopback or a unix socket"),
], ids=["listen", "interconnect.listen", "metrics_listen", "metrics-tls", "tls", "interconnect-tls", "postgresql", "site-endpoint"])
def test_the_simulation_is_refused_with_a_production_looking_configuration(changes, why):
    root = short_tmpdir("np-sim-")
    try:
        path = _config(root, **changes)
        proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "serve", "--config", str(path),
                               "--dataplane", "memory"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == (f"netpeerd: --dataplane: 'memory' is a simulation and test mode, refused with a "
                               f"configuration that looks like production: {why}\n")
        # Nothing was started: no store, no socket.
        assert sorted(p.name for p in root.iterdir()) == ["admin.token", "east-west.secret", "netpeerd.toml"]
    finally:
        import shutil
        shutil.rmtree(root, ignore_errors=True)


def test_an_unknown_dataplane_is_refused_in_one_line():
    root = short_tmpdir("np-sim-")
    try:
        path = _config(root)
        proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "serve", "--config", str(path),
                               "--dataplane", "vpp"], capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stderr) == (2, "netpeerd: --dataplane: 'vpp' must be one of ovn, memory\n")
    finally:
        import shutil
        shutil.rmtree(root, ignore_errors=True)
