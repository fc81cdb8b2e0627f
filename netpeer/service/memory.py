"""An in-memory dataplane: the states the service asked for, kept as they are.

For fast tests of what the service itself decides (group commit, expiry,
repair) without root or OVN; the OVN backend has its own tests on real
daemons. It counts transactions and can be told to refuse or be unreachable,
and a test can make it drift (``tamper``) as a hand edit of OVN would.

It is also netpeerd's dataplane in simulation (``netpeer serve --dataplane
memory``, ``netpeer.daemon``): many control planes on one machine, with
real stores and real links between sites, and no traffic. There it starts
empty (the first sweep programs every network of the store into it) and
reports which networks changed (``track_changes``), as OVN's replica does,
so that a sweep at rest compares a slice of the networks, not all of them.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterable

from netpeer.core.dataplane import Desired, NetworkState, Stamp, SyncReport
from netpeer.errors import FailedPrecondition, Unavailable
from netpeer.reasons import Reason


def _shown(state: NetworkState | None):
    """What a dataplane shows of a state: addresses and links, not times or
    descriptions (the OVN rows hold the same)."""
    if state is None:
        return None
    n = state.network
    return (n.uid, n.namespace, n.name, n.subnets, n.routes,
            tuple((p.uid, p.subnets, p.routes) for p in state.peers), state.peering_names, state.attachments,
            tuple((r.network.uid, r.network.site, r.network.subnets, r.attachment) for r in state.remote_peers))


class MemoryDataplane:
    """Implements ``netpeer.core.dataplane.Dataplane``."""

    #: What ``netpeer status`` shows.
    kind = "memory"

    def __init__(self, track_changes: bool = False,
                 on_transaction: Callable[[str, float], None] = lambda kind, seconds: None):
        self.networks: dict[str, NetworkState] = {}
        self.stamp: Stamp | None = None
        self.cfg = 0               # configuration sequence of the last tracked sync
        self.applied_cfg = 0       # what "every chassis" has applied (tests move it)
        self.apply_at_once = True
        self.transactions = 0          # sync/remove_strays calls that changed or could have changed state
        self.unreachable = False       # every call raises Unavailable
        self.refuse: set[str] = set()  # uids whose sync is refused (FailedPrecondition), with the whole call
        #: Called with (kind, seconds) after every sync (``netpeer.observe.metrics``), as OVN's backend is.
        self.on_transaction = on_transaction
        self._lock = threading.Lock()
        # With track_changes: the uids changed since take_changes last asked (None: all of them).
        self._track = track_changes
        self._changed: set[str] | None = None

    # ------------------------------------------------------------ Dataplane
    @property
    def connected(self) -> bool:
        return not self.unreachable

    def start_replica(self) -> None:
        """Nothing to read: it holds what it holds (netpeerd asks OVN's backend for its replica)."""

    def wait_connected(self, timeout: float = 30.0) -> bool:
        return self.connected

    def _note(self, uids: Iterable[str]) -> None:
        if self._changed is not None:
            self._changed.update(uids)

    def _check(self) -> None:
        if self.unreachable:
            raise Unavailable("memory dataplane: unreachable (test); nothing was changed",
                              reason=Reason.DATAPLANE_UNAVAILABLE)

    def sync(self, desired: Desired, stamp: Stamp | None = None, track: bool = False) -> SyncReport:
        self._check()
        with self._lock:
            refused = sorted(self.refuse & set(desired))
            if refused:
                raise FailedPrecondition(f"memory dataplane: refused network {refused[0]} (test)",
                                         reason=Reason.DATAPLANE_REFUSED)
            started = time.perf_counter()
            self.transactions += 1
            if stamp is not None:
                self.stamp = stamp
            created = updated = deleted = 0
            for uid, state in desired.items():
                have = self.networks.get(uid)
                if state is None:
                    if have is not None:
                        del self.networks[uid]
                        deleted += 1
                elif have is None:
                    self.networks[uid] = state
                    created += 1
                elif _shown(have) != _shown(state):
                    self.networks[uid] = state
                    updated += 1
            self._note(desired)
            cfg = None
            if track:
                self.cfg += 1
                cfg = self.cfg
                if self.apply_at_once:
                    self.applied_cfg = self.cfg
        self.on_transaction("sync", time.perf_counter() - started)
        return SyncReport(created, updated, deleted, cfg)

    def programmed(self) -> int:
        return self.applied_cfg

    def configured(self) -> int:
        return self.cfg

    def waiting(self, desired: Desired) -> set[tuple[str, str]]:
        return set()   # nothing it holds waits for anything

    def drifted(self, desired: Desired) -> set[str]:
        self._check()
        with self._lock:
            return {uid for uid, state in desired.items() if _shown(self.networks.get(uid)) != _shown(state)}

    def take_changes(self) -> set[str] | None:
        """Without ``track_changes``: None (every sweep compares every
        network). With it: the networks synced, removed or tampered with
        since the last call (None the first time: a full comparison)."""
        if not self._track:
            return None
        with self._lock:
            changed, self._changed = self._changed, set()
        return changed

    def read_stamp(self) -> Stamp | None:
        self._check()
        return self.stamp

    def count_owned(self) -> int:
        self._check()
        return len(self.networks)

    def count_strays(self, keep: Iterable[str]) -> tuple[int, int]:
        self._check()
        with self._lock:
            return len(set(self.networks) - set(keep)), len(self.networks)

    def remove_strays(self, keep: Iterable[str]) -> SyncReport:
        self._check()
        with self._lock:
            self.transactions += 1
            strays = set(self.networks) - set(keep)
            for uid in strays:
                del self.networks[uid]
            self._note(strays)
            return SyncReport(deleted=len(strays))

    def read_back(self) -> list[NetworkState]:
        """What it holds, as ``--adopt-ovn`` reads a dataplane back."""
        with self._lock:
            return list(self.networks.values())

    def gateways(self) -> tuple:
        return ()   # no chassis

    def close(self) -> None:
        pass

    # ------------------------------------------------------------ for tests
    def peers_of(self, uid: str) -> set[str]:
        """The uids network ``uid`` is programmed to reach."""
        state = self.networks.get(uid)
        return {p.uid for p in state.peers} if state else set()

    def tamper(self, uid: str, state: NetworkState | None) -> None:
        """Changes what the dataplane holds for ``uid`` behind the service's back."""
        with self._lock:
            if state is None:
                self.networks.pop(uid, None)
            else:
                self.networks[uid] = state
            self._note([uid])
