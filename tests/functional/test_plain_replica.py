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

import socket
import time

import ovs.json

from netpeer.ovn.backend import COLUMNS, NB_SCHEMA
from netpeer.ovn.plain import PlainReplica, columns_from_schema
from tests.functional.test_repair import bind
from tests.functional.test_replica import MOVING, StockIdl, catch_up, open_idl


class Feed:
    """A bare JSON-RPC connection to the NB that feeds a PlainReplica."""

    def __init__(self, remote: str):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(remote.removeprefix("unix:"))
        self.sock.settimeout(30)
        self.pending = b""
        self.next_id = 0
        self.replica: PlainReplica | None = None

    def call(self, method: str, params: list):
        self.next_id += 1
        rid = self.next_id
        self.sock.sendall(ovs.json.to_string({"method": method, "params": params, "id": rid}).encode())
        while True:
            msg = self.receive()
            if msg.get("method") == "update2":
                self.replica.apply(msg["params"][1])
            elif msg.get("method") == "echo":
                self.sock.sendall(ovs.json.to_string({"result": msg["params"], "id": msg["id"]}).encode())
            elif msg.get("id") == rid:
                assert msg.get("error") is None, msg
                return msg["result"]

    def receive(self) -> dict:
        parser = ovs.json.Parser(check_trailer=False)
        while True:
            if not self.pending:
                self.pending = self.sock.recv(1 << 16)
                assert self.pending, "the NB closed the connection"
            self.pending = self.pending[parser.feed(self.pending.decode()):]
            if parser.is_done():
                msg = parser.finish()
                assert not isinstance(msg, str), msg
                return msg

    def start(self, named=("Logical_Router", "Logical_Switch", "Address_Set")) -> PlainReplica:
        schema = self.call("get_schema", [NB_SCHEMA])
        self.replica = PlainReplica(columns_from_schema(schema, COLUMNS), named=named)
        self.replica.apply(self.call("monitor_cond", [NB_SCHEMA, None,
                                                      {t: [{"columns": c}] for t, c in COLUMNS.items()}]))
        return self.replica

    def catch_up(self, nb_cfg: str, timeout: float = 30.0) -> None:
        """Reads updates until NB_Global's nb_cfg is ``nb_cfg`` (an echo is the round trip)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            glob = next(iter(self.replica.tables["NB_Global"].values()), None)
            if glob is not None and str(glob["nb_cfg"]) == nb_cfg:
                return
            self.call("echo", [])
        raise AssertionError(f"the plain replica did not catch up within {timeout} s")

    def close(self) -> None:
        self.sock.close()


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
    # Rows netpeer does not write, with the shapes a decoder can get wrong:
    # optional values (set, changed, cleared), empty and one-element sets,
    # integers, booleans, maps with pairs added, replaced and removed.
    nb.nbctl("lr-add", "their-router", "--", "set", "Logical_Router", "their-router",
             "external_ids:team=x", "external_ids:note=one", "options:always_learn_from_arp_request=false")
    nb.nbctl("ls-add", "their-switch", "--", "lsp-add", "their-switch", "p1",
             "--", "lsp-set-addresses", "p1", "00:00:00:00:00:01 192.0.2.1", "00:00:00:00:00:02")
    nb.nbctl("lr-policy-add", "their-router", "100", "ip4.src == 192.0.2.0/24", "drop")
    nb.nbctl("create", "Address_Set", "name=their_set", "addresses=[]")
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

        nb.nbctl("lrp-add", "their-router", "rp1", "00:00:00:00:01:01", "192.0.2.254/24", "198.51.100.1/24")
        nb.nbctl("lsp-add", "their-switch", "p2", "--", "lsp-set-type", "p2", "router")
        nb.nbctl("set", "Logical_Router", "their-router", "external_ids:team=y")
        nb.nbctl("remove", "Logical_Router", "their-router", "external_ids", "note")
        nb.nbctl("lsp-set-addresses", "p1")
        nb.nbctl("set", "Address_Set", "their_set", "addresses=\"10.9.0.0/16\"")
        nb.nbctl("set", "Logical_Router_Port", "rp0", "peer=rp8")
        nb.nbctl("set", "Logical_Router_Port", "rp1", "peer=rp0")
        nb.nbctl("lr-policy-add", "their-router", "200", "ip4.dst == 203.0.113.0/24", "allow")
        nb.nbctl("lr-policy-del", "their-router", "100", "ip4.src == 192.0.2.0/24")
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
