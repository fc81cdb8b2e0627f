"""A bare JSON-RPC connection to a test's NB that feeds netpeer's plain
replica (``netpeer.ovn.plain``), reading messages with ``netpeer.ovn.framing``,
and sends transactions: the tests of ``netpeer.ovn.plan`` apply plans
through it, apart from netpeer's own connection (``netpeer.ovn.connection``),
which the backend under test uses alongside."""

from __future__ import annotations

import collections
import json
import socket
import time

from netpeer.ovn.backend import COLUMNS, NB_SCHEMA
from netpeer.ovn.framing import Framer
from netpeer.ovn.plain import PlainReplica, columns_from_schema


class Feed:
    """A bare JSON-RPC connection to the NB that feeds a PlainReplica."""

    def __init__(self, remote: str):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(remote.removeprefix("unix:"))
        self.sock.settimeout(30)
        self.framer = Framer()
        self.queue: collections.deque = collections.deque()
        self.next_id = 0
        self.replica: PlainReplica | None = None

    def call(self, method: str, params: list):
        self.next_id += 1
        rid = self.next_id
        self.sock.sendall(json.dumps({"method": method, "params": params, "id": rid}).encode())
        while True:
            msg = self.receive()
            if msg.get("method") == "update2":
                self.replica.apply(msg["params"][1])
            elif msg.get("method") == "echo":
                self.sock.sendall(json.dumps({"result": msg["params"], "id": msg["id"]}).encode())
            elif msg.get("id") == rid:
                assert msg.get("error") is None, msg
                return msg["result"]

    def receive(self) -> dict:
        while not self.queue:
            data = self.sock.recv(1 << 16)
            assert data, "the NB closed the connection"
            self.queue.extend(self.framer.feed(data))
        return self.queue.popleft()

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

    def transact(self, ops) -> list:
        """One transaction; its reply once the updates before it are in the replica."""
        return self.call("transact", [NB_SCHEMA, *ops])

    def close(self) -> None:
        self.sock.close()
