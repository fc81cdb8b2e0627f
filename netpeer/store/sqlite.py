"""SQLite store: embedded, transactional, durable.

WAL journal with ``synchronous=FULL``: a write acknowledged to a client was
fsynced before the acknowledgement, so it survives kill -9 and power loss.
One write connection guarded by a lock (writes are serialized by the
service anyway); reads go through a bounded pool of read-only connections
(``netpeer.store.pool``), so they never wait for a write in progress. The files are private (0600): they
hold token hashes. The schema comes from ``netpeer.store.migrations``.

Longer than 400 lines: its transaction class is also the PostgreSQL
store's (``netpeer.store.pg_tx``), one copy of the SQL for both stores.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from datetime import datetime, timedelta, timezone
from typing import Collection, Iterator

from netpeer.core.dataplane import WAITS_FOR_DATAPLANE
from netpeer.core.models import Event, EventType, Network, NetworkKey, Peering, PeeringKey, Phase, Route, Token
from netpeer.errors import FailedPrecondition
from netpeer.reasons import Reason
from netpeer.store import migrations
from netpeer.store.base import Store, Transaction
from netpeer.store.pool import Pool
from netpeer.store.sites_sql import SiteMirrorSql


def _us(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000) if t.tzinfo else int(t.replace(tzinfo=timezone.utc).timestamp() * 1_000_000)


def _dt(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc)


class SqliteStore(Store):
    savepoints = True

    #: Read connections open at most (more reads at once wait for one), and
    #: how many of them stay open when idle. netpeerd reads on its 16 read
    #: workers, the sweeper, the programmer and the metrics endpoint.
    READERS, IDLE_READERS = 32, 4

    def __init__(self, path: str | os.PathLike, upgrade: bool = True, readers: int = READERS,
                 idle_readers: int = IDLE_READERS, reader_idle_s: float = 30.0):
        """Opens (creating it if needed) the store at ``path``. Missing
        migrations are applied unless ``upgrade`` is false (then an old store
        is refused with the command that upgrades it). At most ``readers``
        read connections are open at once; beyond ``idle_readers``, those
        idle for ``reader_idle_s`` are closed."""
        self.path = self.where = str(path)
        if self.path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            # Created private: the files hold token hashes. The WAL and shm
            # files SQLite makes later inherit nothing, hence the umask.
            old_umask = os.umask(0o077)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
        finally:
            if self.path != ":memory:":
                os.umask(old_umask)
        self._lock = threading.RLock()
        # A reader busy in read() when the store is closed is closed by its own
        # thread (closing a connection another thread is querying crashes the
        # sqlite3 module): the pool does that.
        self.readers: Pool[sqlite3.Connection] = Pool(
            self._open_reader, sqlite3.Connection.close, maximum=readers, keep=idle_readers, idle=reader_idle_s,
            where=f"store {self.where}")
        #: The migrations this opening applied.
        self.applied = self.migrate(apply=upgrade)
        with self._lock:
            self._store_id = self._db.execute("SELECT value FROM meta WHERE key='store_id'").fetchone()[0]

    def schema_version(self) -> int:
        with self._lock:
            has_meta = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
            if not has_meta:
                return 0
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            return int(row[0]) if row else 0

    def migrate(self, apply: bool = True) -> list[int]:
        """Applies the missing migrations, each in its own transaction; the
        versions applied."""
        done = []
        with self._lock:
            todo = migrations.pending(self.schema_version(), self.where)
            if todo and not apply:
                raise FailedPrecondition(
                    f"store {self.where} has schema version {self.schema_version()}, this netpeer needs "
                    f"{migrations.LATEST}: run `netpeer db upgrade --config FILE`", field="store", value=self.where,
                                         reason=Reason.STORE_INCOMPATIBLE)
            for m in todo:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    if self.schema_version() >= m.version:   # another process did it meanwhile
                        self._db.execute("ROLLBACK")
                        continue
                    for statement in m.sqlite:
                        self._db.execute(statement)
                    self._db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(m.version),))
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
                done.append(m.version)
        if self.path != ":memory:":
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(self.path + suffix):
                    os.chmod(self.path + suffix, 0o600)
        return done

    @property
    def store_id(self) -> str:
        return self._store_id

    def _open_reader(self) -> sqlite3.Connection:
        """A read-only connection (WAL lets readers run while a write
        transaction is open)."""
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA query_only=ON")
        return db

    @contextlib.contextmanager
    def read(self) -> Iterator[Transaction]:
        """A consistent snapshot of what was committed. Reads do not wait for
        a write in progress (which may be waiting for OVN): each takes a
        read connection of its own from the pool for its duration (an
        in-memory store has none: its reads take the write connection)."""
        if self.path == ":memory:":
            with self._lock:
                self._db.execute("BEGIN")
                try:
                    yield _SqliteTx(self._db)
                finally:
                    self._db.execute("ROLLBACK")
            return
        db = self.readers.take()
        clean = False
        try:
            db.execute("BEGIN")
            try:
                yield _SqliteTx(db)
            finally:
                db.execute("ROLLBACK")
                clean = True
        finally:
            # A connection whose transaction could not be ended is not reused.
            self.readers.give(db, broken=not clean)

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
        self.readers.close()


_NET_COLS = "namespace, name, uid, subnets, routes, description, create_time, update_time, revision"
_PEER_COLS = ("namespace, network, name, remote_namespace, remote_network, network_uid, remote_uid, "
              "ttl_seconds, description, phase, reason, message, last_transition, expires_at, "
              "create_time, revision, dataplane_cfg, programmed_at, remote_site, conflicts")


# Where every namespace's revisions start (0, or the newest revision when
# the store moved to revisions per namespace: migration 6).
_BASE = "(SELECT CAST(value AS BIGINT) FROM meta WHERE key='revision_base')"
# A namespace's next revision (the statement both dialects understand).
_NEXT_REVISION = (f"INSERT INTO namespace_revisions (namespace, revision) VALUES (?, {_BASE} + 1) "
                  "ON CONFLICT (namespace) DO UPDATE SET revision = namespace_revisions.revision + 1 "
                  "RETURNING revision")


def _event(row) -> Event:
    values = json.loads(row[7])
    obj = None
    if values is not None:
        obj = _peering(values) if row[4] == "peering" else _network(values)
    return Event(row[0], _dt(row[1]), row[2], row[3], row[4], row[5], row[6], obj)


_TOKEN_COLS = "token_id, secret_hash, namespaces, admin, description, create_time, expires_at"
_DECOY = ("'decoy', '" + "0" * 64 + "', '[\"decoy-namespace\"]', 0, '', 0, NULL")


def _token(row) -> Token:
    return Token(row[0], row[1], frozenset(json.loads(row[2])), bool(row[3]), row[4], _dt(row[5]),
                 _dt(row[6]) if row[6] is not None else None)


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
        revision=row[15], dataplane_cfg=row[16], programmed_at=_dt(row[17]) if row[17] is not None else None,
        # Events recorded before migration 4 have no site columns.
        remote_site=row[18] if len(row) > 18 else "", conflicts=tuple(json.loads(row[19])) if len(row) > 19 else ())


def _told(p: Peering) -> tuple:
    """The fields of a half that another site is told (``netpeer.core.sides.ToldHalf``)."""
    return (p.remote_site, p.remote_namespace, p.remote_network, p.network_uid, p.remote_uid, p.create_time,
            p.phase, p.conflicts)


def _peering_values(p: Peering) -> tuple:
    expires = p.expires_at
    return (p.namespace, p.network, p.name, p.remote_namespace, p.remote_network, p.network_uid,
            p.remote_uid, int(p.ttl.total_seconds()), p.description, p.phase.value, p.reason,
            p.message, _us(p.last_phase_transition_time), _us(expires) if expires else None,
            _us(p.create_time), p.revision, p.dataplane_cfg, _us(p.programmed_at) if p.programmed_at else None,
            p.remote_site, json.dumps(list(p.conflicts)))


def _network_values(n: Network) -> tuple:
    return (n.namespace, n.name, n.uid, json.dumps(list(n.subnets)),
            json.dumps([{"prefix": r.prefix, "next_hop": r.next_hop} for r in n.routes]),
            n.description, _us(n.create_time), _us(n.update_time), n.revision)


class _SqliteTx(SiteMirrorSql, Transaction):
    """Every statement goes through ``_q`` with ``?`` placeholders; the
    PostgreSQL store's transaction (``netpeer.store.pg_tx``) derives from
    this one and replaces only the statements whose dialects differ."""

    _PUT_NETWORK = f"INSERT OR REPLACE INTO networks ({_NET_COLS}) VALUES (?,?,?,?,?,?,?,?,?)"
    _PUT_PEERING = f"INSERT OR REPLACE INTO peerings ({_PEER_COLS}) VALUES ({','.join('?' * 20)})"
    _PUT_TOKEN = f"INSERT OR REPLACE INTO tokens ({_TOKEN_COLS}) VALUES (?,?,?,?,?,?,?)"
    _GET_TOKEN = f"SELECT {_TOKEN_COLS}, 1 FROM tokens WHERE token_id=? UNION ALL SELECT {_DECOY}, 0 LIMIT 1"

    def __init__(self, db: sqlite3.Connection):
        self._db = db
        self.networks_changed: set[NetworkKey] = set()
        self._forget()

    def _forget(self) -> None:
        """Drops the rows this transaction remembers.

        A write's consent logic reads the same few networks and peerings many
        times (a batch of 1,000 consents read networks 14,000 times), so this
        site's networks and peerings are kept once read or written, as a read
        would return them. Every statement that changes those tables updates
        or drops what is kept, and a rollback to a savepoint drops it all."""
        self._networks: dict[NetworkKey, Network | None] = {}
        self._peerings: dict[PeeringKey, Peering | None] = {}
        self._towards: dict[tuple[NetworkKey, NetworkKey], PeeringKey | None] = {}
        self._in_phase: dict[tuple[NetworkKey, Phase], list[Peering]] = {}

    def _keep_peering(self, key: PeeringKey, p: Peering | None) -> None:
        """Remembers ``p`` (None: no such peering) under ``key``, and which
        peering points from its network to its remote."""
        old = self._peerings.get(key)
        if old is not None:
            self._towards.pop((old.network_key, old.remote_key), None)
        self._peerings[key] = p
        for phase in Phase:
            self._in_phase.pop((key.network_key, phase), None)
        if p is not None:
            self._towards[(p.network_key, p.remote_key)] = key

    def _q(self, sql: str, args=()):
        return self._db.execute(sql, args)

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        self._q("SAVEPOINT op")
        try:
            yield
        except BaseException:
            self._forget()
            self._q("ROLLBACK TO op")
            self._q("RELEASE op")
            raise
        self._q("RELEASE op")

    def _one(self, sql: str, args: tuple = ()):
        return self._q(sql, args).fetchone()

    # networks
    def get_network(self, key: NetworkKey) -> Network | None:
        if key.site:
            return self._remote_network(key)
        if key not in self._networks:
            row = self._one(f"SELECT {_NET_COLS} FROM networks WHERE namespace=? AND name=?",
                            (key.namespace, key.name))
            self._networks[key] = _network(row) if row else None
        return self._networks[key]

    def get_network_by_uid(self, uid: str) -> Network | None:
        row = self._one(f"SELECT {_NET_COLS} FROM networks WHERE uid=?", (uid,))
        return _network(row) if row else None

    def network_uids(self) -> list[str]:
        return [r[0] for r in self._q("SELECT uid FROM networks")]

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
        return [_network(r) for r in self._q(sql, args)]

    def put_network(self, n: Network) -> None:
        old = self.get_network(n.key)
        existed = old is not None
        values = _network_values(n)
        self._q(self._PUT_NETWORK, values)
        self._networks[n.key] = _network(values)  # as a read returns it (times to the microsecond)
        if old is None or (old.uid, old.subnets, old.routes) != (n.uid, n.subnets, n.routes):
            self.networks_changed.add(n.key)   # what other sites are told of it may change
        self._event(n.namespace, n.name, "network", n.name, EventType.UPDATED if existed else EventType.CREATED,
                    values)

    def delete_network(self, key: NetworkKey) -> None:
        self._forget()
        self.networks_changed.add(key)
        if self._q("DELETE FROM networks WHERE namespace=? AND name=?",
                   (key.namespace, key.name)).rowcount:
            self._event(key.namespace, key.name, "network", key.name, EventType.DELETED, None)

    def _event(self, namespace: str, network: str, kind: str, name: str, type_: str, values) -> None:
        """Records a change for Watch, in the same transaction as the change,
        with the next revision of its namespace. Writes serialize (one
        connection here, the replicas' write lock in PostgreSQL), so a
        namespace's revisions follow commit order."""
        revision = self._q(_NEXT_REVISION, (namespace,)).fetchall()[0][0]
        self._q("INSERT INTO events (time, namespace, network, kind, name, type, body, ns_revision) "
                "VALUES (?,?,?,?,?,?,?,?)", (_us(datetime.now(timezone.utc)), namespace, network, kind, name,
                                             type_, json.dumps(values), revision))

    # peerings
    def get_peering(self, key: PeeringKey) -> Peering | None:
        if key.site:
            return self._remote_half(key)
        if key not in self._peerings:
            row = self._one(f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=? AND network=? AND name=?",
                            (key.namespace, key.network, key.name))
            self._keep_peering(key, _peering(row) if row else None)
        return self._peerings[key]

    def find_peering_to(self, local: NetworkKey, remote: NetworkKey) -> Peering | None:
        if local.site:
            return self._remote_half_to(local, remote)
        if (local, remote) in self._towards:
            key = self._towards[(local, remote)]
            return None if key is None else self._peerings[key]
        row = self._one(
            f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=? AND network=? "
            "AND remote_namespace=? AND remote_network=? AND remote_site=?",
            (local.namespace, local.name, remote.namespace, remote.name, remote.site))
        if row is None:
            self._towards[(local, remote)] = None
            return None
        p = _peering(row)
        self._keep_peering(p.key, p)
        return p

    def peerings_of(self, network: NetworkKey, after: str = "", limit: int | None = None) -> list[Peering]:
        if network.site:
            return [p for p in self._remote_halves_of(network) if p.name > after][:limit]
        sql = f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=? AND network=? AND name > ? ORDER BY name"
        args: list = [network.namespace, network.name, after]
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [_peering(r) for r in self._q(sql, args)]

    def peerings_towards(self, network: NetworkKey) -> list[Peering]:
        return [_peering(r) for r in self._q(
            f"SELECT {_PEER_COLS} FROM peerings WHERE remote_namespace=? AND remote_network=? AND remote_site=? "
            "ORDER BY namespace, network, name", (network.namespace, network.name, network.site))]

    def halves_of_to_site(self, network: NetworkKey, site: str) -> list[Peering]:
        return [_peering(r) for r in self._q(
            f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=? AND network=? AND remote_site=? ORDER BY name",
            (network.namespace, network.name, site))]

    def halves_to_site(self, site: str) -> list[Peering]:
        return [_peering(r) for r in self._q(
            f"SELECT {_PEER_COLS} FROM peerings WHERE remote_site=? ORDER BY namespace, network, name", (site,))]

    def put_peering(self, p: Peering) -> None:
        old = self.get_peering(p.key)
        values = _peering_values(p)
        if old is None or _told(old) != _told(p):
            self.networks_changed.add(p.network_key)   # what other sites are told of it may change
        self._q(self._PUT_PEERING, values)
        self._keep_peering(p.key, _peering(values))  # as a read returns it (times to the microsecond)
        if old is None:
            type_ = EventType.CREATED
        elif old.phase != p.phase:
            type_ = EventType.PHASE_CHANGED
        elif old.programmed_at is None and p.programmed_at is not None:
            type_ = EventType.PROGRAMMED
        else:
            type_ = EventType.UPDATED
        self._event(p.namespace, p.network, "peering", p.name, type_, values)

    def delete_peering(self, key: PeeringKey) -> None:
        self._keep_peering(key, None)
        self.networks_changed.add(key.network_key)
        if self._q("DELETE FROM peerings WHERE namespace=? AND network=? AND name=?",
                   (key.namespace, key.network, key.name)).rowcount:
            self._event(key.namespace, key.network, "peering", key.name, EventType.DELETED, None)

    def set_dataplane_cfg(self, network: NetworkKey, cfg: int, *, sites: Collection[str] | None = None,
                          newer_only: bool = False) -> list[PeeringKey]:
        where, args = "namespace=? AND network=? AND phase=?", [network.namespace, network.name, Phase.BOUND.value]
        if sites is not None:
            if not sites:
                return []
            where += f" AND remote_site IN ({', '.join('?' * len(sites))})"
            args += sorted(sites)
        if newer_only:
            where += " AND (dataplane_cfg IS NULL OR dataplane_cfg < ? OR dataplane_cfg = ?)"
            args += [cfg, WAITS_FOR_DATAPLANE]
        keys = [PeeringKey(network.namespace, network.name, r[0])
                for r in self._q(f"SELECT name FROM peerings WHERE {where} ORDER BY name", args)]
        if keys:
            self._forget()
            self._q(f"UPDATE peerings SET dataplane_cfg=?, programmed_at=NULL WHERE {where}", [cfg, *args])
        return keys

    def awaiting_dataplane(self) -> set[tuple[str, str]]:
        return {(r[0], r[1]) for r in self._q("SELECT DISTINCT network_uid, remote_site FROM peerings "
                                              "WHERE programmed_at IS NULL AND dataplane_cfg = ?",
                                              (WAITS_FOR_DATAPLANE,))}

    def programming(self, up_to: int, limit: int = 500) -> list[Peering]:
        return [_peering(r) for r in self._q(
            f"SELECT {_PEER_COLS} FROM peerings WHERE programmed_at IS NULL AND dataplane_cfg IS NOT NULL "
            "AND dataplane_cfg <= ? ORDER BY dataplane_cfg LIMIT ?", (up_to, limit))]

    # events: ``ns_revision`` is the revision a namespace's watchers see;
    # ``revision`` the order of all changes, which only the notifier follows.
    def events_after(self, namespace: str, network: str | None, revision: int, limit: int) -> list[Event]:
        sql = ("SELECT ns_revision, time, namespace, network, kind, name, type, body FROM events "
               "WHERE namespace=? AND ns_revision > ?")
        args: list = [namespace, revision]
        if network is not None:
            sql += " AND network=?"
            args.append(network)
        sql += " ORDER BY ns_revision LIMIT ?"
        args.append(limit)
        return [_event(r) for r in self._q(sql, args)]

    def namespaces_changed(self, after: int) -> tuple[int, set[str]]:
        rows = self._q("SELECT revision, namespace FROM events WHERE revision > ? ORDER BY revision",
                       (after,)).fetchall()
        if not rows:
            return max(after, self._sequence()), set()
        return rows[-1][0], {r[1] for r in rows}

    def revisions(self, namespace: str) -> tuple[int, int]:
        # Both from keys (the index on namespace and ns_revision, the heads'
        # primary key): the health check and every new watch read them.
        row = self._one("SELECT (SELECT min(ns_revision) FROM events WHERE namespace=?), "
                        f"COALESCE((SELECT revision FROM namespace_revisions WHERE namespace=?), {_BASE})",
                        (namespace, namespace))
        head = row[1]
        return (row[0] if row[0] is not None else head + 1), head

    def _sequence(self) -> int:
        """The newest change's place in the order of all of them."""
        row = self._one("SELECT max(revision) FROM events", ())
        if row[0] is not None:
            return row[0]
        # No event kept: the next one gets the sequence's next value.
        seq = self._one("SELECT seq FROM sqlite_sequence WHERE name='events'", ())
        return seq[0] if seq else 0

    def prune_events(self, older_than: datetime, keep: int) -> int:
        head = self._sequence()
        return self._q("DELETE FROM events WHERE time < ? AND revision <= ?",
                       (_us(older_than), head - keep)).rowcount

    def expired_peerings(self, now: datetime, limit: int = 500) -> list[Peering]:
        return [_peering(r) for r in self._q(
            f"SELECT {_PEER_COLS} FROM peerings WHERE expires_at IS NOT NULL AND expires_at <= ? "
            "ORDER BY expires_at LIMIT ?", (_us(now), limit))]

    def _peerings_in_phase(self, network: NetworkKey, phase: Phase) -> list[Peering]:
        if network.site:
            return []   # another site's: it keeps its own
        if (network, phase) not in self._in_phase:
            self._in_phase[(network, phase)] = [_peering(r) for r in self._q(
                f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=? AND network=? AND phase=? ORDER BY name",
                (network.namespace, network.name, phase.value))]
        return list(self._in_phase[(network, phase)])

    def failed_peerings_of(self, network: NetworkKey) -> list[Peering]:
        return self._peerings_in_phase(network, Phase.FAILED)

    def bound_peerings_of(self, network: NetworkKey) -> list[Peering]:
        return self._peerings_in_phase(network, Phase.BOUND)

    # quotas
    def count_networks(self, namespace: str) -> int:
        return self._one("SELECT count(*) FROM networks WHERE namespace=?", (namespace,))[0]

    def count_peerings_of(self, network: NetworkKey) -> int:
        return self._one("SELECT count(*) FROM peerings WHERE namespace=? AND network=?",
                         (network.namespace, network.name))[0]

    def count_by_phase(self) -> dict[str, int]:
        counts = {phase.value: 0 for phase in Phase}
        counts.update(dict(self._q("SELECT phase, count(*) FROM peerings GROUP BY phase").fetchall()))
        return counts

    def count_pending(self, namespace: str) -> int:
        return self._one("SELECT count(*) FROM peerings WHERE namespace=? AND phase!=?",
                         (namespace, Phase.BOUND.value))[0]

    # tokens
    def get_token(self, token_id: str) -> Token | None:
        # An unknown id reads (and parses) a decoy row instead of nothing, so
        # that known and unknown ids cost the same (no timing oracle).
        row = self._one(self._GET_TOKEN, (token_id,))
        token = _token(row)
        return token if row[-1] else None

    def put_token(self, t: Token) -> None:
        self._q(self._PUT_TOKEN,
                (t.token_id, t.secret_hash, json.dumps(sorted(t.namespaces)), int(t.admin),
                 t.description, _us(t.create_time), _us(t.expires_at) if t.expires_at else None))

    def delete_token(self, token_id: str) -> bool:
        return self._q("DELETE FROM tokens WHERE token_id=?", (token_id,)).rowcount > 0

    def list_tokens(self) -> list[Token]:
        return [_token(r) for r in self._q(f"SELECT {_TOKEN_COLS} FROM tokens ORDER BY create_time, token_id")]

    def count_tokens(self) -> int:
        return self._one("SELECT count(*) FROM tokens", ())[0]

    # settings and records of the store itself
    def meta(self, key: str) -> str | None:
        row = self._one("SELECT value FROM meta WHERE key=?", (key,))
        return row[0] if row else None

    def put_meta(self, key: str, value: str) -> None:
        self._q("DELETE FROM meta WHERE key=?", (key,))
        self._q("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))

    # generation
    def generation(self) -> int:
        return int(self._one("SELECT value FROM meta WHERE key='generation'", ())[0])

    def set_generation(self, generation: int) -> None:
        self._q("UPDATE meta SET value=? WHERE key='generation'", (str(generation),))
