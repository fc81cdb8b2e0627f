"""SQLite store: embedded, transactional, durable.

WAL journal with ``synchronous=FULL``: a write acknowledged to a client was
fsynced before the acknowledgement, so it survives kill -9 and power loss.
One write connection guarded by a lock (writes are serialized by the
service anyway); reads go through one read-only connection per thread, so
they never wait for a write in progress.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from datetime import datetime, timedelta, timezone
from typing import Iterator

from netpeer.core.models import Network, NetworkKey, Peering, PeeringKey, Phase, Route, Token
from netpeer.store.base import Store, Transaction

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS networks (
    namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL UNIQUE,
    subnets TEXT NOT NULL, routes TEXT NOT NULL, description TEXT NOT NULL,
    create_time INTEGER NOT NULL, update_time INTEGER NOT NULL, revision INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
);
CREATE TABLE IF NOT EXISTS peerings (
    namespace TEXT NOT NULL, network TEXT NOT NULL, name TEXT NOT NULL,
    remote_namespace TEXT NOT NULL, remote_network TEXT NOT NULL,
    network_uid TEXT NOT NULL, remote_uid TEXT,
    ttl_seconds INTEGER NOT NULL, description TEXT NOT NULL,
    phase TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL,
    last_transition INTEGER NOT NULL, expires_at INTEGER,
    create_time INTEGER NOT NULL, revision INTEGER NOT NULL,
    PRIMARY KEY (namespace, network, name),
    UNIQUE (namespace, network, remote_namespace, remote_network)
);
CREATE INDEX IF NOT EXISTS peerings_by_remote ON peerings (remote_namespace, remote_network);
CREATE INDEX IF NOT EXISTS peerings_by_expiry ON peerings (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS tokens (
    token_id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, namespaces TEXT NOT NULL,
    admin INTEGER NOT NULL, description TEXT NOT NULL, create_time INTEGER NOT NULL
);
"""


def _us(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000) if t.tzinfo else int(t.replace(tzinfo=timezone.utc).timestamp() * 1_000_000)


def _dt(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc)


class SqliteStore(Store):
    savepoints = True

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        if self.path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        with self._lock:
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise RuntimeError(f"store {self.path} has schema version {row[0]}; "
                                   f"this netpeer understands up to {SCHEMA_VERSION}: upgrade netpeer")

    def _reader(self) -> sqlite3.Connection | None:
        """This thread's read-only connection (WAL lets readers run while a
        write transaction is open); None for an in-memory store."""
        if self.path == ":memory:":
            return None
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA query_only=ON")
            self._local.db = db
            with self._readers_lock:
                self._readers.append(db)
        return db

    @contextlib.contextmanager
    def read(self) -> Iterator[Transaction]:
        """A consistent snapshot of what was committed. Reads do not wait for
        a write in progress (which may be waiting for OVN): each thread reads
        through its own connection."""
        db = self._reader()
        if db is None:
            with self._lock:
                self._db.execute("BEGIN")
                try:
                    yield _SqliteTx(self._db)
                finally:
                    self._db.execute("ROLLBACK")
            return
        db.execute("BEGIN")
        try:
            yield _SqliteTx(db)
        finally:
            db.execute("ROLLBACK")

    @contextlib.contextmanager
    def write(self) -> Iterator[Transaction]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteTx(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()
        with self._readers_lock:
            for db in self._readers:
                db.close()
            self._readers.clear()


_NET_COLS = "namespace, name, uid, subnets, routes, description, create_time, update_time, revision"
_PEER_COLS = ("namespace, network, name, remote_namespace, remote_network, network_uid, remote_uid, "
              "ttl_seconds, description, phase, reason, message, last_transition, expires_at, "
              "create_time, revision")


def _network(row) -> Network:
    return Network(
        namespace=row[0], name=row[1], uid=row[2], subnets=tuple(json.loads(row[3])),
        routes=tuple(Route(r["prefix"], r.get("next_hop")) for r in json.loads(row[4])),
        description=row[5], create_time=_dt(row[6]), update_time=_dt(row[7]), revision=row[8])


def _peering(row) -> Peering:
    return Peering(
        namespace=row[0], network=row[1], name=row[2], remote_namespace=row[3],
        remote_network=row[4], network_uid=row[5], remote_uid=row[6],
        ttl=timedelta(seconds=row[7]), description=row[8], phase=Phase(row[9]), reason=row[10],
        message=row[11], last_phase_transition_time=_dt(row[12]), create_time=_dt(row[14]),
        revision=row[15])


class _SqliteTx(Transaction):
    def __init__(self, db: sqlite3.Connection):
        self._db = db

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        self._db.execute("SAVEPOINT op")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK TO op")
            self._db.execute("RELEASE op")
            raise
        self._db.execute("RELEASE op")

    def _one(self, sql: str, args: tuple):
        return self._db.execute(sql, args).fetchone()

    # networks
    def get_network(self, key: NetworkKey) -> Network | None:
        row = self._one(f"SELECT {_NET_COLS} FROM networks WHERE namespace=? AND name=?", (key.namespace, key.name))
        return _network(row) if row else None

    def get_network_by_uid(self, uid: str) -> Network | None:
        row = self._one(f"SELECT {_NET_COLS} FROM networks WHERE uid=?", (uid,))
        return _network(row) if row else None

    def list_networks(self, namespace, after="", limit=None):
        sql = f"SELECT {_NET_COLS} FROM networks"
        args: list = []
        if namespace is None:
            if after:
                ns, _, name = after.partition("/")
                sql += " WHERE (namespace, name) > (?, ?)"
                args += [ns, name]
        else:
            sql += " WHERE namespace=? AND name > ?"
            args += [namespace, after]
        sql += " ORDER BY namespace, name"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [_network(r) for r in self._db.execute(sql, args)]

    def put_network(self, n: Network) -> None:
        self._db.execute(
            f"INSERT OR REPLACE INTO networks ({_NET_COLS}) VALUES (?,?,?,?,?,?,?,?,?)",
            (n.namespace, n.name, n.uid, json.dumps(list(n.subnets)),
             json.dumps([{"prefix": r.prefix, "next_hop": r.next_hop} for r in n.routes]),
             n.description, _us(n.create_time), _us(n.update_time), n.revision))

    def delete_network(self, key: NetworkKey) -> None:
        self._db.execute("DELETE FROM networks WHERE namespace=? AND name=?", (key.namespace, key.name))

    # peerings
    def get_peering(self, key: PeeringKey) -> Peering | None:
        row = self._one(f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=? AND network=? AND name=?",
                        (key.namespace, key.network, key.name))
        return _peering(row) if row else None

    def find_peering_to(self, local: NetworkKey, remote: NetworkKey) -> Peering | None:
        row = self._one(
            f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=? AND network=? "
            "AND remote_namespace=? AND remote_network=?",
            (local.namespace, local.name, remote.namespace, remote.name))
        return _peering(row) if row else None

    def peerings_of(self, network: NetworkKey, after: str = "", limit: int | None = None) -> list[Peering]:
        sql = f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=? AND network=? AND name > ? ORDER BY name"
        args: list = [network.namespace, network.name, after]
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [_peering(r) for r in self._db.execute(sql, args)]

    def peerings_towards(self, network: NetworkKey) -> list[Peering]:
        return [_peering(r) for r in self._db.execute(
            f"SELECT {_PEER_COLS} FROM peerings WHERE remote_namespace=? AND remote_network=? "
            "ORDER BY namespace, network, name", (network.namespace, network.name))]

    def put_peering(self, p: Peering) -> None:
        expires = p.expires_at
        self._db.execute(
            f"INSERT OR REPLACE INTO peerings ({_PEER_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (p.namespace, p.network, p.name, p.remote_namespace, p.remote_network, p.network_uid,
             p.remote_uid, int(p.ttl.total_seconds()), p.description, p.phase.value, p.reason,
             p.message, _us(p.last_phase_transition_time), _us(expires) if expires else None,
             _us(p.create_time), p.revision))

    def delete_peering(self, key: PeeringKey) -> None:
        self._db.execute("DELETE FROM peerings WHERE namespace=? AND network=? AND name=?",
                         (key.namespace, key.network, key.name))

    def expired_peerings(self, now: datetime, limit: int = 500) -> list[Peering]:
        return [_peering(r) for r in self._db.execute(
            f"SELECT {_PEER_COLS} FROM peerings WHERE expires_at IS NOT NULL AND expires_at <= ? "
            "ORDER BY expires_at LIMIT ?", (_us(now), limit))]

    # tokens
    def get_token(self, token_id: str) -> Token | None:
        row = self._one("SELECT token_id, secret_hash, namespaces, admin, description, create_time "
                        "FROM tokens WHERE token_id=?", (token_id,))
        if not row:
            return None
        return Token(row[0], row[1], frozenset(json.loads(row[2])), bool(row[3]), row[4], _dt(row[5]))

    def put_token(self, t: Token) -> None:
        self._db.execute("INSERT OR REPLACE INTO tokens VALUES (?,?,?,?,?,?)",
                         (t.token_id, t.secret_hash, json.dumps(sorted(t.namespaces)), int(t.admin),
                          t.description, _us(t.create_time)))

    def count_tokens(self) -> int:
        return self._one("SELECT count(*) FROM tokens", ())[0]
