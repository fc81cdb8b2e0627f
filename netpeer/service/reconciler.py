"""The reconciler: TTL expiry and dataplane repair, on a timer.

Level-triggered, like neutron's maintenance task: the store is the truth and
each sweep makes the dataplane match it, network by network, so one bad row
does not stop the rest. A sweep runs at start (a crash between a dataplane
commit and a store commit leaves rows the store does not know; they go
there) and then every ``interval``. Its progress is kept in ``status`` for
the status call (``netpeer.v1.StatusService``), not only in the log.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from datetime import datetime
from typing import Callable

from netpeer.core.dataplane import Dataplane
from netpeer.store.base import Store, Transaction, iter_all_networks
from netpeer.service import effects
from netpeer.service.writes import WriteQueue, desired_states

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SweepReport:
    expired: int = 0
    repaired_rows: int = 0
    errors: int = 0


@dataclasses.dataclass(frozen=True)
class SweepStatus:
    """What the sweeps have done so far."""

    sweeps: int = 0                       # completed sweeps since start
    last: SweepReport | None = None       # the last completed sweep
    last_started: datetime | None = None
    last_finished: datetime | None = None
    totals: SweepReport = SweepReport()   # summed over all sweeps


class Reconciler:
    def __init__(self, store: Store, dataplane: Dataplane, writes: WriteQueue,
                 clock: Callable[[], datetime]):
        self.store = store
        self.dataplane = dataplane
        self.writes = writes
        self.clock = clock
        self._status = SweepStatus()
        self._status_lock = threading.Lock()

    #: Networks compared with the dataplane per read-only drift check.
    #: (Small: each check runs on the OVN connection thread, ahead of writes.)
    REPAIR_CHECK_CHUNK = 10
    #: Expired peerings read per batch.
    EXPIRY_BATCH = 100

    @property
    def status(self) -> SweepStatus:
        with self._status_lock:
            return self._status

    def expire(self) -> int:
        """Deletes Pending and Failed peerings past their TTL (OEP-8)."""
        count = 0
        while True:
            with self.store.read() as tx:
                batch = tx.expired_peerings(self.clock(), limit=self.EXPIRY_BATCH)
            if not batch:
                return count
            for p in batch:
                def op(tx: Transaction, p=p):
                    current = tx.get_peering(p.key)
                    now = self.clock()
                    if current is None or current.expires_at is None or current.expires_at > now:
                        return 0, set()
                    LOG.info("peering %s expired in phase %s", p.key, current.phase)
                    return 1, effects.remove_peering(tx, current, now)
                count += self.writes.run(op)

    def _remove_strays(self) -> tuple[int, int]:
        """Deletes what we own in the dataplane that no network of the store
        explains (left by a crash, renamed or stripped of their id by hand).
        Runs before the per-network repair, so a renamed row cannot clash with
        its recreation. Returns (rows removed, errors)."""
        try:
            with self.store.read() as tx:
                keep = [n.uid for n in iter_all_networks(tx)]
            if not self.dataplane.has_strays(keep):
                return 0, 0
            with self.writes.lock, self.store.read() as tx:
                keep = [n.uid for n in iter_all_networks(tx)]
                report = self.dataplane.remove_strays(keep)
            if report.changed:
                LOG.warning("removed %d orphaned or stray OVN row(s)", report.changed)
            return report.changed, 0
        except Exception as exc:
            LOG.error("orphan sweep failed: %s", exc)
            return 0, 1

    def repair(self) -> SweepReport:
        """Removes what belongs to no network, then makes the dataplane match
        the store for every network, one network per transaction so one bad
        row does not stop the rest."""
        repaired, errors = self._remove_strays()
        with self.store.read() as tx:
            uids = [n.uid for n in iter_all_networks(tx)]
        for k in range(0, len(uids), self.REPAIR_CHECK_CHUNK):
            part = uids[k:k + self.REPAIR_CHECK_CHUNK]
            # Cheap read-only check first, without the write lock: writes go on
            # meanwhile (a write racing the check can only make a network look
            # drifted; its repair below re-reads under the lock and changes
            # nothing). Only networks that look drifted get a write transaction.
            try:
                with self.store.read() as tx:
                    desired = desired_states(tx, part)
                suspects = self.dataplane.drifted(desired)
            except Exception as exc:
                LOG.warning("drift check failed (%s); checking networks one by one", exc)
                suspects = set(part)
            for uid in part:
                if uid not in suspects:
                    continue
                try:
                    with self.writes.lock, self.store.read() as tx:
                        report = self.dataplane.sync(desired_states(tx, [uid]))
                    repaired += report.changed
                    if report.changed:
                        LOG.warning("repaired %d drifted OVN row(s) of network %s", report.changed, uid)
                except Exception as exc:  # keep sweeping; report below
                    errors += 1
                    LOG.error("repair of network %s failed: %s", uid, exc)
        return SweepReport(repaired_rows=repaired, errors=errors)

    def sweep(self) -> SweepReport:
        """Expiry, then repair; recorded in ``status``."""
        started = self.clock()
        expired, errors = 0, 0
        try:
            expired = self.expire()
        except Exception as exc:
            errors += 1
            LOG.error("expiry sweep failed: %s", exc)
        r = self.repair()
        report = SweepReport(expired, r.repaired_rows, r.errors + errors)
        with self._status_lock:
            t = self._status.totals
            self._status = SweepStatus(
                self._status.sweeps + 1, report, started, self.clock(),
                SweepReport(t.expired + report.expired, t.repaired_rows + report.repaired_rows,
                            t.errors + report.errors))
        return report

    def run(self, stop: threading.Event, interval: float, first_delay: float = 0.2) -> None:
        """Sweeps until ``stop`` is set: once the dataplane is reachable, at
        once, then every ``interval`` seconds."""
        first = True
        while not stop.is_set():
            if self.dataplane.connected:
                report = self.sweep()
                if first or report.expired or report.repaired_rows or report.errors:
                    LOG.info("sweep: %d expired, %d OVN rows repaired, %d errors",
                             report.expired, report.repaired_rows, report.errors)
                first = False
            stop.wait(interval if not first else first_delay)
