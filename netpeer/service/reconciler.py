"""The reconciler: TTL expiry and dataplane repair, on a timer.

Level-triggered, like neutron's maintenance task: the store is the truth and
each sweep makes the dataplane match it, network by network, so one bad row
does not stop the rest. A sweep runs at start (a crash between a dataplane
commit and a store commit leaves rows the store does not know; they go
there) and then every ``interval``. Its progress is kept in ``status`` for
the status call (``netpeer.v1.StatusService``), not only in the log.

Longer than 400 lines by a little: the sweep's steps (expiry, the slots'
grace, the changed networks and a slice of the slow pass, the look for
strays) are one loop whose order matters; each step's work is in the
modules it calls.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from datetime import datetime, timedelta
from typing import Callable, Iterable

from netpeer.core.consent import ONE_SITE
from netpeer.core.dataplane import Dataplane
from netpeer.observe.metrics import NONE, Metrics, NoMetrics
from netpeer.store.base import Store, Transaction
from netpeer.service import effects, slots
from netpeer.service.settings import Settings
from netpeer.service.writes import WriteQueue, desired_states, mark_pairs

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
    blocked: str = ""                     # why the last sweep refused to delete (empty: it did not)


class Reconciler:
    def __init__(self, store: Store, dataplane: Dataplane, writes: WriteQueue,
                 clock: Callable[[], datetime], settings: Settings = Settings(), metrics: NoMetrics | Metrics = NONE):
        self.store = store
        self.dataplane = dataplane
        self.writes = writes
        self.clock = clock
        self._status = SweepStatus()
        self._status_lock = threading.Lock()
        #: Called with the status after every sweep (replicas: the leader
        #: records it, for ``netpeer status`` on every replica).
        self.on_sweep: Callable[[SweepStatus], None] = lambda status: None
        self._blocked = ""
        #: A sweep that would delete more than this share of our dataplane
        #: rows (and at least MIN_GUARDED of them) stops and reports instead.
        self.max_delete_share = settings.repair_max_delete_share
        #: netpeerd --accept-rollback: the first stray removal may be large.
        self.allow_mass_delete_once = settings.allow_mass_delete_once
        self.metrics = metrics
        #: The sites consent asks about (``netpeer.service.sites.SiteLinks``).
        self.sites = ONE_SITE
        #: A network's slot on a site link is released this long after its
        #: last half towards that site went (``netpeer.service.slots``).
        self.attachment_grace = settings.attachment_grace
        #: The slow full pass: every network is compared once per this many
        #: seconds, a slice per sweep (``_to_check``); and the sweep interval
        #: (set by ``run``) that sizes the slices.
        self.full_pass = settings.full_sweep_interval.total_seconds()
        self.interval = 30.0
        #: Networks to look at again next sweep; the networks left in this
        #: round of the slow pass (popped from the end); whether the last
        #: sweep was a full one (then the next round skips its stray check).
        self._recheck: set[str] = set()
        self._round: list[str] = []
        self._round_slice = 1
        self._full_due = False
        self._just_full = False
        self._prune_after = 0.0
        #: Extra sweeps asked for (``sweep_soon``), as ``time.monotonic()`` times.
        self._soon: list[float] = []
        self._woken = threading.Event()

    #: Below this many rows a stray removal is never held back (crash leftovers).
    MIN_GUARDED = 20
    #: Networks compared with the dataplane per read-only drift check.
    #: (Small: each check runs on the OVN connection thread, ahead of writes.)
    REPAIR_CHECK_CHUNK = 10
    # Between full comparisons, a sweep compares the networks the dataplane
    # reports changed (``Dataplane.take_changes``) plus a slice of all
    # networks sized so that every network is compared once per
    # ``full_pass`` (``full_sweep_interval``): the slow full pass, spread
    # out so it never holds up binds the way one long pass would. It
    # catches what change reports cannot; anything they cannot place (a
    # reconnection to the NB, an untagged row named like ours) and the
    # first sweep compare every network at once.

    #: Expired peerings deleted per write transaction.
    EXPIRY_BATCH = 50
    #: Expired peerings deleted per sweep at most: the repair always gets its
    #: turn; a sweep that hit the limit is followed by another one at once.
    EXPIRY_PER_SWEEP = 2000

    @property
    def status(self) -> SweepStatus:
        with self._status_lock:
            return self._status

    def expire(self, limit: int | None = None) -> int:
        """Deletes Pending and Failed peerings past their TTL (OEP-8), in
        writes of EXPIRY_BATCH peerings each, at most ``limit`` (default: all)
        per call. Each expiry reads only the pair it ends and the Failed
        peerings of its networks, so the work is linear in what expires."""
        count = 0
        while limit is None or count < limit:
            size = self.EXPIRY_BATCH if limit is None else min(self.EXPIRY_BATCH, limit - count)
            with self.store.read() as tx:
                batch = tx.expired_peerings(self.clock(), limit=size)
            if not batch:
                return count

            def op(tx: Transaction, batch=batch):
                now, done, touched = self.clock(), 0, set()
                for p in batch:
                    current = tx.get_peering(p.key)
                    if current is None or current.expires_at is None or current.expires_at > now:
                        continue
                    LOG.info("peering %s expired in phase %s", p.key, current.phase)
                    touched |= effects.remove_peering(tx, current, now, self.sites)
                    done += 1
                return done, touched
            expired = self.writes.run(op)
            count += expired
            if not expired:
                return count   # the batch was taken by someone else meanwhile
        return count

    def _remove_strays(self) -> tuple[int, int]:
        """Deletes what we own in the dataplane that no network of the store
        explains (left by a crash, renamed or stripped of their id by hand).
        Runs before the per-network repair, so a renamed row cannot clash with
        its recreation. Returns (rows removed, errors)."""
        self._blocked = ""
        try:
            # The uids alone: reading every network whole cost 1.3 s at
            # 10,000 networks, in every sweep after a write.
            with self.store.read() as tx:
                keep = tx.network_uids()
            strays, total = self.dataplane.count_strays(keep)
            if not strays:
                return 0, 0
            with self.writes.lock, self.store.exclusive() as tx:
                keep = tx.network_uids()
                strays, total = self.dataplane.count_strays(keep)
                if self._holds_back(tx, strays, total):
                    return 0, 1
                report = self.dataplane.remove_strays(keep)
                self.allow_mass_delete_once = False
            if report.changed:
                LOG.warning("removed %d orphaned or stray OVN row(s)", report.changed)
            return report.changed, 0
        except Exception as exc:
            LOG.error("orphan sweep failed: %s", exc)
            return 0, 1

    #: Watch can resume from a revision at least this old, and from any of the newest EVENTS_KEPT.
    EVENTS_RETENTION = timedelta(days=1)
    EVENTS_KEPT = 100_000

    #: Old events are pruned at most this often (s): a write each time, and a
    #: commit wakes the watch notifier and the Programmer, which at rest
    #: should sleep.
    PRUNE_EVERY = 600.0

    def _prune_events(self) -> int:
        if time.monotonic() < self._prune_after:
            return 0
        self._prune_after = time.monotonic() + self.PRUNE_EVERY
        def op(tx: Transaction):
            return tx.prune_events(self.clock() - self.EVENTS_RETENTION, self.EVENTS_KEPT), set()
        return self.writes.run(op)

    def _holds_back(self, tx: Transaction, strays: int, total: int) -> bool:
        """Whether removing ``strays`` of our ``total`` rows is too much to do
        without a person: more than the allowed share, while the dataplane's
        stamp says no write died in between (whose rows these could be)."""
        if strays < self.MIN_GUARDED or strays <= self.max_delete_share * total or self.allow_mass_delete_once:
            return False
        stamp = self.dataplane.read_stamp()
        if stamp is not None and stamp.generation == tx.generation() + 1:
            return False  # the rows of a write that died between its OVN and its store commit
        self._blocked = (f"the repair sweep would delete {strays} of netpeer's {total} OVN rows "
                         f"({100 * strays / total:.0f}%, more than repair_max_delete_share "
                         f"{100 * self.max_delete_share:.0f}%) that no network of the store explains: "
                         "nothing was deleted. If the store was lost or restored from a backup, restart with "
                         "--adopt-ovn; if these rows should go, restart with --accept-rollback")
        LOG.error("%s", self._blocked)
        return True

    def _to_check(self) -> tuple[list[str] | None, bool]:
        """(the networks this sweep compares: all of them (None), or those
        the dataplane reports changed, those whose repair failed last time
        and the next slice of the slow full pass; whether strays are looked
        for: on a full comparison, a reported change, a new round)."""
        changed = self.dataplane.take_changes()
        if changed is None or self._full_due:
            self._full_due, self._recheck, self._round, self._just_full = False, set(), [], True
            return None, True
        uids, self._recheck = changed | self._recheck, set()
        strays = bool(changed)
        if not self._round:
            with self.store.read() as tx:
                self._round = sorted(tx.network_uids(), reverse=True)
            self._round_slice = max(1, math.ceil(len(self._round) * self.interval / self.full_pass))
            strays, self._just_full = strays or not self._just_full, False
        for _ in range(min(self._round_slice, len(self._round))):
            uids.add(self._round.pop())
        return sorted(uids), strays

    def repair(self) -> SweepReport:
        """Removes what belongs to no network, then makes the dataplane match
        the store for every network (or, between full comparisons, the
        networks ``_to_check`` names), one network per transaction so one
        bad row does not stop the rest."""
        try:
            uids, strays = self._to_check()
            # Pairs marked as waiting for rows the dataplane held back: the
            # sweep that writes the rows marks them; one that finds the rows
            # in and the pairs still marked (the mark failed, or the process
            # died between the two) marks them too.
            with self.store.read() as tx:
                awaiting = tx.awaiting_dataplane()
        except Exception as exc:   # a store that went away (PostgreSQL restarting): the next sweep, in full
            LOG.error("repair sweep: cannot read the store: %s", exc)
            self._full_due = True
            return SweepReport(errors=1)
        if uids == []:
            return SweepReport()   # nothing to compare this time
        repaired, errors = self._remove_strays() if strays else (0, 0)
        if errors:
            self._full_due = True   # try it all again next sweep
        if uids is None:
            try:
                with self.store.read() as tx:
                    uids = sorted(tx.network_uids())
            except Exception as exc:   # a store that went away (PostgreSQL restarting): the next sweep, in full
                LOG.error("repair sweep: cannot read the store: %s", exc)
                self._full_due = True
                return SweepReport(repaired_rows=repaired, errors=errors + 1)
        for k in range(0, len(uids), self.REPAIR_CHECK_CHUNK):
            part = uids[k:k + self.REPAIR_CHECK_CHUNK]
            # Cheap read-only check first, without the write lock: writes go on
            # meanwhile (a write racing the check can only make a network look
            # drifted; its repair below re-reads under the lock and changes
            # nothing). Only networks that look drifted get a write transaction.
            try:
                with self.store.read() as tx:
                    desired = desired_states(tx, part)
                suspects = self.dataplane.drifted(desired) | self._unmarked(awaiting, desired)
            except Exception as exc:
                LOG.warning("drift check failed (%s); checking networks one by one", exc)
                suspects = set(part)
                self._recheck |= set(part)
            for uid in part:
                if uid not in suspects:
                    continue
                try:
                    # The write lock is held until the pairs are marked: a
                    # write of this process in between would mark them with
                    # a newer sequence number, which this one must not undo
                    # (another replica's is kept by ``newer_only``).
                    with self.writes.lock:
                        with self.store.exclusive() as tx:
                            report = self.dataplane.sync(desired_states(tx, [uid]),
                                                         self.writes.stamp(tx, advance=False), track=True)
                        still = report.waiting_sites(uid)
                        if report.released or any(u == uid and site not in still for u, site in awaiting):
                            # No sequence number when the rows were in
                            # before (their mark was lost): the newest one.
                            cfg = report.cfg if report.cfg is not None else self.dataplane.configured()
                            self.writes.run(lambda tx, uid=uid, cfg=cfg, still=still:
                                            (self._mark(tx, uid, cfg, still), set()))
                    drift = report.changed - report.released
                    repaired += drift
                    if drift:
                        LOG.warning("repaired %d drifted OVN row(s) of network %s", drift, uid)
                    if report.released:
                        LOG.info("network %s: added %d OVN row(s) that waited for its transit port's key across "
                                 "sites", uid, report.released)
                except Exception as exc:  # keep sweeping; report below
                    errors += 1
                    self._recheck.add(uid)
                    LOG.error("repair of network %s failed: %s", uid, exc)
        return SweepReport(repaired_rows=repaired, errors=errors)

    def _unmarked(self, awaiting: set[tuple[str, str]], desired: dict) -> set[str]:
        """The networks of ``desired`` with pairs still marked as waiting for
        rows that no longer wait: their mark was lost."""
        marked = {(u, site) for u, site in awaiting if u in desired}
        if not marked:
            return set()
        return {u for u, _ in marked - self.dataplane.waiting({u: desired[u] for u, _ in marked})}

    @staticmethod
    def _mark(tx: Transaction, uid: str, cfg: int, still: set[str]) -> int:
        """Rows that waited and went in (``SyncReport.released``) belong to
        the network's Bound pairs: those that waited for them, or for an
        older sequence number, now wait for every chassis to apply ``cfg``
        (``dataplane`` Programming), as after a write; those towards sites
        whose rows ``still`` wait go on waiting."""
        network = tx.get_network_by_uid(uid)
        return len(mark_pairs(tx, network.key, cfg, still, newer_only=True)) if network is not None else 0

    def sweep(self) -> SweepReport:
        """Expiry, then repair; recorded in ``status``."""
        started = self.clock()
        expired, errors = 0, 0
        try:
            expired = self.expire(limit=self.EXPIRY_PER_SWEEP)
        except Exception as exc:
            errors += 1
            LOG.error("expiry sweep failed: %s", exc)
        try:
            slots.release_unused(self.store, self.writes, self.clock, self.attachment_grace,
                                 getattr(self.sites, "released", None))
        except Exception as exc:
            errors += 1
            LOG.error("releasing unused site link slots failed: %s", exc)
        r = self.repair()
        try:
            self._prune_events()
        except Exception as exc:
            errors += 1
            LOG.error("pruning old events failed: %s", exc)
        report = SweepReport(expired, r.repaired_rows, r.errors + errors)
        self.metrics.sweep(report.expired, report.repaired_rows, report.errors,
                           (self.clock() - started).total_seconds())
        with self._status_lock:
            t = self._status.totals
            self._status = status = SweepStatus(
                self._status.sweeps + 1, report, started, self.clock(),
                SweepReport(t.expired + report.expired, t.repaired_rows + report.repaired_rows,
                            t.errors + report.errors), self._blocked)
        try:
            self.on_sweep(status)
        except Exception as exc:   # a record for status only: never fails the sweep
            LOG.warning("could not record the sweep's status: %s", exc)
        return report

    def sweep_soon(self, delays: Iterable[float]) -> None:
        """Asks ``run`` for extra sweeps, ``delays`` seconds from now."""
        now = time.monotonic()
        with self._status_lock:
            due = [t for t in self._soon if t <= now][:1]   # one is enough (a replica that does not sweep)
            self._soon = sorted(due + [t for t in self._soon if t > now] + [now + d for d in delays])
        self._woken.set()

    def wake(self) -> None:
        """Wakes ``run`` at once, to see its ``stop``."""
        self._woken.set()

    def _pause(self, stop: threading.Event, seconds: float) -> None:
        """Waits ``seconds``, or less: until ``stop`` is set or an extra sweep
        is due. Looks at ``stop`` at least once a second, even unwoken."""
        until = time.monotonic() + seconds
        while not stop.is_set():
            now = time.monotonic()
            with self._status_lock:
                if self._soon and self._soon[0] <= now:
                    self._soon = [t for t in self._soon if t > now]
                    return
                wake_at = min([until] + self._soon[:1])
            if now >= until:
                return
            self._woken.wait(min(wake_at - now, 1.0))
            self._woken.clear()

    def run(self, stop: threading.Event, interval: float, first_delay: float = 0.2,
            before_first: Callable[[], bool] = lambda: True) -> None:
        """Sweeps until ``stop`` is set: once the dataplane is reachable, at
        once, then every ``interval`` seconds. ``before_first`` runs before
        the first sweep; if it returns False, no sweep runs."""
        first, self.interval = True, interval
        while not stop.is_set():
            if self.dataplane.connected:
                if first and not before_first():
                    return
                try:
                    report = self.sweep()
                except Exception as exc:   # never end the sweeps: the next one tries again
                    LOG.error("sweep failed: %s", exc)
                    self._pause(stop, interval)
                    continue
                if first or report.expired or report.repaired_rows or report.errors:
                    LOG.info("sweep: %d expired, %d OVN rows repaired, %d errors",
                             report.expired, report.repaired_rows, report.errors)
                first = False
                if report.expired >= self.EXPIRY_PER_SWEEP:
                    stop.wait(0.05)   # more to expire: the next sweep right away
                    continue
            self._pause(stop, interval if not first else first_delay)
