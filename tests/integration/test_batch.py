"""Many consents in one call (``BatchCreatePeerings``) through the real gRPC
API and the real ``netpeer`` command, on real OVN: the same OVN rows as one
call per consent, all or none, one-line errors naming the request."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest

from netpeer import errors
from netpeer.ovn import names


def kinds(d) -> collections.Counter:
    """netpeer's OVN rows, counted by table and kind."""
    return collections.Counter(f"{table}/{r[names.KIND]}" for table, rows in d.owned_rows().items() for r in rows)


def dump(d) -> dict[str, list[str]]:
    """netpeer's OVN rows, in an order that does not depend on the replica's."""
    return {table: sorted(map(repr, rows)) for table, rows in d.owned_rows().items()}


def half(ns, net, rns, rnet):
    return dict(namespace=ns, network=net, name=f"to-{rns}-{rnet}", remote_network=rnet, remote_namespace=rns)


def test_a_batch_writes_per_pair_what_single_calls_write(netpeerd):
    admin = netpeerd.client()
    uids = {}
    for i in range(3):
        uids["b1", i] = admin.create_network("b1", f"n{i}", [f"10.1.{i}.0/24"])["uid"]
        uids["b2", i] = admin.create_network("b2", f"n{i}", [f"10.2.{i}.0/24"])["uid"]
    before = kinds(netpeerd)
    admin.create_peering("b1", "n0", "to-b2-n0", "n0", "b2")
    admin.create_peering("b2", "n0", "to-b1-n0", "n0", "b1")
    one_pair = kinds(netpeerd) - before
    assert one_pair, "a Bound pair wrote no OVN row"

    a, b = netpeerd.tenant("b1"), netpeerd.tenant("b2")
    first = a.create_peerings([half("b1", f"n{i}", "b2", f"n{i}") for i in (1, 2)])
    assert [(p["network"], p["name"], p["phase"]) for p in first] == [
        ("n1", "to-b2-n1", "Pending"), ("n2", "to-b2-n2", "Pending")]
    second = b.create_peerings([half("b2", f"n{i}", "b1", f"n{i}") for i in (1, 2)])
    assert [(p["network"], p["phase"]) for p in second] == [("n1", "Bound"), ("n2", "Bound")]
    assert a.get_peering("b1", "n2", "to-b2-n2")["phase"] == "Bound"

    grown = kinds(netpeerd) - before
    assert grown == collections.Counter({k: 3 * v for k, v in one_pair.items()})
    for i in range(3):
        routes = netpeerd.ovn.nbctl("lr-route-list", names.router(uids["b1", i]))
        assert f"10.2.{i}.0/24" in routes, routes


def test_a_failing_batch_changes_nothing_and_names_the_request(netpeerd):
    admin = netpeerd.client()
    for i in range(3):
        admin.create_network("c1", f"n{i}", [f"10.3.{i}.0/24"])
        admin.create_network("c2", f"n{i}", [f"10.4.{i}.0/24"])
    admin.create_peerings([half("c1", f"n{i}", "c2", f"n{i}") for i in range(3)])
    rows, peerings = dump(netpeerd), admin.list_peerings("c2", "n0")
    # The third names a network that does not exist: the first two would bind, and do not.
    bad = [half("c2", f"n{i}", "c1", f"n{i}") for i in range(2)] + [half("c2", "nope", "c1", "n2")]
    with pytest.raises(errors.NotFound) as exc:
        admin.create_peerings(bad)
    assert str(exc.value) == "requests[2]: network c2/nope not found"
    # A token that does not grant the namespace of one request.
    with pytest.raises(errors.PermissionDenied, match=r"^requests\[1\]: namespace: token does not grant"):
        netpeerd.tenant("c2").create_peerings([half("c2", "n0", "c1", "n0"), half("c1", "n1", "c2", "n1")])
    with pytest.raises(errors.InvalidArgument, match=r"^requests: 1001 requests in one batch; the most is 1000"):
        admin.create_peerings([half("c2", "n0", "c1", "n0")] * 1001)
    assert dump(netpeerd) == rows and admin.list_peerings("c2", "n0") == peerings
    assert [p["phase"] for p in admin.list_peerings("c1", "n0")] == ["Pending"]


def test_the_cli_batch_creates_from_a_file(netpeerd, tmp_path):
    admin = netpeerd.client()
    for i in range(2):
        admin.create_network("d1", f"n{i}", [f"10.5.{i}.0/24"])
        admin.create_network("d2", f"n{i}", [f"10.6.{i}.0/24"])
    env = {**os.environ, "NETPEER_ENDPOINT": netpeerd.endpoint, "NETPEER_TOKEN": netpeerd.token("d1"),
           "NETPEER_NAMESPACE": "d1"}

    def netpeer(*args, stdin=None):
        return subprocess.run([sys.executable, "-m", "netpeer.cli.main", *args], capture_output=True, text=True,
                              env=env, timeout=120, input=stdin)

    plan = tmp_path / "peerings.txt"
    plan.write_text("# network  peering  remote\nn0 to-d2-n0 d2/n0\n\nn1 to-d2-n1 d2/n1   # the second\n")
    done = netpeer("peering", "batch-create", str(plan), "--ttl", "1h", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert {p["name"] for p in admin.list_peerings("d1", "n0") + admin.list_peerings("d1", "n1")} == {
        "to-d2-n0", "to-d2-n1"}
    bad = netpeer("peering", "batch-create", "-", stdin="n0 to-x\n")
    assert bad.returncode != 0 and bad.stderr.strip() == (
        "error: -:1: 'n0 to-x' must be NETWORK PEERING [SITE:][REMOTE_NS/]REMOTE_NETWORK"), bad.stderr
    bad = netpeer("peering", "batch-create", "-", stdin="# ok\nn0 to-x d2/n0\nn1 to-y a/b/c\n")
    assert bad.returncode != 0 and bad.stderr.strip() == (
        "error: -:3: remote: 'a/b/c' must be [SITE:][REMOTE_NS/]REMOTE_NETWORK"), bad.stderr
    empty = netpeer("peering", "batch-create", "-", stdin="# nothing yet\n")
    assert empty.returncode != 0 and "has no line NETWORK PEERING REMOTE" in empty.stderr, empty.stderr
    assert admin.list_peerings("d1", "n0")[0]["name"] == "to-d2-n0" and len(admin.list_peerings("d1", "n0")) == 1
    again = netpeer("peering", "batch-create", str(plan))
    assert again.returncode != 0 and again.stderr.strip().splitlines() == [again.stderr.strip()]
    assert "requests[0]: peering d1/n0/to-d2-n0 already exists" in again.stderr
    # The table names each peering's network: a batch spans networks.
    shown = netpeer("peering", "batch-create", "-", stdin="n0 to-d2-n1 d2/n1\nn1 to-d2-n0 d2/n0\n")
    assert shown.returncode == 0, shown.stderr
    rows = [[c.strip() for c in line.split("|")[1:3]] for line in shown.stdout.splitlines() if line.startswith("|")]
    assert rows == [["NETWORK", "NAME"], ["n0", "to-d2-n1"], ["n1", "to-d2-n0"]], shown.stdout
