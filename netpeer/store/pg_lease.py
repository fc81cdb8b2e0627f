"""The statements behind the replicas' sweeper lease and replica watch
(``netpeer.service.leader``), on connections of their own: the only
PostgreSQL the service layer uses outside the store's transactions."""

from __future__ import annotations

import os
import socket

import psycopg

#: PostgreSQL's application_name of every connection of a replica (at most 63 bytes).
APP_PREFIX = "netpeerd "


def application_name() -> str:
    return f"{APP_PREFIX}{socket.gethostname()[:40]}:{os.getpid()}"


class LeaseDb:
    """One autocommit connection (re-made when it broke). ``timeout`` (s)
    bounds each statement and, over TCP, how long unacknowledged data may
    wait before the connection counts as dead."""

    def __init__(self, url: str, timeout: float, connect_timeout: float = 2.0):
        self.url = url
        self._ms = max(1, int(timeout * 1000))
        self._connect_timeout = max(1, int(connect_timeout))
        self._db: psycopg.Connection | None = None

    def _conn(self) -> psycopg.Connection:
        if self._db is None or self._db.closed or self._db.broken:
            self.close()
            self._db = psycopg.connect(self.url, autocommit=True, connect_timeout=self._connect_timeout,
                                       options=f"-c statement_timeout={self._ms}", application_name=application_name(),
                                       keepalives=1, keepalives_idle=1, keepalives_interval=1, keepalives_count=2,
                                       tcp_user_timeout=self._ms)
        return self._db

    def renew(self, lease: str, me: str, ttl: float) -> int | None:
        """Takes ``lease`` if free or expired, extends it if ``me`` holds it
        (PostgreSQL's clock decides); its term, or None if another holds it."""
        row = self._conn().execute(
            "INSERT INTO leases (name, holder, term, expires_at) "
            "VALUES (%(lease)s, %(me)s, 1, clock_timestamp() + make_interval(secs => %(ttl)s)) "
            "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at, "
            "  term = leases.term + CASE WHEN leases.holder = EXCLUDED.holder THEN 0 ELSE 1 END "
            "WHERE leases.holder = EXCLUDED.holder OR leases.expires_at < clock_timestamp() "
            "RETURNING term", {"lease": lease, "me": me, "ttl": ttl}).fetchone()
        return row[0] if row else None

    def holder(self, lease: str) -> str:
        """Who holds ``lease`` now ("" if nobody)."""
        row = self._conn().execute("SELECT holder FROM leases WHERE name=%s AND expires_at > clock_timestamp()",
                                   (lease,)).fetchone()
        return row[0] if row else ""

    def release(self, lease: str, me: str) -> None:
        self._conn().execute("DELETE FROM leases WHERE name=%s AND holder=%s", (lease, me))

    def replicas(self) -> set[str]:
        """The application names of the replicas connected to this database."""
        rows = self._conn().execute("SELECT DISTINCT application_name FROM pg_stat_activity "
                                    "WHERE datname = current_database() AND application_name LIKE %s",
                                    (APP_PREFIX + "%",)).fetchall()
        return {r[0] for r in rows}

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
