"""netpeer's connection to an OVSDB database: JSON-RPC over a socket, a
replica of the monitored rows as plain values, and transactions.

One thread per connection reads the socket, applies the server's updates to
the replica (``netpeer.ovn.plain``), answers the server's echo requests and
hands replies to the threads that wait for them. It connects in the
background and again after any loss, trying the members of a clustered
database in turn at most ``backoff`` apart, and talks to the leader only:
a member that is not the leader (or not connected to its cluster) is left
for the next, and a connection whose member stops leading is dropped. The
replica is whole (``ready``) once the current connection's initial rows are
in; after a reconnection it is replaced, not patched.

Readers take ``lock`` while they read the replica; updates are applied
under it, so a reader sees the rows of one moment. ovsdb-server sends the
updates a transaction causes before its reply on the same connection, so
when ``transact`` returns the replica already holds what it wrote.

Why not python-ovs's IDL: its Row, Datum and Atom objects were most of
netpeerd's start-up and of what a large write cost at 10,000 networks
(docs/performance-log.md, "The floors under the two open targets").
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import itertools
import json
import logging
import random
import select
import socket
import threading
import time
from typing import Callable, Iterable, Mapping

from netpeer.ovn.framing import Framer
from netpeer.ovn.plain import ChangeHook, PlainReplica, columns_from_schema

LOG = logging.getLogger(__name__)

# glibc's malloc_trim: a replication parses the whole database into objects
# first, and glibc keeps what they freed unless asked (None elsewhere).
_LIBC = ctypes.util.find_library("c")
_MALLOC_TRIM = getattr(ctypes.CDLL(_LIBC), "malloc_trim", None) if _LIBC else None
_SERVER_COLUMNS = ["name", "model", "connected", "leader"]


def release_free_heap() -> None:
    """Gives the C heap's free memory back to the system (glibc only)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


class Disconnected(Exception):
    """Not connected, or the connection was lost before the reply came."""


class TimedOut(Exception):
    """No reply within the time given (the request may still take effect)."""


class Refused(Exception):
    """The server refused a transaction; ``errors`` are its error objects."""

    def __init__(self, errors: list):
        super().__init__("; ".join(f"{e.get('error')}: {e.get('details', '')}".rstrip(": ") for e in errors))
        self.errors = errors


class TryAgain(Exception):
    """The server could not commit now (an error instead of results, or a
    wait that timed out): the same change may succeed in a moment."""


class _Lost(Exception):
    """The current connection is over (the reason is the message)."""


def parse_remotes(remotes: str) -> list[tuple[int, object]]:
    """``unix:PATH`` and ``tcp:HOST:PORT`` members, comma-separated, as
    (address family, address); ``ValueError`` saying what is wrong otherwise."""
    out = []
    for remote in (r.strip() for r in remotes.split(",")):
        kind, _, rest = remote.partition(":")
        if kind == "unix" and rest:
            out.append((socket.AF_UNIX, rest))
            continue
        if kind == "tcp" and rest:
            host, _, port = rest.rpartition(":")
            host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
            if host and port.isdigit() and 0 < int(port) < 65536:
                out.append((socket.AF_INET6 if ":" in host else socket.AF_INET, (host, int(port))))
                continue
        raise ValueError(f"has member {remote!r}: each must be unix:PATH or tcp:HOST:PORT (comma-separated)")
    return out


class _Reply:
    def __init__(self, rid: int):
        self.rid = rid
        self.done = threading.Event()
        self.message: dict | None = None   # None once done: the connection was lost

    def set(self, message: dict | None) -> None:
        self.message = message
        self.done.set()


class Connection:
    """A connection to ``database`` at ``remotes`` with a replica of the
    ``monitored`` columns (table -> columns; ``where``: table -> an OVSDB
    condition, to monitor some rows only).

    ``hold``: seconds to wait, before the first monitor, for ``start_monitor``
    (a read that must not queue behind a large initial reply goes first)."""

    def __init__(self, remotes: str, database: str, monitored: Mapping[str, Iterable[str]], *,
                 named: Iterable[str] = (), where: Mapping[str, list] | None = None,
                 on_change: ChangeHook | None = None, timeout: float = 10.0, backoff: float = 1.0,
                 probe: float = 5.0, leader_only: bool = True, hold: float = 0.0, name: str = "ovsdb"):
        self.members = parse_remotes(remotes)
        self.remotes = remotes
        self.database = database
        self.monitored = {t: list(c) for t, c in monitored.items()}
        self.named = tuple(named)
        self.where = dict(where or {})
        self.on_change = on_change
        self.timeout, self.backoff, self.probe, self.leader_only = timeout, backoff, probe, leader_only
        #: Held while the replica changes: readers take it to read rows of one moment.
        self.lock = threading.RLock()
        self.replica: PlainReplica | None = None
        #: Counts connections made and lost (a change tracker must not trust notes across one).
        self.seqno = 0
        #: Counts updates applied to the replica.
        self.change_seqno = 0
        #: The last reason a connection failed or was lost (None: none yet).
        self.error: str | None = None
        self._ready = False
        self._sock: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._pending: dict[int, _Reply] = {}
        self._ids = itertools.count(1)
        self._closed = threading.Event()
        self._start = threading.Event()
        self._hold_until = time.monotonic() + hold
        self._server: dict[str, dict] = {}
        self._thread = threading.Thread(target=self._run, name=f"{name}-connection", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ for callers
    @property
    def ready(self) -> bool:
        """Connected, with the replica of this connection whole."""
        return self._ready

    @property
    def up(self) -> bool:
        """Connected (the replica may still be arriving)."""
        return self._sock is not None

    def start_monitor(self) -> None:
        self._start.set()

    def wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._ready and time.monotonic() < deadline and not self._closed.is_set():
            time.sleep(0.02)
        return self._ready

    def transact(self, ops: list[dict], timeout: float | None = None) -> list:
        """Commits ``ops`` as one transaction; the reply's results. Raises
        ``Refused`` (an operation failed: nothing was committed), ``TryAgain``,
        ``Disconnected`` or ``TimedOut`` (it may still commit). Read as
        python-ovs reads a reply: "aborted" marks the operations after a
        failed one, "timed out" and an error in place of results are soft."""
        msg = self.call("transact", [self.database, *ops], timeout)
        if msg.get("error") is not None:
            raise TryAgain(str(msg["error"])[:200])
        errors = [r for r in msg.get("result") or () if isinstance(r, dict) and "error" in r]
        hard = [e for e in errors if e["error"] not in ("aborted", "timed out")]
        if hard:
            raise Refused(hard)
        if errors:
            raise TryAgain(str(errors[0])[:200])
        return msg["result"]

    def call(self, method: str, params: list, timeout: float | None = None) -> dict:
        """Sends a request from any thread but the connection's; its reply message."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        reply = self._request(method, params, wait)
        if not reply.done.wait(max(0.0, deadline - time.monotonic())):
            self._pending.pop(reply.rid, None)   # a reply that comes later is dropped
            raise TimedOut(f"{method} got no reply within {wait:g}s")
        if reply.message is None:
            raise Disconnected(self.error or "the connection was lost")
        return reply.message

    def close(self) -> None:
        self._closed.set()
        self._start.set()
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)

    # ------------------------------------------------------------ the connection's thread
    def _request(self, method: str, params: list, timeout: float | None = None) -> _Reply:
        sock = self._sock
        if sock is None:
            raise Disconnected(self.error or "not connected")
        rid = next(self._ids)
        reply = self._pending[rid] = _Reply(rid)   # before sending: the reply may come at once
        try:
            self._send(sock, {"method": method, "params": params, "id": rid}, timeout)
        except OSError as exc:
            self._pending.pop(rid, None)
            # Part of the request may have gone: the stream is no longer
            # JSON-RPC the server can read. The connection's thread drops it.
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            raise Disconnected(f"sending {method} failed: {exc or exc.__class__.__name__}") from exc
        return reply

    def _send(self, sock: socket.socket, message: dict, timeout: float | None = None) -> None:
        data = json.dumps(message, separators=(",", ":")).encode()
        with self._send_lock:
            sock.settimeout(self.timeout if timeout is None else max(0.01, timeout))
            sock.sendall(data)

    def _run(self) -> None:
        order = list(range(len(self.members)))
        start = random.randrange(len(order))
        for attempt in itertools.count():
            if self._closed.is_set():
                return
            family, address = self.members[order[(start + attempt) % len(order)]]
            try:
                self._session(family, address)
            except (OSError, _Lost) as exc:
                self.error = f"{address}: {exc}" if str(exc) else f"{address}: {exc.__class__.__name__}"
                if not self._closed.is_set():
                    LOG.warning("OVSDB %s at %s: %s; reconnecting", self.database, address, exc or
                                exc.__class__.__name__)
            except Exception as exc:   # a message this client cannot read: a new connection, never a dead thread
                self.error = f"{address}: {exc.__class__.__name__}: {exc}"
                LOG.exception("OVSDB %s at %s: unexpected %s; reconnecting", self.database, address,
                              exc.__class__.__name__)
            finally:
                self._drop()
            self._closed.wait(self.backoff)

    def _drop(self) -> None:
        with self.lock:
            was, self._ready = self._sock, False
            self._sock = None
            self.replica = None   # not kept beside the next one while it arrives
            if was is not None:
                self.seqno += 1
        if was is not None:
            was.close()
        pending, self._pending = self._pending, {}
        for reply in pending.values():
            reply.set(None)

    def _session(self, family: int, address) -> None:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(min(self.timeout, 5.0))
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            raise
        sock.settimeout(self.timeout)   # for sends; reads wait in select
        self._framer, self._last_rx, self._probing = Framer(), time.monotonic(), False
        self._queue: collections.deque = collections.deque()
        self._server = {}   # this member's _Server rows (each member has its own uuids)
        with self.lock:
            self._sock = sock
            self.seqno += 1
        if self.leader_only:
            server = self._await(self._request("monitor_cond", [
                "_Server", "server", {"Database": [{"columns": _SERVER_COLUMNS}]}]))
            if server.get("error") is None:   # a server without _Server has no clusters either
                self._check_leader(server["result"])
        schema = self._result(self._await(self._request("get_schema", [self.database])))
        replica = PlainReplica(columns_from_schema(schema, self.monitored), named=self.named)
        while not self._start.is_set() and time.monotonic() < self._hold_until:   # answering echoes meanwhile
            self._pump(None, until=min(time.monotonic() + 0.1, self._hold_until))
        self._start.set()
        requests = {t: [{"columns": c, **({"where": self.where[t]} if t in self.where else {})}]
                    for t, c in self.monitored.items()}
        initial = self._result(self._await(self._request("monitor_cond", [self.database, "db", requests])))
        replica.apply(initial)
        del initial
        replica.on_change = self.on_change
        with self.lock:
            self.replica = replica
            self.change_seqno += 1
            self._ready = True
        self.error = None
        release_free_heap()
        while not self._closed.is_set():
            self._pump(None, until=time.monotonic() + 1.0)

    def _result(self, message: dict):
        if message.get("error") is not None:
            raise _Lost(f"the server answered {message['error']!r}")
        return message["result"]

    def _await(self, reply: _Reply) -> dict:
        while not reply.done.is_set():
            if self._closed.is_set():
                raise _Lost("closed")
            self._pump(reply, until=time.monotonic() + 1.0)
        if reply.message is None:
            raise _Lost("lost")
        return reply.message

    def _pump(self, reply: _Reply | None, until: float) -> None:
        """Reads and handles messages until ``until`` (or ``reply`` is done);
        probes a silent server with an echo and gives up on it after ``2 * probe``."""
        sock, queue = self._sock, self._queue
        while time.monotonic() < until and not (reply is not None and reply.done.is_set()):
            if self._closed.is_set():
                return
            if queue:   # one at a time: what follows a reply waits until its waiter has used it
                self._handle(sock, queue.popleft())
                continue
            readable, _, _ = select.select([sock], [], [], 0.2)
            now = time.monotonic()
            if not readable:
                silent = now - self._last_rx
                if silent > 2 * self.probe:
                    raise _Lost(f"no answer for {silent:.0f}s")
                if silent > self.probe and not self._probing:
                    self._probing = True
                    self._send(sock, {"method": "echo", "params": [], "id": "echo"})
                continue
            data = sock.recv(1 << 20)
            if not data:
                raise _Lost("the server closed the connection")
            self._last_rx, self._probing = now, False
            queue.extend(self._framer.feed(data))

    def _handle(self, sock, message: dict) -> None:
        method = message.get("method")
        if method is None:
            reply = self._pending.pop(message.get("id"), None)
            if reply is not None:
                reply.set(message)
            return
        if method == "echo":
            self._send(sock, {"result": message.get("params", []), "error": None, "id": message.get("id")})
        elif method == "update2":
            monitor, updates = message["params"][0], message["params"][1]
            if monitor == "server":
                self._check_leader(updates)
                return
            with self.lock:
                if self.replica is not None and self._ready:
                    self.replica.apply(updates)
                    self.change_seqno += 1
        elif method == "monitor_canceled":
            raise _Lost("the server canceled the monitor")

    def _check_leader(self, updates: Mapping) -> None:
        """Keeps the ``_Server`` rows and leaves a member that is not the
        cluster's leader (a standalone database always is one)."""
        for uuid, change in updates.get("Database", {}).items():
            if "delete" in change:
                self._server.pop(uuid, None)
                continue
            row = dict(self._server.get(uuid, {}))
            row.update(change.get("initial") or change.get("insert") or change.get("modify") or {})
            self._server[uuid] = row
        for row in self._server.values():
            if row.get("name") != self.database:
                continue
            if row.get("model") == "clustered" and not (row.get("connected") is True and row.get("leader") is True):
                raise _Lost("not the cluster's leader")
            return
        raise _Lost(f"no database {self.database} on this server")


def read_once(remotes: str, database: str, monitored: Mapping[str, Iterable[str]], where: Mapping[str, list],
              timeout: float, backoff: float, read: Callable[[PlainReplica], object]):
    """``read(replica)`` on the leader's rows that match ``where``, through a
    connection of its own; ``TimedOut`` when they are not in within ``timeout``."""
    conn = Connection(remotes, database, monitored, where=where, timeout=timeout, backoff=backoff, name="ovsdb-once")
    try:
        if not conn.wait_ready(timeout):
            raise TimedOut(conn.error or f"no answer within {timeout:g}s")
        with conn.lock:
            return read(conn.replica)
    finally:
        conn.close()
