"""Whether the store and the dataplane belong together.

The dataplane is a function of the store: the repair sweep makes it match.
That is only safe if the store is the one that wrote the dataplane, and not
older than it: a deleted store file, a restored backup or a lost SQLite WAL
would otherwise make the first sweep delete the rows of acknowledged writes
without a word. So every write records a stamp in the same dataplane
transaction as its rows: the store's id and its generation (one more per
write that changed the dataplane). At start the two are compared:

- no stamp yet: a new deployment, or one written before stamps; refused only
  if the store holds no network while the dataplane holds rows of ours;
- another store's id: refused;
- a dataplane generation more than one ahead of the store's: refused (one
  ahead is a write that died between its dataplane commit and its store
  commit; the sweep removes its rows, as it always did).

A refusal is one line saying what to do: restore the right store, or start
with ``--adopt-ovn`` (rebuild the store from the dataplane's tagged rows) or
``--accept-rollback`` (make the dataplane match this store).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from datetime import datetime
from typing import Callable

from netpeer.core.dataplane import Dataplane, NetworkState, Stamp
from netpeer.core.models import DEFAULT_TTL, Peering, PeeringKey, Phase, Reason
from netpeer.errors import FailedPrecondition
from netpeer.store.base import Store

LOG = logging.getLogger(__name__)


class Mode(str, enum.Enum):
    CHECK = "check"
    ADOPT = "adopt-ovn"
    ACCEPT_ROLLBACK = "accept-rollback"


class EpochMismatch(FailedPrecondition):
    """The store and the dataplane do not belong together; nothing was changed."""


WAYS_FORWARD = ("restore the newest store and start again, or start with --adopt-ovn (rebuild the store from "
                "OVN's rows of netpeer) or --accept-rollback (make OVN match this store, deleting what it "
                "does not know)")


def mismatch(store: Store, dataplane: Dataplane, owner: str) -> str | None:
    """Why the two do not belong together, as one sentence; None if they do."""
    stamp = dataplane.read_stamp()
    with store.read() as tx:
        generation = tx.generation()
        has_networks = bool(tx.list_networks(None, limit=1))
    where = store.where or "the store"
    if stamp is None:
        if not has_networks:
            owned = dataplane.count_owned()
            if owned:
                return (f"the store {where} holds no network, but OVN holds {owned} rows of netpeer "
                        f"(owner {owner!r}): starting would delete them")
        return None
    if stamp.store_id != store.store_id:
        return (f"OVN was last written by another store (id {stamp.store_id}, generation {stamp.generation}), "
                f"not by {where} (id {store.store_id}, generation {generation})")
    if stamp.generation > generation + 1:
        return (f"the store {where} is older than OVN: it has committed {generation} changes of the dataplane, "
                f"OVN shows {stamp.generation}; starting would undo acknowledged changes")
    return None


def settle(store: Store, dataplane: Dataplane, owner: str, mode: Mode,
           adopt: Callable[[], int] | None = None) -> str:
    """Checks the pair at start; in ``ADOPT`` or ``ACCEPT_ROLLBACK`` mode,
    resolves a mismatch as asked. Returns what happened, for the log; raises
    ``EpochMismatch`` (one line) when the pair does not belong together and
    no mode says what to do."""
    why = mismatch(store, dataplane, owner)
    if why is None:
        return "store and OVN belong together"
    if mode == Mode.CHECK:
        raise EpochMismatch(f"refusing to start: {why}. To go on: {WAYS_FORWARD}", field="store",
                            value=store.where)
    stamp = dataplane.read_stamp()
    if mode == Mode.ADOPT:
        if adopt is None:
            raise EpochMismatch("--adopt-ovn: this dataplane cannot be read back into a store")
        count = adopt()
        what = f"rebuilt the store from OVN: {count} networks adopted"
    else:
        what = "accepted the rollback: OVN will be made to match the store"
    # From now on the dataplane carries this store's stamp, one past both.
    with store.write() as tx:
        generation = max(tx.generation(), stamp.generation if stamp else 0) + 1
        tx.set_generation(generation)
        dataplane.sync({}, Stamp(store.store_id, generation))
    LOG.warning("%s (%s)", what, why)
    return what


def adopt(store: Store, states: list[NetworkState], now: datetime) -> int:
    """Puts the networks and Bound pairs read back from the dataplane into
    the store, next to what it holds (a network it knows, by uid or by name,
    is kept as the store has it). Returns how many networks were added."""
    added = 0
    with store.write() as tx:
        for state in states:
            n = state.network
            if tx.get_network_by_uid(n.uid) is None and tx.get_network(n.key) is None:
                tx.put_network(dataclasses.replace(n, create_time=now, update_time=now))
                added += 1
        for state in states:
            local = tx.get_network_by_uid(state.network.uid)
            for peer_uid, peering in state.peering_names:
                remote = tx.get_network_by_uid(peer_uid)
                if local is None or remote is None or tx.find_peering_to(local.key, remote.key) is not None:
                    continue
                name = peering or f"to-{remote.name}"[:63].rstrip("-")
                if tx.get_peering(PeeringKey(local.namespace, local.name, name)) is not None:
                    continue
                tx.put_peering(Peering(local.namespace, local.name, name, remote.namespace, remote.name, local.uid,
                                       remote.uid, DEFAULT_TTL, "adopted from OVN", Phase.BOUND, Reason.BOUND,
                                       f"peered with {remote.key}", now, now, 1))
    return added
