"""A test-only build of netpeerd with one fault planted in it, to show that
the checker catches each kind of fault it is meant to catch. Never used
outside tests/linearizability; netpeerd itself knows nothing of it.

    NETPEER_TEST_PLANT=PLANT python -m tests.linearizability.planted serve --config FILE

patches netpeer's classes in this process, then runs netpeerd as
``netpeer serve`` does. The variable is read here only; a value that names
no plant is refused with one line. PLANT is one of:

``ack-before-commit``
    the store answers a write before its commit, which follows a moment
    later (SQLite): a read right after the answer does not see the write,
    and a kill in between loses it.
``stale-follower-reads``
    a replica that does not lead answers GetPeering and ListNetworks from a
    cache it refreshes every two seconds (PostgreSQL replicas).
``paused-leader-keeps-lease``
    the sweeper lease is timed with the process's own CPU clock, which stops
    while the process is paused, and a renewal refused because another
    replica took over does not end it: a leader paused for longer than its
    lease wakes up still leading (PostgreSQL replicas).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time

from netpeer_dev.process import NetpeerdProcess

VARIABLE = "NETPEER_TEST_PLANT"
COMMIT_DELAY_S = 0.1
CACHE_S = 2.0


def _ack_before_commit() -> None:
    from netpeer.store import sqlite

    @contextlib.contextmanager
    def write(self):
        gate = self.__dict__.setdefault("_planted_gate", threading.Lock())   # one writer at a time still
        gate.acquire()
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield sqlite.SqliteTx(self._db)
        except BaseException:
            self._db.execute("ROLLBACK")
            gate.release()
            raise

        def commit_later():
            time.sleep(COMMIT_DELAY_S)   # not polling: the commit is late on purpose
            try:
                self._db.execute("COMMIT")
            finally:
                gate.release()
        threading.Thread(target=commit_later, name="planted-commit", daemon=True).start()

    sqlite.SqliteStore.write = write


def _stale_follower_reads() -> None:
    from netpeer import errors
    from netpeer.service import operations

    def cached(fn):
        @functools.wraps(fn)
        def read(self, caller, *args, **kwargs):
            if self.leadership.leading():
                return fn(self, caller, *args, **kwargs)
            cache = self.__dict__.setdefault("_planted_cache", {})
            key = (fn.__name__, args, tuple(sorted(kwargs.items())))
            hit = cache.get(key)
            if hit is None or time.monotonic() - hit[0] > CACHE_S:
                try:
                    hit = (time.monotonic(), fn(self, caller, *args, **kwargs))
                except errors.NotFound as exc:
                    hit = (time.monotonic(), exc)
                cache[key] = hit
            if isinstance(hit[1], errors.NotFound):
                raise hit[1]
            return hit[1]
        return read

    operations.Service.get_peering = cached(operations.Service.get_peering)
    operations.Service.list_networks = cached(operations.Service.list_networks)


def _paused_leader_keeps_lease() -> None:
    from netpeer.service import leader

    def renew(self) -> bool:
        sent = time.process_time()
        term = self._db.renew(self.LEASE, self.name, self.ttl)
        with self._lock:
            if term is not None:
                self._term = term
                self._until = sent + self.ttl * (1 - self.MARGIN)
        return term is not None

    def leading(self) -> bool:
        with self._lock:
            return time.process_time() < self._until

    leader.PgLease.renew = renew
    leader.PgLease.leading = leading


PLANTS = {"ack-before-commit": _ack_before_commit, "stale-follower-reads": _stale_follower_reads,
          "paused-leader-keeps-lease": _paused_leader_keeps_lease}


class PlantedNetpeerd(NetpeerdProcess):
    """netpeerd as a child process, built with ``plant``."""

    module = "tests.linearizability.planted"

    def __init__(self, *args, plant: str, **kwargs):
        if plant not in PLANTS:
            raise ValueError(f"plant: {plant!r} is not one of {', '.join(PLANTS)}")
        super().__init__(*args, **kwargs)
        self.plant = plant

    def spawn(self, extra_env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> int:
        from tests.support import ROOT
        env = {**(extra_env or {}), VARIABLE: self.plant,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))}
        return super().spawn(env, args)


def main() -> int:
    plant = os.environ.get(VARIABLE, "")
    if plant not in PLANTS:
        sys.stderr.write(f"planted netpeerd: {VARIABLE}: {plant!r} is not one of {', '.join(PLANTS)}\n")
        return 2
    PLANTS[plant]()
    from netpeer.cli.main import main as netpeer_main
    return netpeer_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
