"""A bounded pool of read connections, shared by both stores.

A connection is taken for one read and given back, so the number a store
holds depends on how many reads run at once, never on how many threads
ever read: netpeerd serves some requests on threads that come and go, and
a connection kept per thread once outlived every such thread (one metrics
scrape left one SQLite connection open for good).

Taking waits while ``maximum`` connections are in use, at most ``wait``
seconds (then ``Unavailable``); the pool never opens more. Connections
given back are reused newest first, and those idle for longer than
``idle`` seconds beyond the ``keep`` newest are closed when the pool is
next used (netpeerd reads twice a second for its health, so no thread of
its own is needed for that).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Generic, TypeVar

from netpeer.errors import Unavailable
from netpeer.reasons import Reason

C = TypeVar("C")


class Pool(Generic[C]):
    """Connections made by ``connect()`` and closed by ``close_connection``."""

    def __init__(self, connect: Callable[[], C], close_connection: Callable[[C], None], *, maximum: int,
                 keep: int = 2, idle: float = 30.0, wait: float = 10.0, where: str = "the store",
                 clock: Callable[[], float] = time.monotonic):
        if not 0 <= keep <= maximum or maximum < 1:
            raise ValueError(f"a pool needs 0 <= keep ({keep}) <= maximum ({maximum}) and maximum >= 1")
        #: Opens a connection (replaceable, to watch the connections a store opens).
        self.connect = connect
        self._close = close_connection
        self.maximum, self.keep, self.idle, self.wait = maximum, keep, idle, wait
        self._where = where
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._idle: list[tuple[C, float]] = []     # (connection, given back at), oldest first
        self._busy: list[C] = []
        self._opening = 0                           # slots taken by connections being opened
        self._closed = False

    # ------------------------------------------------------------ use
    def take(self) -> C:
        """A connection for one use; give it back with ``give``."""
        deadline = self._clock() + self.wait
        with self._cond:
            while True:
                if self._closed:
                    raise Unavailable(f"{self._where} is closed", reason=Reason.STORE_UNAVAILABLE)
                if self._idle:
                    db = self._idle.pop()[0]
                    self._busy.append(db)
                    stale = self._stale()
                    break
                if self.open < self.maximum:
                    self._opening += 1
                    db, stale = None, self._stale()
                    break
                left = deadline - self._clock()
                if left <= 0:
                    raise Unavailable(f"{self._where}: all {self.maximum} read connections stayed busy for "
                                      f"{self.wait:g}s; retry", reason=Reason.STORE_UNAVAILABLE)
                self._cond.wait(left)
        self._close_all(stale)
        if db is not None:
            return db
        try:
            db = self.connect()
        except BaseException:
            with self._cond:
                self._opening -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._opening -= 1
            if self._closed:   # closed while it was being opened
                closed = True
            else:
                self._busy.append(db)
                closed = False
        if closed:
            self._close_all([db])
            raise Unavailable(f"{self._where} is closed", reason=Reason.STORE_UNAVAILABLE)
        return db

    def give(self, db: C, broken: bool = False) -> None:
        """Gives back a connection ``take`` returned; a ``broken`` one is
        closed instead of kept. After ``close``, every connection given
        back is closed by the thread that gives it back."""
        with self._cond:
            self._busy.remove(db)
            if broken or self._closed:
                stale = [db]
            else:
                self._idle.append((db, self._clock()))
                stale = self._stale()
            self._cond.notify()
        self._close_all(stale)

    def close_idle(self) -> None:
        """Closes every idle connection (they all went to a server that
        restarted, say); busy ones stay with their users."""
        with self._cond:
            stale, self._idle = [db for db, _ in self._idle], []
        self._close_all(stale)

    def close(self) -> None:
        """Closes the idle connections now and each busy one when its
        thread gives it back (closing a connection another thread is
        using is not safe for every driver); later ``take`` calls fail."""
        with self._cond:
            self._closed = True
            stale, self._idle = [db for db, _ in self._idle], []
            self._cond.notify_all()
        self._close_all(stale)

    # ------------------------------------------------------------ state
    @property
    def open(self) -> int:
        """Connections open or being opened."""
        return len(self._idle) + len(self._busy) + self._opening

    def connections(self) -> list[C]:
        """The open connections, idle and busy."""
        with self._cond:
            return [db for db, _ in self._idle] + list(self._busy)

    # ------------------------------------------------------------ inside
    def _stale(self) -> list[C]:
        """Takes out (under the lock) the idle connections beyond ``keep``
        that sat idle longer than ``idle``: the oldest are first."""
        limit = self._clock() - self.idle
        count = 0
        while len(self._idle) - count > self.keep and self._idle[count][1] < limit:
            count += 1
        stale = [db for db, _ in self._idle[:count]]
        del self._idle[:count]
        return stale

    def _close_all(self, connections: list[C]) -> None:
        for db in connections:
            try:
                self._close(db)
            except Exception:   # closing what already failed: nothing more to do with it
                pass
