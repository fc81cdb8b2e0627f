"""The networks page reads the namespace's halves with one ListPeerings of
the whole namespace (``networks/-``, paged), not one per peered network:
counted by netpeerd's own metrics while a real netpeerd serves the page.
And that listing itself: every network's halves in (network, name) order,
page by page, for the namespace's tokens only."""

from __future__ import annotations

import re
import socket

import pytest

from netpeer import errors
from netpeer.v1 import netpeer_pb2 as pb
from tests.console.test_console import request
from tests.integration.test_observe import scrape
from tests.support import start_netpeerd

PEERED = 24


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def peered(ovn, state_dir):
    netpeerd = start_netpeerd(ovn, state_dir, console_listen="127.0.0.1:0",
                              metrics_listen=f"127.0.0.1:{_free_port()}")
    try:
        with netpeerd.client() as c:
            for i in range(PEERED + 1):   # one network of team-a with no peering
                c.create_network("team-a", f"net-{i:02d}", [f"10.1.{i}.0/24"])
            for i in range(PEERED):
                c.create_network("team-b", f"peer-{i:02d}", [f"10.2.{i}.0/24"])
            c.create_peerings([{"namespace": "team-a", "network": f"net-{i:02d}", "name": f"to-b-{i}",
                                "remote_namespace": "team-b", "remote_network": f"peer-{i:02d}"}
                               for i in range(PEERED)])
        yield netpeerd
    finally:
        netpeerd.stop()


def _sign_in(netpeerd, token: str) -> str:
    status, headers, page = request(netpeerd, "GET", "/signin")
    cookie = headers["Set-Cookie"].split(";")[0].split("=", 1)[1]
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    status, headers, _ = request(netpeerd, "POST", "/signin", cookie=cookie, body={"csrf": csrf, "token": token})
    assert status == 303
    return headers["Set-Cookie"].split(";")[0].split("=", 1)[1]


def test_the_networks_page_lists_the_namespaces_peerings_in_one_call(peered):
    metrics = f"http://{peered.daemon.config.metrics_listen}/metrics"
    cookie = _sign_in(peered, peered.token("team-a"))
    key = 'netpeer_rpc_requests_total{code="OK",method="ListPeerings"}'
    before = scrape(metrics).get(key, 0)
    status, _, page = request(peered, "GET", "/networks?namespace=team-a", cookie=cookie)
    calls = scrape(metrics).get(key, 0) - before
    assert status == 200
    assert all(f"to-b-{i}" in page for i in range(PEERED))
    assert calls == 1, f"the page of {PEERED} peered networks made {calls:g} ListPeerings calls"


def test_listing_every_network_of_a_namespace_pages_in_network_and_name_order(peered):
    with peered.client() as c:
        c.create_peering("team-a", "net-03", "also-b", "peer-04", "team-b")
        expected = sorted([(f"net-{i:02d}", f"to-b-{i}") for i in range(PEERED)] + [("net-03", "also-b")])
        got, token, pages = [], "", 0
        while True:
            r = c._call(c._net.ListPeerings, pb.ListPeeringsRequest(
                parent="namespaces/team-a/networks/-", page_size=5, page_token=token))
            got += [tuple(p.name.split("/")[3::2]) for p in r.peerings]
            pages += 1
            token = r.next_page_token
            if not token:
                break
        assert got == expected and pages == 5
        assert [(p["network"], p["name"]) for p in c.list_peerings("team-a", None)] == expected
        assert c.list_peerings("team-c", None) == []
        one = c._call(c._net.ListPeerings, pb.ListPeeringsRequest(parent="namespaces/team-a/networks/net-03",
                                                                  page_size=1))
        with pytest.raises(errors.InvalidArgument, match="^page_token: .* is not a page token from a previous call"):
            c._call(c._net.ListPeerings, pb.ListPeeringsRequest(parent="namespaces/team-a/networks/-",
                                                                page_token=one.next_page_token))
    with peered.tenant("team-b") as b:
        with pytest.raises(errors.PermissionDenied):
            b.list_peerings("team-a", None)
        assert {p["name"] for p in b.list_peerings("team-b", None)} == set()
