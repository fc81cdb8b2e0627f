"""When a Bound pair's dataplane change has reached every chassis.

A write that changes a network's rows asks OVN to track its configuration
(``Dataplane.sync(track=True)``: OVN's own nb_cfg/hv_cfg acknowledgement)
and marks the Bound peerings of that network ``dataplane_cfg`` = that
sequence number, ``programmed_at`` unset: their ``dataplane`` is
Programming. ``Programmer`` watches what every chassis has applied
(``Dataplane.programmed()``) and stamps ``programmed_at`` on the peerings
it covers, which Watch reports as a Programmed event.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from datetime import datetime
from typing import Callable

from netpeer.core.dataplane import Dataplane
from netpeer.errors import Unavailable
from netpeer.observe.metrics import NONE, Metrics, NoMetrics
from netpeer.store.base import Store, Transaction
from netpeer.service.writes import WriteQueue

LOG = logging.getLogger(__name__)
_ANY = 2 ** 62   # above any configuration sequence number: every waiting peering


class Programmer:
    #: Peerings stamped per write.
    BATCH = 500

    def __init__(self, store: Store, dataplane: Dataplane, writes: WriteQueue, clock: Callable[[], datetime],
                 metrics: NoMetrics | Metrics = NONE):
        self.store = store
        self.dataplane = dataplane
        self.writes = writes
        self.clock = clock
        self.level = -1   # the last acknowledged sequence seen
        self.metrics = metrics
        # Whether peerings wait for the chassis (then the acknowledgement is
        # sampled every ``interval``), and whether a commit asked for a look.
        self._waiting = True
        self._due = False
        self._poked = threading.Event()
        writes.on_commit.append(self.poke)

    def poke(self) -> None:
        """A write committed (it may have marked peerings): check at the next
        tick. Also wakes ``run`` at rest (to see its ``stop``)."""
        self._due = True
        self._poked.set()

    def check(self) -> int:
        """Stamps what the chassis have acknowledged since; how many peerings."""
        # Not skipped when the level did not move: a write may commit its
        # marks after the chassis acknowledged its sequence number. The query
        # reads a partial index of the waiting peerings: nearly free at rest.
        level = self.dataplane.programmed()
        done = 0
        while True:
            with self.store.read() as tx:
                waiting = tx.programming(level, limit=self.BATCH)
            if not waiting:
                break

            def op(tx: Transaction, waiting=waiting):
                now, stamped = self.clock(), 0
                for p in waiting:
                    current = tx.get_peering(p.key)
                    if current is None or current.programmed_at is not None or current.dataplane_cfg is None \
                            or current.dataplane_cfg > level:
                        continue
                    tx.put_peering(dataclasses.replace(current, programmed_at=now))
                    stamped += 1
                return stamped, set()
            stamped = self.writes.run(op)
            done += stamped
            if not stamped or len(waiting) < self.BATCH:
                break
        self.level = level
        with self.store.read() as tx:
            self._waiting = bool(tx.programming(_ANY, limit=1))
        if done:
            self.metrics.programmed_peerings(done)
        return done

    def run(self, stop: threading.Event, interval: float = 0.05, idle: float = 0.5) -> None:
        """Until ``stop`` is set: checks every ``interval`` seconds while
        peerings wait for the chassis or after a commit here; otherwise every
        ``idle`` seconds (a write committed by another replica is seen then).
        At rest it sleeps until a commit (``poke``) or the idle look; whoever
        sets ``stop`` then pokes it to end at once."""
        next_look = 0.0
        while not stop.is_set():
            if self._waiting or self._due or not self.dataplane.connected:
                if stop.wait(interval):
                    return
            else:
                # At rest, asleep until a commit pokes or the idle look is due:
                # a tick every ``interval`` cost 0.28% of a core at 10,000
                # networks doing nothing (docs/performance-log.md, section 4).
                self._poked.wait(max(0.0, next_look - time.monotonic()))
                if stop.is_set():
                    return
            self._poked.clear()
            if not self.dataplane.connected:
                continue
            now = time.monotonic()
            if not (self._waiting or self._due or now >= next_look):
                continue
            self._due, next_look = False, now + idle
            try:
                self.check()
            except Unavailable:        # OVN or writes not there yet: the next check tries again
                pass
            except Exception as exc:
                LOG.warning("dataplane acknowledgement check failed: %s", exc)
