"""The newcomer's walk with the real `netpeer` command: dev up, two tenants,
the whole life of a peering, errors as one line, dev down."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tests.support import run_cli as netpeer
from tests.support import wait_until




@pytest.fixture
def dev(state_dir):
    env = {**os.environ, "NETPEER_DEV_DIR": str(state_dir / "dev")}
    for k in ("NETPEER_ENDPOINT", "NETPEER_TOKEN", "NETPEER_NAMESPACE"):
        env.pop(k, None)
    try:
        up = netpeer("dev", "up", "--sweep-interval", "1s", env=env)
        for line in up.stdout.splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value
        yield env
    finally:
        netpeer("dev", "down", env=env, check=False)


def as_tenant(env, token):
    return {**env, "NETPEER_TOKEN": token}


def test_walkthrough(dev):
    assert dev["NETPEER_ENDPOINT"].startswith("unix://") and dev["NETPEER_TOKEN"].startswith("np_")
    import urllib.request
    metrics = urllib.request.urlopen(dev["NETPEER_METRICS_URL"], timeout=10).read().decode()
    assert dev["NETPEER_METRICS_URL"].startswith("http://127.0.0.1:") and "netpeer_rpc_requests_total" in metrics
    status = json.loads(netpeer("dev", "status", "-o", "json", env=dev).stdout)
    assert {d["name"]: d["state"] for d in status["daemons"]}["netpeerd"] == "running"
    nb = status["nb_remote"]

    ta = netpeer("token", "create", "--namespace", "team-a", env=dev).stdout.strip()
    tb = netpeer("token", "create", "--namespace", "team-b", env=dev).stdout.strip()
    a, b = as_tenant(dev, ta), as_tenant(dev, tb)

    net_a = json.loads(netpeer("network", "create", "net-a", "--subnet", "10.1.0.0/24", "-o", "json", env=a).stdout)
    assert set(net_a) >= {"name", "namespace", "uid", "subnets", "routes", "peerings", "peered_networks"}
    assert net_a["namespace"] == "team-a"  # the token's only namespace is the default
    netpeer("network", "create", "net-b", "--subnet", "10.2.0.0/24", "--route", "10.9.0.0/24", env=b)

    p = json.loads(netpeer("peering", "create", "net-a", "to-b", "team-b/net-b", "-o", "json", env=a).stdout)
    assert set(p) >= {"name", "network", "remote_namespace", "remote_network", "remote_uid", "phase", "reason",
                      "last_phase_transition_time", "expires_at"}
    assert (p["phase"], p["reason"]) == ("Pending", "AwaitingRemote")
    assert p["last_phase_transition_time"].endswith("Z") and p["expires_at"].endswith("Z")
    table = netpeer("peering", "list", "net-a", env=a).stdout
    assert "| to-b " in table and "PENDING" in table.upper()

    q = json.loads(netpeer("peering", "create", "net-b", "to-a", "team-a/net-a", "-o", "json", env=b).stdout)
    assert q["phase"] == "Bound"
    ports = subprocess.run(["ovn-nbctl", f"--db={nb}", "--bare", "--columns=name", "list", "Logical_Router_Port"],
                           capture_output=True, text=True, check=True).stdout
    assert ports.count("np-peer-") == 2
    shown = json.loads(netpeer("network", "show", "net-a", "-o", "json", env=a).stdout)
    assert shown["peered_networks"][0]["name"] == "net-b"

    # Refused delete, as one line naming the network.
    r = netpeer("network", "delete", "net-a", env=a, check=False)
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "network" in r.stderr and "'net-a'" in r.stderr or "team-a/net-a" in r.stderr, r.stderr

    # Withdraw: Pending with RemoteWithdrawn, peer ports gone.
    netpeer("peering", "delete", "net-b", "to-a", env=b)
    p = json.loads(netpeer("peering", "show", "net-a", "to-b", "-o", "json", env=a).stdout)
    assert (p["phase"], p["reason"]) == ("Pending", "RemoteWithdrawn")
    ports = subprocess.run(["ovn-nbctl", f"--db={nb}", "--bare", "--columns=name", "list", "Logical_Router_Port"],
                           capture_output=True, text=True, check=True).stdout
    assert "np-peer-" not in ports

    # Failed on overlap.
    netpeer("network", "create", "net-c", "--subnet", "10.1.0.0/16", env=b)
    netpeer("peering", "create", "net-c", "to-a", "team-a/net-a", env=b)
    netpeer("peering", "create", "net-a", "to-c", "team-b/net-c", env=a)
    f = json.loads(netpeer("peering", "show", "net-a", "to-c", "-o", "json", env=a).stdout)
    assert (f["phase"], f["reason"]) == ("Failed", "OverlappingPrefixes") and "10.1.0.0/16" in f["message"]

    # TTL expiry with a short TTL: the sweep deletes it.
    netpeer("peering", "create", "net-a", "short", "team-x/nowhere", "--ttl", "2s", env=a)
    r = wait_until(lambda: netpeer("peering", "show", "net-a", "short", env=a, check=False), 20,
                   "the expired peering was not deleted", step=0.5, until=lambda r: r.returncode != 0)
    assert r.returncode == 1 and "peering" in r.stderr and "short" in r.stderr, r.stderr


def test_errors_are_one_line(dev):
    ta = netpeer("token", "create", "--namespace", "team-a", env=dev).stdout.strip()
    a = as_tenant(dev, ta)
    # Each names its field and value (what the CLI shows from the error's details, whatever the words).
    for args, field, value in [
        (("network", "create", "bad_name", "--subnet", "10.0.0.0/24"), "network", "'bad_name'"),
        (("network", "create", "ok", "--subnet", "10.0.0.1/24"), "subnets[0]", "10.0.0.1/24"),
        (("peering", "create", "ok", "p", "a/b/c"), "remote", "'a/b/c'"),
        (("peering", "create", "ok", "p", "x", "--ttl", "forever"), "--ttl", "'forever'"),
        (("network", "show", "nope"), "network", "nope"),
        (("network", "list", "-n", "team-b"), "namespace", "'team-b'"),
        (("network", "list", "--endpoint", "unix:///nonexistent.sock"), "error:", "unix:///nonexistent.sock"),
    ]:
        r = netpeer(*args, env=a, check=False)
        assert r.returncode != 0, args
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr
        assert field in r.stderr and value in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr


def test_dev_down_stops_everything(state_dir):
    env = {**os.environ, "NETPEER_DEV_DIR": str(state_dir / "dev")}
    netpeer("dev", "up", env=env)
    status = json.loads(netpeer("dev", "status", "-o", "json", env=env).stdout)
    pids = [d["pid"] for d in status["daemons"] if d["pid"]]
    assert len(pids) == 4  # NB, SB, northd, netpeerd
    netpeer("dev", "up", env=env)  # idempotent: same daemons
    again = json.loads(netpeer("dev", "status", "-o", "json", env=env).stdout)
    assert [d["pid"] for d in again["daemons"] if d["pid"]] == pids
    netpeer("dev", "down", env=env)
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    r = netpeer("dev", "status", env=env, check=False)
    assert r.returncode == 3 and "stopped" in r.stdout


@pytest.mark.message_text("a token refusal names no field: its words are what the user reads")
def test_tokens_expire_list_and_revoke(dev, state_dir):
    """`token create --ttl`, `token list`, `token revoke` (by id or whole
    token): a revoked or expired token is refused at once; --token-file keeps
    the token out of the process list."""
    created = json.loads(netpeer("token", "create", "-n", "team-a", "--description", "ci", "-o", "json",
                                 env=dev).stdout)
    short = json.loads(netpeer("token", "create", "-n", "team-b", "--ttl", "1s", "-o", "json", env=dev).stdout)
    assert created["expires_at"] is None and short["expires_at"]
    listed = {t["token_id"]: t for t in json.loads(netpeer("token", "list", "-o", "json", env=dev).stdout)}
    assert listed[created["token_id"]]["description"] == "ci" and created["token"] not in json.dumps(listed)
    assert any(t["admin"] for t in listed.values())
    table = netpeer("token", "list", env=dev).stdout
    assert created["token_id"] in table and "never" in table

    token_file = state_dir / "a.token"
    token_file.write_text(created["token"] + "\n")
    token_file.chmod(0o600)
    env_a = {k: v for k, v in dev.items() if k != "NETPEER_TOKEN"}
    who = json.loads(netpeer("token", "whoami", "--token-file", str(token_file), "-o", "json", env=env_a).stdout)
    assert who["namespaces"] == ["team-a"]

    time.sleep(1.5)   # not polling: the token's 1 s passes on netpeerd's real clock (another process's)
    expired = netpeer("token", "whoami", env=as_tenant(dev, short["token"]), check=False)
    assert expired.returncode == 1 and "expired" in expired.stderr and len(expired.stderr.strip().splitlines()) == 1

    netpeer("token", "revoke", created["token_id"], env=dev)
    refused = netpeer("token", "whoami", "--token-file", str(token_file), env=env_a, check=False)
    assert refused.returncode == 1 and refused.stderr.strip() == "error: invalid token"
    again = netpeer("token", "revoke", created["token"], env=dev, check=False)
    assert again.returncode == 1 and "not found" in again.stderr
    admin_id = next(t["token_id"] for t in listed.values() if t["admin"])
    own = netpeer("token", "revoke", admin_id, env=dev, check=False)
    assert own.returncode == 1 and "admin_token_file" in own.stderr
    tenant = netpeer("token", "list", env=as_tenant(dev, short["token"]), check=False)
    assert tenant.returncode == 1


def test_a_remote_with_an_empty_namespace_is_refused(dev):
    netpeer("network", "create", "net-a", "--subnet", "10.1.0.0/24", "-n", "team-a", env=dev)
    out = netpeer("peering", "create", "net-a", "p", "/net-b", "-n", "team-a", env=dev, check=False)
    assert out.returncode == 1 and "remote: '/net-b' has an empty namespace" in out.stderr
    assert json.loads(netpeer("peering", "list", "net-a", "-n", "team-a", "-o", "json", env=dev).stdout) == []


def test_dev_up_refuses_a_lost_store_and_adopts_ovn(dev):
    made = json.loads(netpeer("network", "create", "net-a", "--subnet", "10.1.0.0/24", "-n", "team-a", "-o", "json",
                              env=dev).stdout)
    netpeer("dev", "down", env=dev)                          # keeps the state directory (and OVN's databases)
    state = dev["NETPEER_DEV_DIR"]
    for name in os.listdir(state):
        if name.startswith("netpeer.db"):
            os.unlink(os.path.join(state, name))
    refused = netpeer("dev", "up", env=dev, check=False)
    lines = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode == 1 and len(lines) == 1, refused.stderr
    assert "refusing to start" in lines[0] and "--adopt-ovn" in lines[0], lines[0]
    netpeer("dev", "up", "--adopt-ovn", env=dev)
    again = json.loads(netpeer("network", "show", "net-a", "-n", "team-a", "-o", "json", env=dev).stdout)
    assert again["uid"] == made["uid"] and again["subnets"] == ["10.1.0.0/24"]


@pytest.mark.message_text("the exact line of each invalid field, netpeerd's words included")
def test_every_invalid_field_is_a_line_in_one_run(dev):
    """Issue 33, defect 6: a bad CIDR, a bad next hop and an overlap, all said at once."""
    ta = netpeer("token", "create", "--namespace", "team-a", env=dev).stdout.strip()
    r = netpeer("network", "create", "n1", "--subnet", "10.1.0.0/33", "--subnet", "10.2.0.0/24",
                "--subnet", "10.2.0.0/25", "--route", "10.9.0.0/24 via 10.2.0.999", env=as_tenant(dev, ta),
                check=False)
    assert r.returncode != 0
    assert r.stderr.splitlines() == [
        "error: subnets[0]: '10.1.0.0/33' is not a CIDR prefix (like 10.0.0.0/24)",
        "error: routes[0].next_hop: '10.2.0.999' is not an IP address",
        "error: subnets[2]: '10.2.0.0/25' overlaps subnets[1] (10.2.0.0/24)",
    ], r.stderr
