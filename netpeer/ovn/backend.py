"""The OVN northbound backend: netpeer's ``Dataplane`` (``netpeer.core.dataplane``).

Every write is one NB transaction computed from pure data: the replica of
the rows netpeer reads (``netpeer.ovn.connection``, plain values) and each
network's desired rows (``netpeer.ovn.rows``) give the operations
(``netpeer.ovn.plan``) that insert what is missing, rewrite columns that
drifted and delete what should not be there. Only rows tagged with our owner
in ``external_ids`` are ever changed or deleted; a row of someone else's on
one of our names stops its network. Reads (drift, strays, the stamp, what
our rows describe) look at the replica and change nothing.

Failures come out typed: ``Unavailable`` (unreachable, still reading the
replica, no answer in time), ``FailedPrecondition`` (the NB refused, or a
foreign row squats on one of our names, or a row we need is missing).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Callable, Iterable

from netpeer.core.dataplane import Desired, Gateway, Stamp, SyncReport
from netpeer.errors import FailedPrecondition, Unavailable
from netpeer.ovn import early, names, owned, plan, rows
from netpeer.ovn.changes import ChangeTracker
from netpeer.ovn.connection import Connection, Disconnected, Refused, TimedOut, TryAgain
from netpeer.ovn.gateways import Gateways
from netpeer.ovn.ic_rows import SiteContext
from netpeer.ovn.names import NB_SCHEMA
from netpeer.ovn.plain import PlainReplica
from netpeer.ovn.plan import ForeignRowConflict, MissingRow
from netpeer.ovn.ports import InstancePort, InstancePorts
from netpeer.ovn.row import Row
from netpeer.ovn.rows import ROOT_TABLES
from netpeer.reasons import Reason

LOG = logging.getLogger(__name__)

# The tables and columns netpeer reads and writes; the replica holds only these.
COLUMNS: dict[str, list[str]] = {
    "NB_Global": ["nb_cfg", "sb_cfg", "hv_cfg"],
    "Logical_Router": ["name", "ports", "static_routes", "policies", "external_ids", "options"],
    "Logical_Router_Port": ["name", "mac", "networks", "peer", "external_ids", "ha_chassis_group"],
    "Logical_Router_Static_Route": ["ip_prefix", "nexthop", "output_port", "external_ids"],
    "Logical_Router_Policy": ["priority", "match", "action", "external_ids"],
    "Logical_Switch": ["name", "ports", "external_ids"],
    "Logical_Switch_Port": ["name", "type", "addresses", "options", "external_ids", "up"],
    "Address_Set": ["name", "addresses", "external_ids"],
    "HA_Chassis_Group": ["name"],
}
# Tables of rows we only refer to by name (never change).
REF_TABLES = ("HA_Chassis_Group",)
# Longest pause between two attempts to (re)connect to an NB member. When a
# clustered NB loses its leader, the members that answer first are followers
# that the leader check leaves; a backoff doubling to 8 s kept netpeerd
# UNAVAILABLE for 15-16 s after a leader kill, although a new leader was
# elected in about 1.2 s (tests/faults/test_ovn_faults.py).
RECONNECT_BACKOFF_MS = 1000

# How long a backend made with ``stamp_first`` waits for the first stamp read
# before it asks for its replica anyway.
STAMP_FIRST_S = 2.0


class OvnBackend:
    """A connection to the OVN NB database and the operations netpeer needs.

    The connection is made in the background (the NB schema is fetched from
    the server, so it always matches the OVN version there) and re-made
    after a loss; while it is down, calls fail at once with ``Unavailable``.
    ``remote`` may list the members of a clustered NB, comma-separated: the
    backend talks to the leader only and follows it through elections
    (tests/faults/test_ovn_faults.py).

    With ``stamp_first``, the replica is asked for only after the first
    ``read_stamp`` (or ``start_replica``; at most ``STAMP_FIRST_S`` later).
    ovsdb-server builds a monitor's first reply in one go, seconds at 10,000
    networks, and a stamp read sent just after it waited for all of it
    (docs/performance-log.md, section 4, "The collector, and the stamp first").
    """

    kind = "ovn"

    def __init__(self, remote: str, owner: str = "netpeer", timeout: float = 10.0, site: SiteContext | None = None,
                 stamp_first: bool = False, on_transaction: Callable[[str, float], None] = lambda kind, seconds: None,
                 on_keyed: Callable[[], None] = lambda: None, sb: str = ""):
        """``on_transaction``: told (kind, seconds) after every NB transaction
        (``netpeer.observe.metrics``); ``on_keyed``: told, on the connection's
        thread, when one of our transit switch ports got its tunnel key
        (``ChangeTracker``)."""
        self.remote = remote
        self.owner = owner
        #: This site, for networks peered with other sites (None: no sites).
        self.site = site
        self.timeout = timeout
        self.ports = InstancePorts(self)
        #: The networks whose rows changed in the replica since the sweep last asked.
        self.changes = ChangeTracker(owner, on_keyed)
        self.on_transaction = on_transaction
        self._conn = Connection(remote, NB_SCHEMA, COLUMNS, named=ROOT_TABLES + REF_TABLES,
                                on_change=self.changes.note, timeout=timeout, backoff=RECONNECT_BACKOFF_MS / 1000,
                                hold=STAMP_FIRST_S if stamp_first else 0.0, name="ovn-nb")
        #: The site's gateway chassis (``sb``: the site's SB, for which one is active).
        self._gateways = Gateways(self._conn, site.gateway_group, sb) if site is not None else None

    # ------------------------------------------------------------ connection
    def start_replica(self) -> None:
        """Ask for the replica now (``stamp_first``: without a stamp read)."""
        self._conn.start_monitor()

    def wait_connected(self, timeout: float = 30.0) -> bool:
        return self._conn.wait_ready(timeout)

    @property
    def connected(self) -> bool:
        """Connected to the NB leader, with its replica whole."""
        return self._conn.ready

    def _unavailable(self) -> Unavailable:
        if self._conn.up:   # the replica is still arriving: what it lacks would look absent
            return Unavailable(f"netpeerd is still reading OVN northbound database {self.remote}; nothing was "
                               "changed, retry", reason=Reason.DATAPLANE_UNAVAILABLE)
        return Unavailable(f"OVN northbound database {self.remote} is unreachable; nothing was changed, retry",
                           reason=Reason.DATAPLANE_UNAVAILABLE)

    # ------------------------------------------------------------ one read, one write
    def read(self, read: Callable[[PlainReplica], object]):
        """``read(replica)`` on the rows of one moment (``Unavailable`` while
        there is no whole replica)."""
        conn = self._conn
        with conn.lock:
            if not conn.ready:
                raise self._unavailable()
            return read(conn.replica)

    def write(self, compute: Callable[[PlainReplica], tuple[list, object]], what: str):
        """Commits the operations ``compute(replica)`` gives (with the result
        to return) in one NB transaction; nothing when there are none.
        Returns (that result, the NB's reply or None). Every
        failure comes out as ``Unavailable`` or ``FailedPrecondition``.

        A plan made from a replica that had not yet heard of another
        replica's transaction fails its wait on the state marker (``plan``);
        it is computed again once the replica changed, until the timeout.
        A refusal is tried once more after the replica moved on: a transaction
        that timed out may commit later (OVSDB writes are at-least-once, e.g.
        across an NB leader change), and operations computed just before that
        late commit arrived would insert a row that now exists. Computed
        again on a fresh replica, they find it. A connection lost before the
        reply is waited for (within the timeout) and the operations computed
        again on the new one."""
        conn = self._conn
        deadline = time.monotonic() + self.timeout
        refused = 0
        while True:
            try:
                with conn.lock:
                    if not conn.ready:
                        raise self._unavailable()
                    seqno, link = conn.change_seqno, conn.seqno
                    ops, result = compute(conn.replica)
            except (ForeignRowConflict, MissingRow) as exc:
                raise FailedPrecondition(f"OVN: {exc}; nothing was changed", reason=Reason.DATAPLANE_CONFLICT) from exc
            if not ops:
                return result, None
            started = time.perf_counter()
            try:
                reply = conn.transact(ops, max(0.1, deadline - time.monotonic()))
            except Refused as exc:
                LOG.warning("OVN NB refused %s: %.300s", what, exc)
                refused += 1
                if refused == 2:
                    raise FailedPrecondition(
                        f"OVN refused the change ({str(exc)[:200]}); nothing was changed. netpeerd's repair "
                        "sweep restores hand-edited rows: retry after it ran", reason=Reason.DATAPLANE_REFUSED) from exc
                self._wait_for_change(seqno, 1.0)
                continue
            except TryAgain as exc:
                # Most often the plan's wait on the state marker: another replica's
                # transaction came first, and the replica is about to hear of it.
                if time.monotonic() + 0.1 < deadline:
                    self._wait_for_change(seqno, 0.1)
                    continue
                LOG.warning("OVN NB %s could not commit within %gs: %.200s", what, self.timeout, exc)
                raise Unavailable(f"OVN northbound database {self.remote} could not commit within "
                                  f"{self.timeout:g}s; the change was not recorded, retry",
                                  reason=Reason.DATAPLANE_UNAVAILABLE) from exc
            except TimedOut as exc:
                # A timed-out transaction may still commit later: the repair sweep reconciles it.
                LOG.warning("OVN NB %s timed out after %gs", what, self.timeout)
                raise Unavailable(f"OVN northbound database {self.remote} did not answer within "
                                  f"{self.timeout:g}s; the change was not recorded, retry",
                                  reason=Reason.DATAPLANE_UNAVAILABLE) from exc
            except Disconnected as exc:
                # Lost before the reply (e.g. the NB leader died): computed again on the
                # next leader's replica, which holds the change if it committed after all.
                while conn.seqno == link and time.monotonic() < deadline:   # until its thread has seen the loss
                    time.sleep(0.02)
                if conn.wait_ready(deadline - time.monotonic()):
                    continue
                LOG.warning("OVN NB %s failed: %.200s", what, exc)
                raise Unavailable(f"OVN northbound database {self.remote} did not answer; the change was "
                                  "not recorded, retry", reason=Reason.DATAPLANE_UNAVAILABLE) from exc
            self.on_transaction(what, time.perf_counter() - started)
            return result, reply

    def _wait_for_change(self, seqno: int, most: float) -> None:
        """Until the replica changed since ``seqno``, ``most`` seconds at most."""
        until = time.monotonic() + most
        while self._conn.change_seqno == seqno and time.monotonic() < until:
            time.sleep(0.005)

    # ------------------------------------------------------------ Dataplane
    def _rows(self, desired: Desired) -> dict[str, list[Row] | None]:
        return {uid: rows.desired_rows(self.owner, state, self.site) if state is not None else None
                for uid, state in desired.items()}

    def sync(self, desired: Desired, stamp: Stamp | None = None, track: bool = False) -> SyncReport:
        """One NB transaction that makes the rows of these networks match (and
        records ``stamp``). With ``track``, the report's ``cfg`` is the
        ``nb_cfg`` it set: every chassis has applied it once ``programmed``
        reaches it (what ``ovn-nbctl --wait=hv`` waits for)."""
        wanted = self._rows(desired)
        marker = rows.state_row(self.owner, stamp.store_id, stamp.generation) if stamp is not None else None

        def compute(replica):
            p = plan.plan_sync(replica, self.owner, wanted, marker, track)
            return list(p.ops), p

        p, reply = self.write(compute, "sync")
        if reply is not None and p.cfg_op is not None:
            return dataclasses.replace(p.report, cfg=reply[p.cfg_op]["rows"][0]["nb_cfg"])
        return p.report

    def _nb_global(self) -> dict:
        return self.read(lambda replica: next(iter(replica.tables["NB_Global"].values()), {}))

    def programmed(self) -> int:
        """NB_Global.hv_cfg: the configuration every chassis has applied."""
        return self._nb_global().get("hv_cfg", 0)

    def configured(self) -> int:
        """NB_Global.nb_cfg: the newest configuration asked of the chassis."""
        return self.nb_cfg()[0]

    def nb_cfg(self) -> tuple[int, int, int]:
        row = self._nb_global()
        return row.get("nb_cfg", 0), row.get("sb_cfg", 0), row.get("hv_cfg", 0)

    def drifted(self, desired: Desired) -> set[str]:
        """The networks of ``desired`` whose OVN rows differ from it; changes nothing."""
        wanted = self._rows(desired)
        return self.read(lambda replica: plan.drifted(replica, self.owner, wanted))

    def waiting(self, desired: Desired) -> set[tuple[str, str]]:
        """(uid, other site) of the links of ``desired`` whose rows wait for
        ovn-ic's key (``plan.waiting``); changes nothing."""
        wanted = self._rows(desired)
        return self.read(lambda replica: plan.waiting(replica, self.owner, wanted))

    def take_changes(self) -> set[str] | None:
        """The networks whose OVN rows changed since the last call, or None
        when only a full comparison can tell (``netpeer.ovn.changes``)."""
        return self.changes.take(self._conn.seqno)

    def count_strays(self, keep: Iterable[str]) -> tuple[int, int]:
        """(rows we own that belong to no network of ``keep``, rows we own)."""
        keep_ = frozenset(keep)
        return self.read(lambda replica: (len(owned.strays(replica, self.owner, keep_)),
                                           owned.count_owned(replica, self.owner)))

    def count_owned(self) -> int:
        return self.read(lambda replica: owned.count_owned(replica, self.owner))

    def remove_strays(self, keep: Iterable[str]) -> SyncReport:
        keep_ = frozenset(keep)

        def compute(replica):
            found = owned.strays(replica, self.owner, keep_)
            return owned.removal(found), SyncReport(deleted=len(found))

        return self.write(compute, "stray removal")[0]

    def read_stamp(self) -> Stamp | None:
        if not self._conn.ready:   # the replica is still arriving: the marker alone
            try:
                return early.read_stamp(self.remote, self.owner, self.timeout, RECONNECT_BACKOFF_MS)
            finally:
                self.start_replica()
        marker = names.state_marker(self.owner)

        def read(replica):
            for uuid in replica.by_name("Address_Set", marker):
                stamp = rows.stamp_of(owned.ext(replica.tables["Address_Set"][uuid]), self.owner)
                if stamp is not None:
                    return stamp
            return None

        return self.read(read)

    def read_back(self) -> list:
        """The networks and Bound pairs our rows describe (``--adopt-ovn``)."""
        from netpeer.ovn.adopt import read_back
        return self.read(lambda replica: read_back(replica, self.owner))

    # ------------------------------------------------------------ inspection
    def owned_rows(self) -> dict[str, list[dict]]:
        """Our rows by table (for status and tests): their external_ids."""
        return self.read(lambda replica: owned.owned_ids(replica, self.owner))

    def gateways(self) -> tuple[Gateway, ...]:
        return self._gateways.read() if self._gateways is not None else ()

    def close(self) -> None:
        if self._gateways is not None:
            self._gateways.close()
        self._conn.close()


__all__ = ["OvnBackend", "InstancePort", "COLUMNS", "NB_SCHEMA", "ForeignRowConflict", "MissingRow"]
