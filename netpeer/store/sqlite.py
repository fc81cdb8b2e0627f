"""SQLite store: embedded, transactional, durable.

WAL journal with ``synchronous=FULL``: a write acknowledged to a client was
fsynced before the acknowledgement, so it survives kill -9 and power loss.
One write connection guarded by a lock (writes are serialized by the
service anyway); reads go through a bounded pool of read-only connections
(``netpeer.store.pool``), so they never wait for a write in progress. The files are private (0600): they
hold token hashes. The schema comes from ``netpeer.store.migrations``.

The statements are the SQL stores' (``netpeer.store.sql``); ``SqliteTx``
adds what SQLite says differently.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from typing import Iterator

from netpeer.errors import FailedPrecondition
from netpeer.reasons import Reason
from netpeer.store import migrations
from netpeer.store.codec import NET_COLS, PEER_COLS, TOKEN_COLS
from netpeer.store.codec import network_values as _network_values  # noqa: F401  (its name before codec.py)
from netpeer.store.interface import Store, Transaction
from netpeer.store.pool import Pool
from netpeer.store.sql import SqlTx


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
                    yield SqliteTx(self._db)
                finally:
                    self._db.execute("ROLLBACK")
            return
        db = self.readers.take()
        clean = False
        try:
            db.execute("BEGIN")
            try:
                yield SqliteTx(db)
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
                yield SqliteTx(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self.readers.close()


_DECOY = ("'decoy', '" + "0" * 64 + "', '[\"decoy-namespace\"]', 0, '', 0, NULL")


class SqliteTx(SqlTx):
    """The SQL stores' transaction in SQLite's words."""

    _PUT_NETWORK = f"INSERT OR REPLACE INTO networks ({NET_COLS}) VALUES (?,?,?,?,?,?,?,?,?)"
    _PUT_PEERING = f"INSERT OR REPLACE INTO peerings ({PEER_COLS}) VALUES ({','.join('?' * 20)})"
    _PUT_TOKEN = f"INSERT OR REPLACE INTO tokens ({TOKEN_COLS}) VALUES (?,?,?,?,?,?,?)"
    _GET_TOKEN = f"SELECT {TOKEN_COLS}, 1 FROM tokens WHERE token_id=? UNION ALL SELECT {_DECOY}, 0 LIMIT 1"

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

    def _sequence(self) -> int:
        row = self._one("SELECT max(revision) FROM events", ())
        if row[0] is not None:
            return row[0]
        # No event kept: the next one gets the sequence's next value.
        seq = self._one("SELECT seq FROM sqlite_sequence WHERE name='events'", ())
        return seq[0] if seq else 0
