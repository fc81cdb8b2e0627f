"""Which replica sweeps: a lease in the shared store.

The sweep (TTL expiry, repair) and the Programmer run on exactly one
netpeerd at a time. With one process (SQLite) that process always leads
(``Solo``). With replicas on PostgreSQL (``PgLease``) the leader holds a row
of the ``leases`` table whose expiry it pushes forward every ``ttl / 3``
seconds; any replica takes the row once it has expired. Expiry is judged by
PostgreSQL's clock only, so replicas' clocks may disagree. A leader whose
renewals stop succeeding (its connection died silently, PostgreSQL went
away) stops leading on its own once ``ttl`` minus a margin has passed since
its last successful renewal was *sent*, so it has stopped before the row
can be taken over. Why a row and not ``pg_try_advisory_lock``: a session
lock outlives a silently dead client until TCP gives up (minutes), and its
holder cannot tell it lost it.

Correctness does not rest on the lease: every write and every repair runs
under the replicas' write lock and recomputes OVN from the store, so two
sweepers at once (a paused leader waking up) would only repeat work. The
lease keeps the work on one replica and says who does it (``netpeer status``).
"""

from __future__ import annotations

import abc
import logging
import os
import socket
import threading
import time
from typing import Callable

LOG = logging.getLogger(__name__)


def replica_name(listen: str) -> str:
    """How a replica is called in the lease and in status: host, pid, address."""
    return f"{socket.gethostname()} pid {os.getpid()} {listen}"


class Leadership(abc.ABC):
    """Whether this process runs the sweeps, and who does."""

    #: The process is the only one using its store.
    solo = False
    name = ""

    @abc.abstractmethod
    def leading(self) -> bool: ...

    @abc.abstractmethod
    def leader(self) -> str:
        """The leading replica's name ("" while none holds the lease)."""

    def run(self, stop: threading.Event, on_gain: Callable[[], None], on_loss: Callable[[], None]) -> None:
        """Follows the lease until ``stop``; calls ``on_gain`` / ``on_loss``
        when this process starts / stops leading."""


class Solo(Leadership):
    """One process, one store: it always leads."""

    solo = True

    def __init__(self, name: str = ""):
        self.name = name

    def leading(self) -> bool:
        return True

    def leader(self) -> str:
        return self.name


class PgLease(Leadership):
    """The ``sweeper`` lease row, on a connection of its own."""

    LEASE = "sweeper"
    #: The share of ``ttl`` a leader keeps in hand: it stops leading this much
    #: before the row could be taken (scheduling delays, clock rates).
    MARGIN = 0.2

    def __init__(self, url: str, name: str, ttl: float, connect_timeout: float = 2.0):
        from netpeer.store.pg_lease import LeaseDb
        self.name = name
        self.ttl = ttl
        self._db = LeaseDb(url, ttl / 3, connect_timeout)
        self._holder = LeaseDb(url, ttl / 3, connect_timeout)   # status calls, from other threads
        self._until = 0.0          # monotonic time until which this process may lead
        self._term = 0
        self._lock = threading.Lock()
        self._holder_lock = threading.Lock()   # the status connection, apart from the lease's state
        self.gained = 0            # how many times this process became leader

    def renew(self) -> bool:
        """One round: take the lease if it is free or expired, extend it if
        ours. Whether this process leads now."""
        sent = time.monotonic()
        term = self._db.renew(self.LEASE, self.name, self.ttl)
        with self._lock:
            if term is None:
                self._until = 0.0
            else:
                self._term = term
                self._until = sent + self.ttl * (1 - self.MARGIN)
        return term is not None

    def leading(self) -> bool:
        with self._lock:
            return time.monotonic() < self._until

    def leader(self) -> str:
        if self.leading():
            return self.name
        with self._holder_lock:
            try:
                return self._holder.holder(self.LEASE)
            except Exception:
                self._holder.close()
                return ""

    def release(self) -> None:
        """Gives the lease up at once (a clean stop: another replica takes over
        on its next round instead of after the lease expires)."""
        with self._lock:
            self._until = 0.0
        try:
            self._db.release(self.LEASE, self.name)
        except Exception as exc:
            LOG.warning("could not release the sweeper lease: %s", exc)

    def close(self) -> None:
        self._db.close()
        self._holder.close()

    # ------------------------------------------------------------ the loop
    def run(self, stop: threading.Event, on_gain: Callable[[], None], on_loss: Callable[[], None]) -> None:
        leading, failing = False, False
        try:
            while not stop.is_set():
                try:
                    self.renew()
                    if failing:
                        LOG.info("sweeper lease: the store answers again")
                    failing = False
                except Exception as exc:
                    if not failing:
                        LOG.warning("sweeper lease: cannot reach the store (%s)",
                                    (str(exc).strip().splitlines() or [type(exc).__name__])[0])
                    failing = True
                    self._db.close()
                now = self.leading()
                if now and not leading:
                    self.gained += 1
                    LOG.info("this replica leads the sweeps now (term %d)", self._term)
                    on_gain()
                elif leading and not now:
                    LOG.warning("this replica no longer leads the sweeps")
                    on_loss()
                leading = now
                stop.wait(self.ttl / 3)
        finally:
            if leading:
                on_loss()
            self.release()
            self.close()


class ReplicaWatch:
    """Which replicas are connected to the store (by the application_name of
    their sessions), so that the leader repairs at once when one goes away:
    a replica killed between its OVN commit and its store commit leaves OVN
    rows of a write that never happened, which its own restart would have
    swept away had it been alone."""

    def __init__(self, url: str):
        from netpeer.store.pg_lease import LeaseDb
        self._db = LeaseDb(url, 2.0)
        self._seen: set[str] | None = None

    def replicas(self) -> set[str]:
        return self._db.replicas()

    def look(self) -> None:
        """Notes who is connected now: ``run`` reports any of them that goes
        away from this moment on (without it, one that died before ``run``'s
        first round would go unnoticed). The store away: ``run`` takes its
        first look when it answers again."""
        try:
            self.departed()
        except Exception:
            self._seen = None
            self._db.close()

    def departed(self) -> set[str]:
        """The replicas gone since the last call (none on the first call)."""
        now = self.replicas()
        gone = (self._seen or set()) - now
        self._seen = now
        return gone

    def run(self, stop: threading.Event, on_departure: Callable[[set[str]], None], interval: float = 0.25) -> None:
        """Until ``stop``: calls ``on_departure`` with the replicas that went away."""
        try:
            while not stop.wait(interval):
                try:
                    gone = self.departed()
                except Exception:           # the store is away: the lease loop says so
                    self._seen = None
                    self._db.close()
                    continue
                if gone:
                    on_departure(gone)
        finally:
            self.close()

    def close(self) -> None:
        self._db.close()
