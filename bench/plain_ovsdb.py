"""What OVSDB costs netpeer without python-ovs's objects: a measurement.

``PlainNb`` speaks JSON-RPC to the NB's unix socket itself and keeps the
rows it monitors in netpeer's plain replica (``netpeer.ovn.plain``: a map a
dict, a set a tuple, a uuid its string), applying ``update2`` notifications
as they come. It writes with one ``transact`` of the operations ``netpeer.ovn.plan``
computes from the replica and the desired rows.
It is not a client: no reconnection, no leader check, no echo, no locks; it
exists so that the benchmarks (``bench.replica --clients``, ``bench.bulk``)
can put a number on the part of netpeer's time that is python-ovs's row,
Datum and Atom objects.
"""

from __future__ import annotations

import collections
import json
import socket
from typing import Iterator

from netpeer.ovn.framing import Framer
from netpeer.ovn.plain import PlainReplica, columns_from_schema
from netpeer.ovn.rows import ROOT_TABLES


class PlainNb:
    def __init__(self, remote: str, columns: dict[str, list[str]], schema: str = "OVN_Northbound"):
        self.columns = columns
        self.schema = schema
        self._sock = socket.socket(socket.AF_UNIX)
        self._sock.connect(remote.removeprefix("unix:"))
        self._framer = Framer()
        self._queue: collections.deque = collections.deque()
        self._next_id = 0
        self.replica = PlainReplica(columns_from_schema(self._until_reply(self._send("get_schema", [schema])),
                                                        columns), named=ROOT_TABLES + ("HA_Chassis_Group",))

    @property
    def tables(self) -> dict[str, dict[str, dict]]:
        return self.replica.tables

    def close(self) -> None:
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _send(self, method: str, params: list) -> int:
        self._next_id += 1
        self._sock.sendall(json.dumps({"method": method, "params": params, "id": self._next_id}).encode())
        return self._next_id

    def _messages(self) -> Iterator[dict]:
        """Each message as it is whole (``netpeer.ovn.framing``: the standard library's parser)."""
        while True:
            while self._queue:   # taken off before it is handed on: a message is never handed twice
                yield self._queue.popleft()
            data = self._sock.recv(1 << 20)
            if not data:
                raise RuntimeError("the NB closed the connection")
            self._queue.extend(self._framer.feed(data))

    def _until_reply(self, rid: int) -> dict:
        for msg in self._messages():
            if msg.get("method") == "update2":
                self.replica.apply(msg["params"][1])
            elif msg.get("id") == rid:
                if msg.get("error"):
                    raise RuntimeError(f"NB error: {msg['error']}")
                return msg["result"]
        raise AssertionError("unreachable")

    def monitor(self) -> None:
        """The initial rows of every monitored table, then their updates with each later reply."""
        rid = self._send("monitor_cond", [self.schema, None,
                                          {t: [{"columns": c}] for t, c in self.columns.items()}])
        self.replica.apply(self._until_reply(rid))

    def transact(self, ops: list[dict]) -> list:
        """One transaction; returns once its reply (and the updates before it) are in."""
        result = self._until_reply(self._send("transact", [self.schema, *ops]))
        errors = [r for r in result if isinstance(r, dict) and "error" in r]
        if errors:
            raise RuntimeError(f"transaction failed: {errors[0]}")
        return result
