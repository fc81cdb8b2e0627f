"""The write queue: one write = one store transaction + one dataplane
transaction, with group commit.

A write is a function of a store transaction that changes the store and
returns ``(result, touched)``: its answer and the uids of the networks whose
dataplane must change. The dataplane is written *before* the store commits:
if it refuses or cannot be reached the store rolls back and the caller gets
the error with nothing changed; if the process dies between the two, the
dataplane holds rows the store does not know, and the repair sweep (run at
start and on a timer) removes them. The dataplane is always a function of
the store.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Iterable

from netpeer.core.dataplane import WAITS_FOR_DATAPLANE, Dataplane, NetworkState, RemotePeer, Stamp
from netpeer.errors import Unavailable
from netpeer.observe.metrics import NONE, Metrics, NoMetrics
from netpeer.core.models import NetworkKey, PeeringKey
from netpeer.reasons import Reason
from netpeer.store.base import Store, Transaction

#: What a write does inside its transaction: (its result, uids to re-program).
WriteFn = Callable[[Transaction], "tuple[object, set[str]]"]


def desired_states(tx: Transaction, uids: Iterable[str]) -> dict[str, NetworkState | None]:
    """How the dataplane should show these networks, from the store."""
    out: dict[str, NetworkState | None] = {}
    for uid in uids:
        network = tx.get_network_by_uid(uid)
        if network is None:
            out[uid] = None
            continue
        peers, names, remote = [], [], []
        for p in tx.bound_peerings_of(network.key):
            peer = tx.get_network(p.remote_key)
            if peer is None:
                continue
            if peer.site:
                slot = tx.remote_attachment(peer.site, peer.uid)
                if slot is not None:
                    remote.append(RemotePeer(peer, slot, p.name))
                continue
            peers.append(peer)
            names.append((peer.uid, p.name))
        out[uid] = NetworkState(network, tuple(sorted(peers, key=lambda n: n.key)), tuple(sorted(names)),
                                tuple(sorted(tx.attachments_of(uid).items())),
                                tuple(sorted(remote, key=lambda r: r.network.key)))
    return out


class _RollBack(Exception):
    """Ends a dry run's transaction without keeping anything."""


class _Pending:
    """One caller's write waiting in the queue; ``weight`` is how many
    writes it stands for (a batch of consents: one per consent)."""

    __slots__ = ("fn", "weight", "done", "result", "error")

    def __init__(self, fn: WriteFn, weight: int = 1):
        self.fn = fn
        self.weight = weight
        self.done = False
        self.result = None
        self.error: BaseException | None = None


def mark_pairs(tx: Transaction, network: NetworkKey, cfg: int | None, waiting_sites: set[str],
               newer_only: bool = False) -> dict[PeeringKey, int]:
    """Marks the Bound pairs of ``network`` as waiting for every chassis to
    apply ``cfg`` (when there is one; ``newer_only``: never back to an
    older one), and those towards ``waiting_sites`` as waiting for their
    link's rows first (``WAITS_FOR_DATAPLANE``). Their marks, by key."""
    marked: dict[PeeringKey, int] = {}
    if cfg is not None:
        marked.update(dict.fromkeys(tx.set_dataplane_cfg(network, cfg, newer_only=newer_only), cfg))
    if waiting_sites:
        marked.update(dict.fromkeys(tx.set_dataplane_cfg(network, WAITS_FOR_DATAPLANE, sites=waiting_sites),
                                    WAITS_FOR_DATAPLANE))
    return marked


class WriteQueue:
    """Serializes writes, committing concurrent ones together.

    Writes that arrive while another is in progress queue up; whoever takes
    the lock next runs every queued write in order in one store transaction
    (each inside its own savepoint, so one that raises undoes only its own
    changes), one dataplane transaction for all the networks they touched,
    and one commit (one fsync). Each caller still gets exactly its own result
    or error, and is answered only after the commit. If the dataplane refuses
    the group, nothing was committed and each write is re-run alone, so each
    gets the outcome it would have had.
    """

    def __init__(self, store: Store, dataplane: Dataplane, max_group: int = 64,
                 metrics: NoMetrics | Metrics = NONE):
        self.store = store
        self.dataplane = dataplane
        self.max_group = max_group
        #: Held while a group runs; the reconciler takes it to repair a network.
        self.lock = threading.RLock()
        self._pending: list[_Pending] = []
        self._pending_lock = threading.Lock()
        #: Notified when no write is queued any more (dry runs wait for it).
        self._drained = threading.Condition(self._pending_lock)
        self._held: str | None = None
        #: Called (without arguments) after every commit: watchers wake up.
        self.on_commit: list[Callable[[], None]] = []
        #: Called in every write's transaction before it commits (what this
        #: site tells other sites follows the write:
        #: ``netpeer.service.sites.SiteLinks.refresh``); returns the other
        #: sites told something new.
        self.before_commit: Callable[[Transaction], set[str]] = lambda tx: set()
        #: Called after a commit with those sites; must not block.
        self.on_sites_changed: Callable[[set[str]], None] = lambda sites: None
        self.metrics = metrics

    def hold(self, reason: str) -> None:
        """Refuses writes (UNAVAILABLE, with ``reason``) until ``release``."""
        self._held = reason

    def release(self) -> None:
        self._held = None

    @property
    def held(self) -> bool:
        """Whether writes are refused (``hold``)."""
        return self._held is not None

    def stamp(self, tx: Transaction, advance: bool) -> Stamp:
        """The stamp a dataplane transaction records: the store's id and its
        generation, advanced by one (in ``tx``) for a write."""
        generation = tx.generation()
        if advance:
            generation += 1
            tx.set_generation(generation)
        return Stamp(self.store.store_id, generation)

    def run(self, fn: WriteFn, weight: int = 1):
        """Runs ``fn`` as one write; its result, or the error it (or the
        dataplane) raised. ``weight``: how many writes ``fn`` stands for."""
        if self._held is not None:
            raise Unavailable(self._held, reason=Reason.UNAVAILABLE)
        op = _Pending(fn, weight)
        with self._pending_lock:
            self._pending.append(op)
        with self.lock:
            while not op.done:
                self._run_group(self._next_group())
        if op.error is not None:
            raise op.error
        for notify in list(self.on_commit):
            try:
                notify()
            except Exception:   # a listener gone away must not turn a committed write into an error
                pass
        return op.result

    def _next_group(self) -> list[_Pending]:
        """The queued writes the next group is made of: in order, up to
        ``max_group`` writes by weight, and at least one. A batch of many
        consents is not grouped with others: 64 batches of 1,000 in one NB
        transaction would outlast the NB timeout, and fail all together."""
        with self._pending_lock:
            take = total = 0
            for op in self._pending:
                if take and total + op.weight > self.max_group:
                    break
                take += 1
                total += op.weight
            group = self._pending[:take]
            del self._pending[:take]
            if not self._pending:
                self._drained.notify_all()
        return group

    #: A dry run waits at most this long (s) for the queued writes to go first.
    YIELD_WAIT = 1.0

    def dry_run(self, fn: WriteFn):
        """Runs ``fn`` like a write and answers what it answered, but keeps
        nothing: the store transaction is rolled back, the dataplane is not
        touched (validate-only calls). It lets the writes queued when it
        comes go first (for up to ``YIELD_WAIT``)."""
        if self._held is not None:
            raise Unavailable(self._held, reason=Reason.UNAVAILABLE)
        deadline = time.monotonic() + self.YIELD_WAIT
        with self._pending_lock:
            while self._pending and self._drained.wait(max(0.0, deadline - time.monotonic())):
                pass
        box: list = []
        with self.lock:
            try:
                with self.store.write() as tx:
                    box.append(fn(tx)[0])
                    raise _RollBack
            except _RollBack:
                pass
        return box[0]

    def _program(self, tx: Transaction, touched: set[str]) -> dict:
        """The dataplane transaction of a write; the Bound peerings of the
        networks it changed wait for the chassis' acknowledgement
        (``dataplane`` Programming until ``Programmer`` sees it). Those
        towards a site whose link's rows still wait for the dataplane
        (``SyncReport.waiting``) wait for those rows first: the chassis can
        apply this write before they exist. Returns the peerings so marked,
        by key."""
        report = self.dataplane.sync(desired_states(tx, touched), self.stamp(tx, advance=True), track=True)
        marked: dict = {}
        if report.cfg is None and not report.waiting:
            return marked
        for uid in touched:
            network = tx.get_network_by_uid(uid)
            if network is not None:
                marked.update(mark_pairs(tx, network.key, report.cfg, report.waiting_sites(uid)))
        return marked

    @staticmethod
    def _as_marked(result, marked: dict):
        """A write's answer with its peering (or each of a list's) as the
        dataplane marking left it."""
        if isinstance(result, list):
            return [WriteQueue._as_marked(r, marked) for r in result]
        key = getattr(result, "key", None)
        if key is None or key not in marked:
            return result
        return dataclasses.replace(result, dataplane_cfg=marked[key], programmed_at=None)

    def _committed(self, sites: set[str]) -> None:
        """After a commit: tell the other sites (never fails the write)."""
        if sites:
            try:
                self.on_sites_changed(sites)
            except Exception:
                pass

    def _run_alone(self, op: _Pending) -> None:
        try:
            with self.store.write() as tx:
                result, touched = op.fn(tx)
                sites = self.before_commit(tx)
                if touched:
                    result = self._as_marked(result, self._program(tx, touched))
            op.result = result
            self._committed(sites)
        except BaseException as exc:
            op.error = exc
        finally:
            op.done = True

    def _run_group(self, batch: list[_Pending]) -> None:
        started = time.perf_counter()
        try:
            self._run_batch(batch)
        finally:
            self.metrics.write_group(len(batch), time.perf_counter() - started)

    def _run_batch(self, batch: list[_Pending]) -> None:
        if len(batch) == 1 or not self.store.savepoints:
            for op in batch:
                self._run_alone(op)
            return
        done: list[tuple[_Pending, object]] = []
        failed: list[tuple[_Pending, BaseException]] = []
        try:
            with self.store.write() as tx:
                touched: set[str] = set()
                for op in batch:
                    try:
                        with tx.savepoint():
                            result, t = op.fn(tx)
                    except Exception as exc:  # this write's own error: only its changes are undone
                        failed.append((op, exc))
                        continue
                    done.append((op, result))
                    touched |= t
                sites = self.before_commit(tx)
                marked = self._program(tx, touched) if touched else {}
        except Unavailable as exc:
            # Unreachable or too slow: every write of the group would fail alike.
            for op in batch:
                op.error, op.done = exc, True
            return
        except Exception:
            # Refused (e.g. a foreign row squats on one network's name): nothing
            # was committed; run each alone so only the culprit fails.
            for op in batch:
                op.error = None
                self._run_alone(op)
            return
        for op, result in done:
            op.result, op.done = self._as_marked(result, marked), True
        for op, exc in failed:
            op.error, op.done = exc, True
        self._committed(sites)
