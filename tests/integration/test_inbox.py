"""The request inbox through a real netpeerd (real OVN NB, SB and northd),
its API, its Watch stream and the `netpeer` command: what the target's owner
sees and does, what other tenants and the requester do not see. The oracle
timing: tests/trust/test_inbox_oracle.py; the service on both stores:
tests/unit/test_inbox.py."""

from __future__ import annotations

import json
import os
import threading

import pytest

from netpeer import errors
from netpeer.ovn import names
from tests.support import run_cli, wait_until


def netpeer(d, token, *args, check=True):
    env = {**os.environ, "NETPEER_ENDPOINT": d.endpoint, "NETPEER_TOKEN": token}
    env.pop("NETPEER_NAMESPACE", None)
    return run_cli(*args, env=env, check=check)


@pytest.fixture
def tenants(netpeerd):
    """Tenants a (requester), b (target) and c (a bystander), each with a network."""
    with netpeerd.client() as admin:
        admin.create_network("a", "web", ["10.1.0.0/24"], routes=["10.11.0.0/16"])
        admin.create_network("b", "db", ["10.2.0.0/24"])
        admin.create_network("c", "other", ["10.3.0.0/24"])
    return {ns: netpeerd.token(ns) for ns in "abc"}


def test_the_target_lists_and_accepts_and_both_halves_bind_in_ovn(netpeerd, tenants):
    with netpeerd.tenant("a") as a, netpeerd.tenant("b") as b:
        a.create_peering("a", "web", "to-db", "db", "b")
        [r] = b.list_peering_requests("b")
        assert (r["network"], r["requester_namespace"], r["requester_network"], r["prefixes"]) == \
            ("db", "a", "web", ["10.1.0.0/24", "10.11.0.0/16"])
        assert r["expires_at"] and r["requester_uid"] == a.get_network("a", "web")["uid"]
        mine = b.accept_peering_request("b", "db", r["id"], "from-web")
        assert (mine["phase"], mine["remote_namespace"], mine["remote_network"]) == ("Bound", "a", "web")
        assert a.get_peering("a", "web", "to-db")["phase"] == "Bound"
        assert b.list_peering_requests("b") == []
        uids = {"a": a.get_network("a", "web")["uid"], "b": b.get_network("b", "db")["uid"]}
    # Each network's router in the OVN NB routes to the other's prefixes.
    assert "10.2.0.0/24" in netpeerd.ovn.nbctl("lr-route-list", names.router(uids["a"]))
    b_routes = netpeerd.ovn.nbctl("lr-route-list", names.router(uids["b"]))
    assert "10.1.0.0/24" in b_routes and "10.11.0.0/16" in b_routes


def test_isolation_nobody_else_sees_a_request(netpeerd, tenants):
    with netpeerd.tenant("a") as a:
        a.create_peering("a", "web", "to-db", "db", "b")
    with netpeerd.tenant("c") as c:
        with pytest.raises(errors.PermissionDenied) as err:
            c.list_peering_requests("b")
        assert err.value.reason == "NAMESPACE_DENIED"
        assert c.list_peering_requests("c") == []
    with netpeerd.tenant("a") as a:
        # The requester's own namespace has no request: it made it, nobody made it to it.
        assert a.list_peering_requests("a") == []
        with pytest.raises(errors.PermissionDenied):
            a.list_peering_requests("b", "db")
    with netpeerd.client() as admin:   # the admin sees every namespace's
        assert [r["requester_network"] for r in admin.list_peering_requests("b")] == ["web"]


def test_withdrawn_meanwhile_is_one_line_on_the_command_line(netpeerd, tenants):
    with netpeerd.tenant("a") as a, netpeerd.tenant("b") as b:
        a.create_peering("a", "web", "to-db", "db", "b")
        [r] = b.list_peering_requests("b")
        a.delete_peering("a", "web", "to-db")
    out = netpeer(netpeerd, tenants["b"], "peering", "accept", "db", r["id"], "--name", "from-web",
                  "--namespace", "b", check=False)
    assert out.returncode != 0 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "withdrawn" in out.stderr and r["id"] in out.stderr, out.stderr
    with netpeerd.tenant("b") as b:
        assert b.list_peerings("b", "db") == []


def test_cli_lists_accepts_and_dismisses_with_json(netpeerd, tenants):
    with netpeerd.client() as admin:
        admin.create_network("a", "api", ["10.4.0.0/24"])
    with netpeerd.tenant("a") as a:
        a.create_peering("a", "web", "to-db", "db", "b")
        a.create_peering("a", "api", "to-db", "db", "b")
    listed = json.loads(netpeer(netpeerd, tenants["b"], "peering", "requests", "db", "-n", "b", "-o", "json").stdout)
    assert [r["requester_network"] for r in listed] == ["api", "web"]
    table = netpeer(netpeerd, tenants["b"], "peering", "requests", "-n", "b").stdout
    assert listed[0]["id"] in table and "a/web" in table
    api, web = listed
    out = json.loads(netpeer(netpeerd, tenants["b"], "peering", "dismiss", "db", api["id"], "-n", "b",
                             "-o", "json").stdout)
    assert out == {"dismissed": f"b/db/{api['id']}"}
    accepted = json.loads(netpeer(netpeerd, tenants["b"], "peering", "accept", "db", web["id"], "--name", "web",
                                  "-n", "b", "-o", "json").stdout)
    assert accepted["phase"] == "Bound" and accepted["name"] == "web"
    assert json.loads(netpeer(netpeerd, tenants["b"], "peering", "requests", "-n", "b", "-o", "json").stdout) == []
    # The dismissed requester's half is as it was.
    with netpeerd.tenant("a") as a:
        p = a.get_peering("a", "api", "to-db")
        assert (p["phase"], p["reason"]) == ("Pending", "AwaitingRemote")


def test_pages_of_the_api(netpeerd, tenants):
    from netpeer.v1 import netpeer_pb2 as pb
    with netpeerd.client() as admin:
        admin.create_peerings([dict(namespace="a", network="web", name=f"p{i:02d}", remote_network=f"n{i:02d}",
                                    remote_namespace="b") for i in range(25)])
        seen, token = [], ""
        while True:
            r = admin._call(admin._net.ListPeeringRequests, pb.ListPeeringRequestsRequest(
                parent="namespaces/b", page_size=10, page_token=token))
            assert len(r.requests) <= 10 and r.revision > 0
            seen += [x.name.split("/")[3] for x in r.requests]
            token = r.next_page_token
            if not token:
                break
        assert seen == [f"n{i:02d}" for i in range(25)]
        assert len(admin.list_peering_requests("b", "n07")) == 1


def test_watch_delivers_request_events_to_the_target_only(netpeerd, tenants):
    seen: dict[str, list] = {"a": [], "b": [], "c": []}
    stop = threading.Event()

    def follow(ns):
        with netpeerd.tenant(ns) as client:
            for e in client.watch(ns, timeout=20):
                seen[ns].append(e)
                if stop.is_set():
                    return

    threads = [threading.Thread(target=follow, args=(ns,), daemon=True) for ns in "abc"]
    for t in threads:
        t.start()
    wait_until(lambda: all(seen[ns] for ns in "abc"), 10, "each watch's bookmark")
    with netpeerd.tenant("a") as a, netpeerd.tenant("b") as b:
        a.create_peering("a", "web", "to-db", "db", "b")
        [r] = b.list_peering_requests("b")
        b.dismiss_peering_request("b", "db", r["id"])
        a.update_network("a", "web", description="marker")   # a last event for a's watch
    wait_until(lambda: any(e.get("kind") == "network" for e in seen["a"][1:]), 10, "a's last event")
    wait_until(lambda: len([e for e in seen["b"] if e.get("kind") == "peering_request"]) == 2, 10,
               "b's request events")
    stop.set()
    requests_b = [(e["type"], e["name"]) for e in seen["b"] if e.get("kind") == "peering_request"]
    assert requests_b == [("Created", r["id"]), ("Deleted", r["id"])]
    created = next(e for e in seen["b"] if e.get("kind") == "peering_request")
    assert created["peering_request"]["requester_network"] == "web"
    assert not [e for e in seen["a"] if e.get("kind") == "peering_request"]
    assert [e["type"] for e in seen["c"]] == ["Bookmark"]
