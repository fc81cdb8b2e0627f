"""``netpeer dev up --sites east,west`` and the other dev verbs on it, through
the real CLI: export lines, status (text and JSON), instances attached in
the site of the endpoint in use, an idempotent up, and a down that leaves
no process, namespace, veth, key or secret."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from netpeer.api.client import Client
from netpeer_dev.multisite import MultiSiteStack
from tests.sites.helpers import all_pids, leftovers, require_sites
from tests.support import short_tmpdir

pytestmark = pytest.mark.chassis


def _netpeer(*args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", *args], env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, f"netpeer {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc


def _exports(stdout: str) -> dict[str, str]:
    out = {}
    for line in stdout.splitlines():
        assert line.startswith("export "), line
        key, _, value = line[len("export "):].partition("=")
        out[key] = value
    return out


def test_dev_up_sites_status_instances_down(measurements) -> None:
    require_sites()
    state = short_tmpdir("npx-")
    pids: dict[str, int] = {}
    multi = None
    left: list[str] = []
    try:
        t0 = time.monotonic()
        up = _netpeer("dev", "up", "--sites", "east,west", "--state-dir", str(state))
        measurements.add("netpeer dev up --sites east,west (two sites with netpeerd, from nothing)",
                         round(time.monotonic() - t0, 2))
        env = _exports(up.stdout)
        assert env["NETPEER_SITES"] == "east,west"
        for site in ("EAST", "WEST"):
            assert env[f"NETPEER_ENDPOINT_{site}"] == f"unix://{state / site.lower() / 'netpeer.sock'}"
            assert env[f"NETPEER_TOKEN_{site}"].startswith("np_admin")
            assert env[f"NETPEER_METRICS_URL_{site}"].startswith("http://127.0.0.1:")
        assert env["NETPEER_ENDPOINT"] == env["NETPEER_ENDPOINT_EAST"]
        assert env["NETPEER_TOKEN"] == env["NETPEER_TOKEN_EAST"]
        assert env["NETPEER_TOKEN_EAST"] != env["NETPEER_TOKEN_WEST"]
        multi = MultiSiteStack.open(state)
        pids = all_pids(multi)
        assert sorted(p for p in pids if p.endswith("netpeerd")) == ["east/netpeerd", "west/netpeerd"]
        for site in ("east", "west"):
            config = (state / site / "netpeerd.toml").read_text()
            assert f'site = "{site}"' in config and f'gateway_group = "np-gw-{site}"' in config, config
            assert oct((state / site / "admin.token").stat().st_mode & 0o777) == "0o600"
        assert oct((state / "secrets" / "east-west.secret").stat().st_mode & 0o777) == "0o600"

        # Idempotent: a second up changes nothing and prints the same settings.
        again = _netpeer("dev", "up", "--sites", "east,west", "--state-dir", str(state))
        assert _exports(again.stdout) == env
        assert all_pids(multi) == pids
        other = _netpeer("dev", "up", "--sites", "east,north", "--state-dir", str(state), check=False)
        assert other.returncode != 0 and len(other.stderr.strip().splitlines()) == 1, other.stderr
        assert "east,west" in other.stderr

        status = json.loads(_netpeer("dev", "status", "--state-dir", str(state), "-o", "json").stdout)
        assert [s["name"] for s in status["sites"]] == ["east", "west"]
        assert all(d["state"] == "running" for d in status["daemons"]), status["daemons"]
        assert {(t["site"], t["peer"], t["state"]) for t in status["tunnels"]} == {("east", "west", "up"),
                                                                                    ("west", "east", "up")}
        assert {g["chassis"] for g in status["gateways"]} == {"east-gw", "west-gw"}
        text = _netpeer("dev", "status", "--state-dir", str(state)).stdout
        assert "np-gw-east" in text and "LATEST HANDSHAKE" in text

        # Instances go to the site of the endpoint in use.
        for site, ns, cidr in (("EAST", "team-a", "10.1.0.0/24"), ("WEST", "team-b", "10.2.0.0/24")):
            with Client(env[f"NETPEER_ENDPOINT_{site}"], env[f"NETPEER_TOKEN_{site}"]) as admin:
                admin.create_network(ns, "net", [cidr])
        east_env = {"NETPEER_ENDPOINT": env["NETPEER_ENDPOINT"], "NETPEER_TOKEN": env["NETPEER_TOKEN"]}
        west_env = {"NETPEER_ENDPOINT": env["NETPEER_ENDPOINT_WEST"], "NETPEER_TOKEN": env["NETPEER_TOKEN"]}
        a = json.loads(_netpeer("dev", "instance", "add", "team-a/net", "vm-a", "--ip", "10.1.0.10",
                                "--state-dir", str(state), "-o", "json", env=east_env).stdout)
        b = json.loads(_netpeer("dev", "instance", "add", "team-b/net", "vm-b", "--ip", "10.2.0.10",
                                "--state-dir", str(state), "-o", "json", env=west_env).stdout)
        assert (a["site"], b["site"]) == ("east", "west") and b["state"] == "up", (a, b)
        dup = _netpeer("dev", "instance", "add", "team-a/net", "vm-b", "--state-dir", str(state), env=east_env,
                       check=False)
        assert dup.returncode != 0 and "exists in site west" in dup.stderr, dup.stderr
        bad = _netpeer("dev", "instance", "add", "team-a/net", "vm-x", "--state-dir", str(state),
                       env={**east_env, "NETPEER_ENDPOINT": "unix:///nowhere.sock"}, check=False)
        assert bad.returncode != 0 and bad.stderr.strip().startswith("error: --endpoint: 'unix:///nowhere.sock'"), \
            bad.stderr
        listed = json.loads(_netpeer("dev", "instance", "list", "--state-dir", str(state), "-o", "json").stdout)
        assert {(i["site"], i["name"]) for i in listed} == {("east", "vm-a"), ("west", "vm-b")}
        _netpeer("dev", "instance", "delete", "vm-b", "--state-dir", str(state))
        listed = json.loads(_netpeer("dev", "instance", "list", "--state-dir", str(state), "-o", "json").stdout)
        assert [i["name"] for i in listed] == ["vm-a"]
    finally:
        t0 = time.monotonic()
        down = _netpeer("dev", "down", "--state-dir", str(state), check=False)
        took = time.monotonic() - t0
        if multi is not None:
            left = leftovers(multi.sites, pids)
        shutil.rmtree(state, ignore_errors=True)
    assert down.returncode == 0, down.stderr
    measurements.add("netpeer dev down (two sites)", round(took, 2))
    assert not left, left
