"""PostgreSQL store: several netpeerd replicas share one database.

The same tables and values as the SQLite store (``netpeer.store.migrations``
has both dialects), and the same guarantees: a write is acknowledged only
after PostgreSQL committed it (``synchronous_commit`` on), a failed write
changed nothing, and group commit keeps its savepoints.

Across replicas, one write = one store transaction + one OVN transaction
stays one unit: every write transaction first takes one PostgreSQL advisory
transaction lock (``WRITE_LOCK``) and holds it through the OVN transaction
until it commits or rolls back. So writes are serialized across processes
exactly as the in-process lock serializes them within one, each sees
everything committed before it, and Watch revisions are handed out in commit
order. Why one lock and not SERIALIZABLE with retries: docs/replicas.md.

Reads run in REPEATABLE READ READ ONLY transactions (one snapshot per read,
never waiting for a write), each on a connection taken from a bounded pool
(``netpeer.store.pool``) and given back. A connection that breaks
(PostgreSQL restarted) is dropped from the pool, not given back; the call
that hit it answers UNAVAILABLE. A commit whose answer was lost is
looked up again (``pg_xact_status``), so the caller is told what happened.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from typing import Iterator

import psycopg

from netpeer.errors import FailedPrecondition, InvalidArgument, Unavailable
from netpeer.reasons import Reason
from netpeer.store import migrations
from netpeer.store.interface import Store, Transaction
from netpeer.store.pg_tx import PgTx
from netpeer.store.pool import Pool

#: pg_advisory_xact_lock keys (per database): all writes; schema migrations.
WRITE_LOCK = 0x6E65_7470_6565_7201
MIGRATE_LOCK = 0x6E65_7470_6565_7202


def redact(url: str) -> str:
    """The URL without its password (for messages and logs)."""
    url = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)
    return re.sub(r"(password=)[^&\s]*", r"\1***", url)


class PostgresStore(Store):
    savepoints = True
    #: Read connections open at most (more reads at once wait for one), and
    #: how many stay open when idle: each is a server process, and every
    #: replica has its own.
    READERS, IDLE_READERS = 20, 2

    def __init__(self, url: str, upgrade: bool = True, connect_timeout: float = 5.0,
                 lock_timeout: float = 30.0, idle_timeout: float = 60.0, application_name: str = "netpeer",
                 readers: int = READERS, idle_readers: int = IDLE_READERS, reader_idle_s: float = 30.0):
        """Connects to ``url`` and applies missing migrations (unless
        ``upgrade`` is false: then an old schema is refused). A write waits
        at most ``lock_timeout`` s for another replica's write (then
        UNAVAILABLE); a replica that holds the write lock without a word for
        ``idle_timeout`` s (frozen) loses its session, and so the lock. At
        most ``readers`` read connections are open at once; beyond
        ``idle_readers``, those idle for ``reader_idle_s`` are closed."""
        self.url = url
        self.where = redact(url)
        self._connect_timeout = connect_timeout
        self._app = application_name[:63]
        self._options = (f"-c lock_timeout={int(lock_timeout * 1000)} "
                         f"-c idle_in_transaction_session_timeout={int(idle_timeout * 1000)}")
        self._lock = threading.RLock()
        self.readers: Pool[psycopg.Connection] = Pool(self._connect, psycopg.Connection.close, maximum=readers,
                                                      keep=idle_readers, idle=reader_idle_s,
                                                      where=f"store {self.where}")
        self._db = self._connect()
        self.applied = self.migrate(apply=upgrade)
        with self.read() as tx:
            self._store_id = tx.meta("store_id")

    # ------------------------------------------------------------ connections
    def _connect(self) -> psycopg.Connection:
        try:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self._connect_timeout)),
                                   options=self._options, application_name=self._app)
        except psycopg.ProgrammingError as exc:
            raise InvalidArgument.for_field("store", self.where, f"is not a usable PostgreSQL URL: "
                                            f"{_first_line(exc)}") from None
        except psycopg.OperationalError as exc:
            raise Unavailable(f"store: cannot connect to {self.where}: {_first_line(exc)}",
                              reason=Reason.STORE_UNAVAILABLE) from None

    def _writer(self) -> psycopg.Connection:
        if self._db.closed or self._db.broken:
            self._db.close()
            self._db = self._connect()
        return self._db

    # ------------------------------------------------------------ schema
    def schema_version(self) -> int:
        with self._lock:
            return self._version(self._writer())

    @staticmethod
    def _version(db) -> int:
        if db.execute("SELECT to_regclass('meta')").fetchone()[0] is None:
            return 0
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    def migrate(self, apply: bool = True) -> list[int]:
        """Applies the missing migrations, each in its own transaction under a
        lock of its own (replicas starting together apply each once) and the
        write lock; the versions applied."""
        done = []
        with self._lock:
            db = self._writer()
            try:
                todo = migrations.pending(self._version(db), self.where)
                if todo and not apply:
                    raise FailedPrecondition(
                        f"store {self.where} has schema version {self._version(db)}, this netpeer needs "
                        f"{migrations.LATEST}: run `netpeer db upgrade --config FILE`", field="store",
                        value=self.where, reason=Reason.STORE_INCOMPATIBLE)
                for m in todo:
                    with db.transaction():
                        db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
                        # And the write lock: no running replica's write lands in the middle of a migration.
                        db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                        if self._version(db) >= m.version:   # another replica did it meanwhile
                            continue
                        for statement in m.postgresql:
                            db.execute(statement)
                        db.execute("INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (key) "
                                   "DO UPDATE SET value = EXCLUDED.value", (str(m.version),))
                    done.append(m.version)
            except psycopg.OperationalError as exc:
                raise Unavailable(f"store {self.where}: {_first_line(exc)}", reason=Reason.STORE_UNAVAILABLE) from None
        return done

    @property
    def store_id(self) -> str:
        return self._store_id

    # ------------------------------------------------------------ transactions
    def _begin(self, take, statement: str, drop=psycopg.Connection.close) -> psycopg.Connection:
        """``statement`` (a BEGIN) on ``take()``; a connection that fails it
        is dropped (``drop``), and one broken since its last use (PostgreSQL
        restarted) is replaced once: nothing had been sent on it yet."""
        for attempt in (1, 2):
            db = take()
            try:
                db.execute(statement)
                return db
            except psycopg.OperationalError as exc:
                broken = db.broken
                drop(db)
                if attempt == 2 or not broken:
                    raise self._unavailable(exc) from None
        raise AssertionError("unreachable")

    def _drop_reader(self, db: psycopg.Connection) -> None:
        """Out of the pool; when it broke, the idle ones went with it (they
        went to the same server, which most likely restarted)."""
        broken = db.broken
        self.readers.give(db, broken=True)
        if broken:
            self.readers.close_idle()

    @contextlib.contextmanager
    def read(self) -> Iterator[Transaction]:
        """A snapshot of what was committed (REPEATABLE READ, read only), on
        a connection taken from the pool and given back after; one that
        broke is dropped instead."""
        db = self._begin(self.readers.take, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", self._drop_reader)
        try:
            yield PgTx(db, self.where)
        finally:
            with contextlib.suppress(psycopg.Error):
                db.execute("ROLLBACK")
            self.readers.give(db, broken=db.broken or db.closed
                              or db.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)

    @contextlib.contextmanager
    def write(self) -> Iterator[Transaction]:
        """A write transaction holding the replicas' write lock until it ends."""
        with self._lock:
            db = self._begin_locked()
            try:
                yield PgTx(db, self.where)
            except BaseException:
                with contextlib.suppress(psycopg.Error):
                    db.execute("ROLLBACK")
                raise
            self._commit(db)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[Transaction]:
        """A read under the write lock: no replica writes until it ends (the
        repair sweep reads and writes OVN in one)."""
        with self._lock:
            db = self._begin_locked()
            try:
                yield PgTx(db, self.where)
            finally:
                with contextlib.suppress(psycopg.Error):
                    db.execute("ROLLBACK")

    def _begin_locked(self) -> psycopg.Connection:
        # READ COMMITTED on purpose: each statement sees what the previous
        # holder of the lock committed (a REPEATABLE READ snapshot would be
        # taken before the lock was granted).
        db = self._begin(self._writer, "BEGIN")
        try:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            return db
        except psycopg.errors.LockNotAvailable:
            with contextlib.suppress(psycopg.Error):
                db.execute("ROLLBACK")
            raise Unavailable("another netpeerd replica holds the write lock for too long (lock_timeout); "
                              "nothing was changed: retry", reason=Reason.STORE_UNAVAILABLE) from None
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from None

    def _commit(self, db: psycopg.Connection) -> None:
        try:
            xid = db.execute("SELECT pg_current_xact_id()::text").fetchone()[0]
        except psycopg.Error as exc:
            with contextlib.suppress(psycopg.Error):
                db.execute("ROLLBACK")
            raise self._unavailable(exc) from None
        try:
            db.execute("COMMIT")
            return
        except psycopg.OperationalError as exc:
            lost = exc
        # The answer to COMMIT was lost: ask again what became of it.
        deadline = time.monotonic() + self._connect_timeout
        while time.monotonic() < deadline:
            try:
                with self._lock:
                    self._db.close()
                    self._db = self._connect()
                    status = self._db.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()[0]
            except Unavailable:
                time.sleep(0.2)
                continue
            if status == "committed":
                return
            raise Unavailable(f"store {self.where}: the transaction was not committed "
                              f"({_first_line(lost)}); nothing was changed", reason=Reason.STORE_UNAVAILABLE)
        raise Unavailable(f"store {self.where} went away while committing ({_first_line(lost)}); "
                          "the write may or may not have been kept: read it back", reason=Reason.OUTCOME_UNKNOWN)

    def _unavailable(self, exc: Exception) -> Unavailable:
        return Unavailable(f"store {self.where} does not answer: {_first_line(exc)}", reason=Reason.STORE_UNAVAILABLE)

    # ------------------------------------------------------------ replicas
    def claim_owner(self, owner: str) -> None:
        """Records the deployment's ``owner`` (the first replica's) and
        refuses a replica configured with another one."""
        with self.write() as tx:
            tx.execute("INSERT INTO meta VALUES ('owner', %s) ON CONFLICT (key) DO NOTHING", (owner,))
            recorded = tx.meta("owner")
        if recorded != owner:
            raise FailedPrecondition(
                f"owner: {owner!r} differs from the owner {recorded!r} that the other replicas of store "
                f"{self.where} use: every replica needs the same owner", field="owner", value=owner,
                                     reason=Reason.STORE_INCOMPATIBLE)

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self.readers.close()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
