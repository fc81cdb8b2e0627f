"""The repair sweep against a real ovsdb-server: drift on our rows is undone,
orphans go, and rows that are not ours are never touched."""

from __future__ import annotations

from netpeer.ovn import names
from tests.support import wait_until


def bind(d):
    a, b = d.tenant("team-a"), d.tenant("team-b")
    na = a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    nb = b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    return na, nb


def nb_dump(d):
    tables = ["Logical_Router", "Logical_Router_Port", "Logical_Router_Static_Route", "Logical_Router_Policy",
              "Logical_Switch", "Logical_Switch_Port", "Address_Set"]
    cols = {"Logical_Router": "name,external_ids", "Logical_Router_Port": "name,mac,networks,peer",
            "Logical_Router_Static_Route": "ip_prefix,nexthop,output_port", "Logical_Router_Policy": "priority,match,action",
            "Logical_Switch": "name", "Logical_Switch_Port": "name,type,options", "Address_Set": "name,addresses"}
    return {t: sorted(d.ovn.nbctl("--format=csv", "--data=bare", "--no-headings", f"--columns={cols[t]}",
                                  "list", t).splitlines()) for t in tables}


def test_sync_is_idempotent(netpeerd):
    bind(netpeerd)
    before = nb_dump(netpeerd)
    report = netpeerd.service.repair()
    assert report.repaired_rows == 0 and report.errors == 0
    assert nb_dump(netpeerd) == before


def test_deleted_and_changed_rows_come_back(netpeerd):
    na, nb = bind(netpeerd)
    good = nb_dump(netpeerd)
    lr = names.router(na["uid"])
    netpeerd.ovn.nbctl("lr-route-del", lr, "10.2.0.0/24")
    netpeerd.ovn.nbctl("lr-policy-del", lr, "1990", f'inport == {{"{names.peer_router_port(na["uid"], nb["uid"])}"}}')
    netpeerd.ovn.nbctl("set", "Logical_Router_Port", names.lan_router_port(nb["uid"]), "mac=\"0a:00:00:00:00:01\"")
    netpeerd.ovn.nbctl("set", "Address_Set", names.address_set(nb["uid"], 4), "addresses=\"192.0.2.0/24\"")
    netpeerd.ovn.nbctl("ls-del", names.switch(na["uid"]))
    assert nb_dump(netpeerd) != good
    report = netpeerd.service.repair()
    assert report.repaired_rows >= 5 and report.errors == 0
    assert nb_dump(netpeerd) == good


def test_foreign_rows_are_left_alone(netpeerd):
    na, _ = bind(netpeerd)
    lr = names.router(na["uid"])
    # Someone else's router, a hand-made route on our router, and a row that
    # claims another owner: none is ours.
    netpeerd.ovn.nbctl("lr-add", "their-router")
    netpeerd.ovn.nbctl("lr-route-add", lr, "192.0.2.0/24", "10.1.0.254")
    netpeerd.ovn.nbctl("--", "--id=@r", "create", "Logical_Router", "name=other-owner",
                       "external_ids:netpeer\\:owner=someone-else", "external_ids:netpeer\\:kind=router",
                       f"external_ids:netpeer\\:network={na['uid']}")
    before = nb_dump(netpeerd)
    netpeerd.service.repair()
    after = nb_dump(netpeerd)
    assert after == before
    assert "192.0.2.0/24" in netpeerd.ovn.nbctl("lr-route-list", lr)


def test_orphans_are_removed(netpeerd):
    """Rows we own for a network the store does not know (e.g. after a crash
    between the OVN commit and the store commit) are removed by the sweep."""
    na, _ = bind(netpeerd)
    netpeerd.ovn.nbctl("--", "create", "Logical_Switch", "name=np-ls-ghost",
                       "external_ids:netpeer\\:owner=netpeer", "external_ids:netpeer\\:kind=switch",
                       "external_ids:netpeer\\:id=ls/ghost", "external_ids:netpeer\\:network=ghost")
    netpeerd.ovn.nbctl("--", "--id=@r", "create", "Logical_Router_Static_Route", "ip_prefix=10.99.0.0/24",
                       "nexthop=10.1.0.9", "external_ids:netpeer\\:owner=netpeer", "external_ids:netpeer\\:kind=route",
                       "external_ids:netpeer\\:id=route/ghost", "external_ids:netpeer\\:network=ghost",
                       "--", "add", "Logical_Router", names.router(na["uid"]), "static_routes", "@r")
    # The sweep reads netpeerd's IDL replica, which gets the rows above
    # asynchronously (a loaded machine showed it one row short): wait for both.
    wait_until(lambda: {"ls/ghost", "route/ghost"} <= {r.get(names.ID) for rows in netpeerd.owned_rows().values()
                                                       for r in rows}, 10, "netpeerd's replica never showed both")
    report = netpeerd.service.repair()
    assert report.repaired_rows == 2
    assert "np-ls-ghost" not in netpeerd.ovn.nbctl("ls-list")
    assert "10.99.0.0/24" not in netpeerd.ovn.nbctl("lr-route-list", names.router(na["uid"]))


def owned_count(d, table: str) -> int:
    """How many rows of ``table`` netpeerd's replica holds as netpeer's."""
    return len(d.owned_rows().get(table, []))


def wait_replica(d, table: str, count: int, timeout: float = 10.0) -> None:
    """Waits until netpeerd's replica has seen hand edits of ``table``: a
    repair started before it would compare against the rows as they were."""
    wait_until(lambda: owned_count(d, table) == count, timeout,
               f"netpeerd's replica never showed {count} rows of {table}")


def test_one_bad_network_does_not_stop_the_sweep(netpeerd):
    na, nb = bind(netpeerd)
    routers, routes = owned_count(netpeerd, "Logical_Router"), owned_count(netpeerd, "Logical_Router_Static_Route")
    # A foreign row squats on the name of A's router: A cannot be repaired
    # without touching it, B still is.
    netpeerd.ovn.nbctl("lr-del", names.router(na["uid"]))
    netpeerd.ovn.nbctl("lr-add", names.router(na["uid"]))
    netpeerd.ovn.nbctl("lr-route-del", names.router(nb["uid"]), "10.1.0.0/24")
    # A's routes went with its router; B lost one more.
    wait_replica(netpeerd, "Logical_Router", routers - 1)
    wait_replica(netpeerd, "Logical_Router_Static_Route", routes - 2)
    report = netpeerd.service.repair()
    assert report.errors >= 1
    assert "10.1.0.0/24" in netpeerd.ovn.nbctl("lr-route-list", names.router(nb["uid"]))
    assert "external_ids        : {}" in netpeerd.ovn.nbctl("list", "Logical_Router", names.router(na["uid"]))
