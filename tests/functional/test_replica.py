"""netpeerd's NB replica against python-ovs's own, on a real ovsdb-server.

netpeerd reads the server's updates with its own decoder (``netpeer.ovn._idl``:
it shares the values that repeat between rows, to keep the replica small).
The oracle is python-ovs's stock IDL replicating the same database at the same
time: every row, every column, the same values, through the initial
replication and the inserts, changes and deletes that follow.
"""

from __future__ import annotations

import gc
import time
import weakref

import ovs.poller
import pytest
from ovsdbapp.backend.ovs_idl import connection, idlutils

from netpeer.ovn import _idl
from netpeer.ovn.backend import COLUMNS, NB_SCHEMA
from tests.functional.test_repair import bind


class StockIdl(connection.OvsdbIdl):
    """python-ovs's IDL as ovsdbapp uses it, nothing replaced."""

    def cooperative_yield(self):
        pass


def open_idl(cls, remote: str):
    helper = idlutils.get_schema_helper(remote, NB_SCHEMA)
    for table, columns in COLUMNS.items():
        helper.register_columns(table, columns)
    return cls(remote, helper)


def catch_up(idl, expected_nb_cfg: str | None = None, timeout: float = 30.0) -> None:
    """Run the IDL until it is connected and has seen everything up to now
    (the NB_Global nb_cfg bump made just before)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        idl.run()
        glob = next(iter(idl.tables["NB_Global"].rows.values()), None)
        if idl.has_ever_connected() and glob is not None and \
                (expected_nb_cfg is None or str(glob.nb_cfg) == expected_nb_cfg):
            return
        poller = ovs.poller.Poller()
        idl.wait(poller)
        poller.timer_wait(100)
        poller.block()
    raise AssertionError(f"the IDL did not catch up within {timeout} s")


# Columns ovn-northd changes on its own time (the two IDLs may see different moments).
MOVING = {("NB_Global", "sb_cfg"), ("NB_Global", "hv_cfg")}


def replica(idl) -> dict:
    """Every row's stored values, as OVSDB JSON, by table and uuid."""
    return {name: {str(uuid): {col: datum.to_json() for col, datum in row._data.items() if (name, col) not in MOVING}
                   for uuid, row in table.rows.items()}
            for name, table in idl.tables.items()}


def values(idl) -> dict:
    """Every row's values, defaults included (a column set to its default
    by an update stays stored; one that arrived empty is not)."""
    return {name: {str(uuid): {col: row._data[col].to_json() for col in table.columns if (name, col) not in MOVING}
                   for uuid, row in table.rows.items()}
            for name, table in idl.tables.items()}


def sync(nb, idls) -> None:
    """Bump nb_cfg (a change every IDL sees last) and wait for all of them."""
    cfg = str(int(nb.nbctl("get", "NB_Global", ".", "nb_cfg").strip()) + 1)
    nb.nbctl("set", "NB_Global", ".", f"nb_cfg={cfg}")
    for idl in idls:
        catch_up(idl, cfg)


def add_their_rows(nb) -> None:
    """Rows netpeer does not write, with the shapes a decoder can get wrong:
    an optional reference, empty and one-element sets, integers, booleans,
    maps with shared and unique values."""
    nb.nbctl("lr-add", "their-router", "--", "set", "Logical_Router", "their-router",
             "external_ids:team=x", "external_ids:note=one", "options:always_learn_from_arp_request=false")
    nb.nbctl("ls-add", "their-switch", "--", "lsp-add", "their-switch", "p1",
             "--", "lsp-set-addresses", "p1", "00:00:00:00:00:01 192.0.2.1", "00:00:00:00:00:02")
    nb.nbctl("lr-policy-add", "their-router", "100", "ip4.src == 192.0.2.0/24", "drop")
    nb.nbctl("create", "Address_Set", "name=their_set", "addresses=[]")


def change_their_rows(nb) -> None:
    """Inserts, changes (to, from and between defaults) and deletes of those rows."""
    nb.nbctl("lrp-add", "their-router", "rp1", "00:00:00:00:01:01", "192.0.2.254/24", "198.51.100.1/24")
    nb.nbctl("lsp-add", "their-switch", "p2", "--", "lsp-set-type", "p2", "router")
    nb.nbctl("set", "Logical_Router", "their-router", "external_ids:team=y")
    nb.nbctl("remove", "Logical_Router", "their-router", "external_ids", "note")
    nb.nbctl("lsp-set-addresses", "p1")
    nb.nbctl("set", "Address_Set", "their_set", "addresses=\"10.9.0.0/16\"")
    nb.nbctl("lr-policy-add", "their-router", "200", "ip4.dst == 203.0.113.0/24", "allow")
    nb.nbctl("lr-policy-del", "their-router", "100", "ip4.src == 192.0.2.0/24")


@pytest.mark.parametrize("sample", [None, 2], ids=["memo-default", "memo-given-up"])
def test_replica_matches_python_ovs(netpeerd, monkeypatch, sample):
    if sample is not None:   # every column whose values do not repeat gives its memo up at once
        monkeypatch.setattr(_idl._Memo, "SAMPLE", sample)
    nb = netpeerd.ovn
    bind(netpeerd)
    add_their_rows(nb)
    ours, stock = open_idl(_idl.Idl, nb.nb_remote), open_idl(StockIdl, nb.nb_remote)
    try:
        sync(nb, [ours, stock])
        first = replica(stock)
        assert sum(len(rows) for rows in first.values()) > 20
        assert replica(ours) == first

        change_their_rows(nb)
        sync(nb, [ours, stock])
        second = replica(stock)
        assert second != first
        assert replica(ours) == second
    finally:
        ours.close()
        stock.close()


def test_rows_written_by_netpeerd_keep_no_transaction_state(netpeerd):
    """netpeerd's own transactions go through the replica's rows (their
    per-transaction maps are made on demand and given back after the
    commit): the replica still equals python-ovs's afterwards, later writes
    to the same rows still land, and no row keeps a map at rest."""
    nb = netpeerd.ovn
    bind(netpeerd)
    with netpeerd.client() as c:   # rewrites rows netpeerd wrote a moment ago
        c.delete_peering("team-a", "net-a", "to-b")
    backend_idl = netpeerd.backend._api.idl
    stock = open_idl(StockIdl, nb.nb_remote)
    try:
        sync(nb, [stock])
        deadline = time.monotonic() + 10
        while values(backend_idl) != values(stock) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert values(backend_idl) == values(stock)
        policies = nb.nbctl("--bare", "--columns=external_ids", "list", "Logical_Router_Policy")
        assert "to-b" not in policies and "allow-in" not in policies
        kept = [(name, str(row.uuid), key) for name, table in backend_idl.tables.items()
                for row in table.rows.values() for key in ("_changes", "_mutations", "_prereqs")
                if row.__dict__.get(key) == {}]
        written = sum(len(t.rows) for n, t in backend_idl.tables.items() if n.startswith("Logical_"))
        assert written >= 8   # both networks still have their router, switch and LAN ports
        assert not kept, f"{len(kept)} per-transaction maps left on replica rows, e.g. {kept[:3]}"
    finally:
        stock.close()


def netpeer_rows(idl) -> dict:
    """(table, uuid) -> a weak reference to each row of a network (no strong one is kept)."""
    return {(name, str(row.uuid)): weakref.ref(row)
            for name, table in idl.tables.items() if "external_ids" in table.columns
            for row in table.rows.values() if "netpeer:network" in _idl.read_column(row, "external_ids")}


def test_deleted_rows_are_freed_without_the_collector(netpeerd):
    """netpeerd leaves its replica out of the garbage collector once it is
    whole (``gc.freeze``, ``netpeer serve``), which is only safe while a row
    the NB deletes is freed when the replica drops it: no cycle may hold it.
    Checked with the collector off, for every kind of row netpeer writes."""
    bind(netpeerd)
    idl = netpeerd.backend._api.idl
    ours = netpeer_rows(idl)
    assert {name for name, _ in ours} >= {"Logical_Router", "Logical_Router_Port", "Logical_Router_Static_Route",
                                          "Logical_Router_Policy", "Address_Set"}
    gc.collect()
    gc.disable()
    try:
        with netpeerd.client() as c:
            c.delete_peering("team-a", "net-a", "to-b")
            c.delete_peering("team-b", "net-b", "to-a")
            c.delete_network("team-a", "net-a")
            c.delete_network("team-b", "net-b")
        deadline = time.monotonic() + 10
        while any(uuid in {str(u) for u in idl.tables[name].rows} for name, uuid in ours) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        alive = sorted(key for key, ref in ours.items() if ref() is not None)
        assert not alive, f"deleted rows still held after the replica dropped them: {alive}"
    finally:
        gc.enable()
