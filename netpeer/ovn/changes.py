"""Which networks' OVN rows changed since the repair sweep last looked.

The repair sweep used to compare every network with OVN on every pass:
12.9 s of CPU per sweep at 10,000 networks, 11.5% of a core at rest
(docs/performance-log.md). The connection already hears about every change to the rows
it replicates (OVSDB update notifications, ours and anyone else's), so it
notes here the networks each changed row belongs to, and the sweep checks
only those; a slow full pass behind it (a slice of every network per
sweep, all of them every ``full_sweep_interval``) catches anything this misses.

What maps a changed row to networks: its ``netpeer:network`` tag before and
after the change (a hand edit that strips or rewrites the tags is still seen
through the old values). When ``ovn-ic`` gives one of our transit switch
ports its tunnel key, ``on_keyed`` says so at once: the rest of that
attachment waits for it (``netpeer.ovn.ic_rows``, "Two steps"), and the
sweep that adds it should not wait for the next interval.

A change this cannot place asks for a full pass:
an untagged row named like ours (``np-``/``np_``: a squatter appears or
goes), and a reconnection, because the connection then replaces its replica
without notifying each row (``netpeer.ovn.connection``'s ``seqno``).
"""

from __future__ import annotations

import threading
from typing import Callable

from netpeer.ovn import names
from netpeer.ovn.ic_rows import TUNNEL_KEY

# Tables whose changes never concern a network's rows (OVN's acknowledgements).
_IGNORED = frozenset({"NB_Global"})


class ChangeTracker:
    """Fed by the connection's thread (``note``), drained by the sweep (``take``)."""

    def __init__(self, owner: str, on_keyed: Callable[[], None] = lambda: None):
        self.owner = owner
        self._lock = threading.Lock()
        self._uids: set[str] = set()
        self._full = True          # nothing seen yet: the first pass is a full one
        self._seqno: object = None
        #: Called (on the connection's thread) when one of our transit switch
        #: ports got its tunnel key: the daemon asks for a sweep now.
        self.on_keyed = on_keyed

    def note(self, table: str, uuid: str, old, new) -> None:
        """One row changed (``netpeer.ovn.plain.ChangeHook``: ``old`` None
        when inserted, ``new`` None when deleted)."""
        self._note(table, old, new)
        # After the row's network is noted: the sweep it asks for takes it.
        if table == "Logical_Switch_Port" and new is not None and self._got_key(old, new):
            self.on_keyed()

    def _note(self, table: str, old, new) -> None:
        if table in _IGNORED or self._full:
            # A full pass is due anyway (e.g. the initial replication, every
            # row of it): nothing to note. ``take`` clears the flag before the
            # pass reads the replica, so a change after that is noted.
            return
        row = new if new is not None else old
        ext = row.get("external_ids") or {}
        was = old.get("external_ids") if old is not None else None
        uids = {e.get(names.NETWORK) for e in (ext, was or {}) if e.get(names.OWNER) == self.owner}
        uids.discard(None)
        if uids:
            with self._lock:
                self._uids |= uids
            return
        if any(names.OWNER in e or names.STATE_OF in e for e in (ext, was or {})):
            return   # another owner's row, or our state marker
        name = row.get("name")
        if isinstance(name, str) and name.startswith(("np-", "np_")) and not name.startswith(names.TRANSIT_PREFIX):
            with self._lock:
                self._full = True

    def _got_key(self, old, new) -> bool:
        tags = new.get("external_ids") or {}
        if tags.get(names.OWNER) != self.owner or TUNNEL_KEY not in (new.get("options") or {}):
            return False
        return old is None or TUNNEL_KEY not in (old.get("options") or {})

    def take(self, seqno: object) -> set[str] | None:
        """The networks changed since the last call, or None when only a
        full pass can tell (first call, a reconnection, an unplaced change).
        ``seqno`` is the connection's ``seqno`` now."""
        with self._lock:
            uids, full = self._uids, self._full or seqno != self._seqno
            self._uids, self._full, self._seqno = set(), False, seqno
        return None if full else uids
