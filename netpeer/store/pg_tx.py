"""The PostgreSQL store's transaction: the SQL stores' transaction
(``netpeer.store.sql``, with the cross-site mirror of
``netpeer.store.sites_sql``) run on PostgreSQL. Its statements are shared:
``_q`` turns their ``?`` placeholders into psycopg's ``%s``; only the
statements whose dialects differ (upserts, the token decoy, savepoints, the
newest change's place in the sequence) are replaced here. A lost connection becomes
``Unavailable``: the write changed nothing."""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Iterator

import psycopg

from netpeer.errors import Unavailable
from netpeer.reasons import Reason
from netpeer.store.codec import NET_COLS, PEER_COLS, TOKEN_COLS, us
from netpeer.store.sql import SqlTx

_DECOY = ("'decoy', '" + "0" * 64 + "', '[\"decoy-namespace\"]', 0, '', 0::bigint, NULL::bigint")


def _upsert(table: str, cols: str, key: tuple[str, ...]) -> str:
    names = [c.strip() for c in cols.split(",")]
    sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in names if c not in key)
    return (f"INSERT INTO {table} ({cols}) VALUES ({', '.join(['?'] * len(names))}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {sets}")


def placeholders(sql: str) -> str:
    """``?`` placeholders as psycopg's (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgTx(SqlTx):
    """The SQL stores' transaction in PostgreSQL's words."""

    _PUT_NETWORK = _upsert("networks", NET_COLS, ("namespace", "name"))
    _PUT_PEERING = _upsert("peerings", PEER_COLS, ("namespace", "network", "name"))
    _PUT_TOKEN = _upsert("tokens", TOKEN_COLS, ("token_id",))
    # An unknown id reads (and parses) a decoy row instead of nothing.
    _GET_TOKEN = (f"SELECT * FROM (SELECT {TOKEN_COLS}, 1 AS found FROM tokens WHERE token_id=? "
                  f"UNION ALL SELECT {_DECOY}, 0) t ORDER BY found DESC LIMIT 1")

    def __init__(self, db: psycopg.Connection, where: str):
        super().__init__(db)
        self._where = where
        self._savepoints = 0

    def execute(self, sql: str, args=None) -> psycopg.Cursor:
        """One statement in psycopg's own dialect (``%s`` placeholders)."""
        try:
            return self._db.execute(sql, args)
        except psycopg.OperationalError as exc:
            line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise Unavailable(f"store {self._where} does not answer: {line}", reason=Reason.STORE_UNAVAILABLE) from None

    def _q(self, sql: str, args=()):
        return self.execute(placeholders(sql), args) if args else self.execute(sql)

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        self._savepoints += 1
        name = f"op{self._savepoints}"
        self.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            self._forget()
            with contextlib.suppress(psycopg.Error, Unavailable):
                self.execute(f"ROLLBACK TO SAVEPOINT {name}")
                self.execute(f"RELEASE SAVEPOINT {name}")
            raise
        self.execute(f"RELEASE SAVEPOINT {name}")

    # events
    def _sequence(self) -> int:
        row = self._one("SELECT max(revision) FROM events")
        if row[0] is not None:
            return row[0]
        # None kept: the newest pruned (recorded by prune_events), not the
        # identity's counter, which a transaction in progress may have moved.
        return int(self.meta("events_head") or 0)

    def prune_events(self, older_than: datetime, keep: int) -> int:
        head = self._sequence()
        self._q("INSERT INTO meta VALUES ('events_head', ?) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (str(head),))
        return self._q("DELETE FROM events WHERE time < ? AND revision <= ?", (us(older_than), head - keep)).rowcount
