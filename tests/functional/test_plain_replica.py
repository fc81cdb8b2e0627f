"""The plain replica (``netpeer.ovn.plain``) against python-ovs's own, on a
real ovsdb-server.

The plain replica is fed the server's own messages over a bare JSON-RPC
connection made here (``get_schema``, ``monitor_cond``, then ``update2``
notifications). The oracle is python-ovs's stock IDL replicating the same
database at the same time, its Datums read through python-ovs's own types:
every row, every column, the same values, through the initial replication
and the inserts, changes (to, from and between defaults, of every kind of
column) and deletes that follow.
"""

from __future__ import annotations

from netpeer.ovn.plain import PlainReplica
from tests.functional.nbfeed import Feed
from tests.functional.test_repair import bind
from tests.functional.test_replica import MOVING, StockIdl, add_their_rows, catch_up, change_their_rows, open_idl


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


def sync(nb, idl, feed) -> None:
    cfg = str(int(nb.nbctl("get", "NB_Global", ".", "nb_cfg").strip()) + 1)
    nb.nbctl("set", "NB_Global", ".", f"nb_cfg={cfg}")
    catch_up(idl, cfg)
    feed.catch_up(cfg)


def test_plain_replica_matches_python_ovs(netpeerd):
    nb = netpeerd.ovn
    bind(netpeerd)
    add_their_rows(nb)   # and an optional value, set, changed and cleared below
    nb.nbctl("lrp-add", "their-router", "rp0", "00:00:00:00:01:00", "192.0.2.253/24", "peer=rp9")
    idl, feed = open_idl(StockIdl, nb.nb_remote), Feed(nb.nb_remote)
    try:
        replica = feed.start()
        sync(nb, idl, feed)
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
        sync(nb, idl, feed)
        second = oracle(idl)
        assert second != first
        assert plain_view(replica) == second

        nb.nbctl("clear", "Logical_Router_Port", "rp0", "peer")
        nb.nbctl("set", "Logical_Router", "renamed-later", "name=renamed")
        nb.nbctl("set", "Address_Set", "their_set", "addresses=[]")
        nb.nbctl("lsp-del", "p2")
        with netpeerd.client() as c:   # netpeer's own rows go, in one transaction
            c.delete_peering("team-a", "net-a", "to-b")
        sync(nb, idl, feed)
        third = oracle(idl)
        assert third != second
        assert plain_view(replica) == third
        assert replica.by_name("Logical_Router", "renamed-later") == ()
        assert len(replica.by_name("Logical_Router", "renamed")) == 1
    finally:
        feed.close()
        idl.close()
