"""An in-memory dataplane: the states the service asked for, kept as they are.

For fast tests of what the service itself decides (group commit, expiry,
repair) without root or OVN; the OVN backend has its own tests on real
daemons. It counts transactions and can be told to refuse or be unreachable,
and a test can make it drift (``tamper``) as a hand edit of OVN would.
"""

from __future__ import annotations

import threading
from typing import Iterable

from netpeer.core.dataplane import Desired, NetworkState, Stamp, SyncReport
from netpeer.errors import FailedPrecondition, Unavailable


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

    def __init__(self):
        self.networks: dict[str, NetworkState] = {}
        self.stamp: Stamp | None = None
        self.cfg = 0               # configuration sequence of the last tracked sync
        self.applied_cfg = 0       # what "every chassis" has applied (tests move it)
        self.apply_at_once = True
        self.transactions = 0          # sync/remove_strays calls that changed or could have changed state
        self.unreachable = False       # every call raises Unavailable
        self.refuse: set[str] = set()  # uids whose sync is refused (FailedPrecondition), with the whole call
        self._lock = threading.Lock()

    # ------------------------------------------------------------ Dataplane
    @property
    def connected(self) -> bool:
        return not self.unreachable

    def _check(self) -> None:
        if self.unreachable:
            raise Unavailable("memory dataplane: unreachable (test); nothing was changed")

    def sync(self, desired: Desired, stamp: Stamp | None = None, track: bool = False) -> SyncReport:
        self._check()
        with self._lock:
            refused = sorted(self.refuse & set(desired))
            if refused:
                raise FailedPrecondition(f"memory dataplane: refused network {refused[0]} (test)")
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
            cfg = None
            if track:
                self.cfg += 1
                cfg = self.cfg
                if self.apply_at_once:
                    self.applied_cfg = self.cfg
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
        return None   # hears of no changes: every sweep compares every network

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
            return SyncReport(deleted=len(strays))

    def read_back(self) -> list[NetworkState]:
        """What it holds, as ``--adopt-ovn`` reads a dataplane back."""
        with self._lock:
            return list(self.networks.values())

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
