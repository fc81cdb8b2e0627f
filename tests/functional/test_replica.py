"""netpeerd's NB replica against python-ovs's own, on a real ovsdb-server.

netpeerd keeps the rows it monitors as plain values (``netpeer.ovn.plain``),
fed by its own connection (``netpeer.ovn.connection``). The oracle is
python-ovs's stock IDL replicating the same database at the same time, its
Datums read through python-ovs's own types: every row, every column, the
same values, through the initial replication and the inserts, changes (to,
from and between defaults, of every kind of column) and deletes that
follow, netpeerd's own writes and a reconnection.
"""

from __future__ import annotations

import time

import ovs.poller
from ovsdbapp.backend.ovs_idl import connection, idlutils

from netpeer.ovn.backend import COLUMNS, NB_SCHEMA
from netpeer.ovn.plain import PlainReplica
from tests.functional.test_repair import bind
from tests.support import wait_until


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


def oracle(idl) -> dict:
    """python-ovs's rows as plain values, read through its own column types
    (sets compared without their order, which OVSDB does not keep)."""
    out = {}
    for name, table in idl.tables.items():
        rows = {}
        for uuid, row in table.rows.items():
            values = {}
            for col, column in table.columns.items():
                if (name, col) in MOVING:
                    continue
                t, datum = column.type, row._data.get(col)
                atoms = {} if datum is None else datum.values
                key_uuid = t.key.type.to_string() == "uuid"
                value_uuid = t.value is not None and t.value.type.to_string() == "uuid"
                keys = [str(k.value) if key_uuid else k.value for k in atoms]
                if t.is_map():
                    values[col] = {str(k.value) if key_uuid else k.value: str(v.value) if value_uuid else v.value
                                   for k, v in atoms.items()}
                elif t.n_max == 1:
                    values[col] = keys[0] if keys else None
                else:
                    values[col] = sorted(keys, key=repr)
            rows[str(uuid)] = values
        out[name] = rows
    return out


def plain_view(replica: PlainReplica) -> dict:
    return {name: {uuid: {col: sorted(v, key=repr) if isinstance(v, tuple) else v
                          for col, v in row.items() if (name, col) not in MOVING}
                   for uuid, row in rows.items()}
            for name, rows in replica.tables.items()}


def both(nb, idl, netpeerd) -> PlainReplica:
    """Bumps nb_cfg (a change every replica sees last), waits for both; netpeerd's replica."""
    cfg = int(nb.nbctl("get", "NB_Global", ".", "nb_cfg").strip()) + 1
    nb.nbctl("set", "NB_Global", ".", f"nb_cfg={cfg}")
    catch_up(idl, str(cfg))
    wait_until(lambda: netpeerd.backend.connected and netpeerd.backend.nb_cfg()[0] == cfg, 30,
               "netpeerd's replica did not catch up", step=0.05)
    return netpeerd.backend._conn.replica


def test_netpeerd_replica_matches_python_ovs(netpeerd):
    nb = netpeerd.ovn
    bind(netpeerd)
    add_their_rows(nb)   # and an optional value, set, changed and cleared below
    nb.nbctl("lrp-add", "their-router", "rp0", "00:00:00:00:01:00", "192.0.2.253/24", "peer=rp9")
    idl = open_idl(StockIdl, nb.nb_remote)
    try:
        replica = both(nb, idl, netpeerd)
        first = oracle(idl)
        assert sum(len(rows) for rows in first.values()) > 20
        assert plain_view(replica) == first
        ports = {row["name"]: row for row in replica.tables["Logical_Router_Port"].values()}
        assert ports["rp0"]["peer"] == "rp9" and ports["rp0"]["networks"] == ("192.0.2.253/24",)
        assert ports["rp0"]["ha_chassis_group"] is None

        change_their_rows(nb)
        nb.nbctl("set", "Logical_Router_Port", "rp0", "peer=rp8")
        nb.nbctl("set", "Logical_Router_Port", "rp1", "peer=rp0")
        nb.nbctl("lr-add", "renamed-later")
        replica = both(nb, idl, netpeerd)
        second = oracle(idl)
        assert second != first
        assert plain_view(replica) == second

        nb.nbctl("clear", "Logical_Router_Port", "rp0", "peer")
        nb.nbctl("set", "Logical_Router", "renamed-later", "name=renamed")
        nb.nbctl("set", "Address_Set", "their_set", "addresses=[]")
        nb.nbctl("lsp-del", "p2")
        with netpeerd.client() as c:   # netpeer's own rows go, in one transaction
            c.delete_peering("team-a", "net-a", "to-b")
        replica = both(nb, idl, netpeerd)
        third = oracle(idl)
        assert third != second
        assert plain_view(replica) == third
        assert replica.by_name("Logical_Router", "renamed-later") == ()
        assert len(replica.by_name("Logical_Router", "renamed")) == 1

        # A lost connection: netpeerd reconnects, replaces its replica, and
        # the repair sweep is told that only a full comparison can say what changed.
        netpeerd.backend.take_changes()
        seqno = netpeerd.backend._conn.seqno
        netpeerd.backend._conn._sock.shutdown(2)
        nb.nbctl("lr-del", "renamed")   # while it is away
        wait_until(lambda: netpeerd.backend._conn.seqno >= seqno + 2 and netpeerd.backend.connected, 30,
                   "netpeerd did not reconnect", step=0.05)
        assert netpeerd.backend.take_changes() is None
        fresh = both(nb, idl, netpeerd)
        assert fresh is not replica
        assert plain_view(fresh) == oracle(idl) != third
    finally:
        idl.close()
