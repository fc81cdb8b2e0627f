"""The OVN northbound backend (``netpeer/ovn`` is the only package that imports ovsdbapp).

``OvnBackend`` implements the service's ``Dataplane`` (``netpeer.core.dataplane``).
Every write is one NB transaction (``check_error=True``) of one command,
``SyncNetworks``, that makes the rows of some networks look exactly like
their desired rows (``netpeer.ovn.rows``): it inserts what is missing,
rewrites columns that drifted and deletes what should not be there. It reads
the IDL's replica at run time, so re-running it (ovsdbapp retries commands
after a reconnect) is idempotent. Only rows tagged with our owner in
``external_ids`` are ever changed or deleted. Read-only commands
(``FindDrift``, ``CountStrays``, ``ReadStamp``) share the row lookups with the writers
through ``_OwnedRows`` and never change anything.

Failures come out typed: ``Unavailable`` (unreachable, timed out),
``FailedPrecondition`` (the NB refused, or a foreign row squats on one of our
names). python-ovs and ovsdbapp internals are confined to ``_idl``.

Why one module of this size: the commands share the row lookups of
``_OwnedRows``, and the connection's error mapping (``_run``) must see every
command; both are the one place that decides what is ours.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Callable, Iterable, Mapping

from ovsdbapp import exceptions as ovsdbapp_exceptions
from ovsdbapp.backend.ovs_idl import command as ovs_command
from ovsdbapp.backend.ovs_idl import connection, idlutils
from ovsdbapp.schema.ovn_northbound import impl_idl

from netpeer.core.dataplane import Desired, Stamp, SyncReport
from netpeer.errors import FailedPrecondition, Unavailable
from netpeer.ovn import _idl, early, names, rows
from netpeer.ovn.changes import ChangeTracker
from netpeer.ovn.ic_rows import SiteContext
from netpeer.ovn.owned import _OwnedRows
from netpeer.ovn.plan import ForeignRowConflict, MissingRow, missing_transit_switch
from netpeer.ovn.names import NB_SCHEMA
from netpeer.ovn.ports import InstancePort, InstancePorts
from netpeer.ovn.rows import CHILD_COLUMNS, ROOT_TABLES, Row

LOG = logging.getLogger(__name__)


# The tables and columns netpeer reads and writes; the IDL replicates only these.
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
# Longest pause between two attempts to (re)connect to an NB member (python-ovs's minimum).
RECONNECT_BACKOFF_MS = 1000

# How long a backend made with ``stamp_first`` waits for the first stamp read
# before it asks for its replica anyway.
STAMP_FIRST_S = 2.0

_get = _idl.read_column


class _Refused(Exception):
    """The NB database refused a transaction (its error is the cause)."""


class SyncNetworks(_OwnedRows):
    """Make the rows of each network in ``desired`` (uid -> rows, or None to
    remove the network) match, and record ``stamp`` on the state marker."""

    def __init__(self, api, owner: str, desired: Mapping[str, list[Row] | None], stamp: Stamp | None = None,
                 track: bool = False):
        super().__init__(api, owner)
        self.desired = desired
        self.stamp = stamp
        self.track = track

    def run_idl(self, txn):
        report = SyncReport()
        created_roots: dict[tuple[str, str], object] = {}
        self._writer = _idl.Writer()
        for uid, wanted in self.desired.items():
            report += self._sync_one(txn, uid, wanted or [], created_roots)
        if self.stamp is not None:
            self._write_stamp(txn, rows.state_row(self.owner, self.stamp.store_id, self.stamp.generation))
        if self.track:
            # Ask every chassis to acknowledge this configuration (what
            # `ovn-nbctl --wait=hv` does): northd copies nb_cfg to the SB,
            # each ovn-controller reports it once applied, and northd sets
            # hv_cfg to the lowest. In the transaction that changes ports or
            # policies it costs northd nothing more: that recompute happens anyway.
            for nb_global in self.api.tables["NB_Global"].rows.values():
                nb_global.increment("nb_cfg")
        self.result = report

    def post_commit(self, txn):
        if self.track and self.result is not None:
            self.result = dataclasses.replace(self.result, cfg=txn.get_increment_new_value())

    def _write_stamp(self, txn, want: Row) -> None:
        row = self._lookup(want.table, want.columns["name"])
        if row is None:
            row = txn.insert(self.api.tables[want.table])
            row.name = want.columns["name"]
            row.external_ids = dict(want.external_ids)
            return
        if _get(row, "external_ids").get(names.STATE_OF) != self.owner:
            raise ForeignRowConflict(f"{want.table} {want.columns['name']} exists but is not netpeer's state marker "
                                     f"(owner {self.owner!r}); remove or rename it")
        if _get(row, "external_ids") != dict(want.external_ids):
            row.external_ids = dict(want.external_ids)

    def _sync_one(self, txn, uid: str, wanted: list[Row], created_roots) -> SyncReport:
        actual = self._actual(uid, wanted)
        created = updated = deleted = 0
        for want in wanted:
            have = actual.pop(want.ident, None)
            if have is not None:
                row, parent, _ = have
                changed = False
                for col, value in want.columns.items():
                    if not self._same(_get(row, col), value):
                        _idl.write_column(row, col, self._value(value), self._writer)
                        changed = True
                if _get(row, "external_ids") != dict(want.external_ids):
                    _idl.write_column(row, "external_ids", dict(want.external_ids), self._writer)
                    changed = True
                updated += changed
                if want.parent is not None and parent is None:
                    self._attach(want, row, created_roots)  # a hand edit detached it
                continue
            row = txn.insert(self.api.tables[want.table])
            for col, value in want.columns.items():
                _idl.write_column(row, col, self._value(value), self._writer)
            _idl.write_column(row, "external_ids", dict(want.external_ids), self._writer)
            created += 1
            if want.parent is None:
                created_roots[(want.table, want.columns["name"])] = row
            else:
                self._attach(want, row, created_roots)
        for row, parent, column in actual.values():
            if parent is not None:
                parent.delvalue(column, row)
            row.delete()
            deleted += 1
        return SyncReport(created, updated, deleted)

    def _attach(self, want: Row, row, created_roots) -> None:
        key = (want.parent.table, want.parent.name)
        # Found once per command: a router takes a port, routes and policies
        # per peer, and ovsdbapp's lookup by name cost 45 us each (0.27 s of
        # the 2.5 s of 1,000 binds in one batch). A parent never goes in the
        # command that hangs rows under it (a network's rows are all wanted or
        # all removed), so what was found stays right until the commit.
        parent = created_roots.get(key)
        if parent is None:
            parent = created_roots[key] = self._lookup(*key)
        if parent is None:
            if want.parent.name.startswith(names.TRANSIT_PREFIX):
                raise missing_transit_switch(want.parent.name)
            raise RuntimeError(f"{want.parent.table} {want.parent.name} missing for {want.ident}")
        parent.addvalue(want.parent.column, row)


class RemoveStrays(_OwnedRows):
    """Delete every row we own that belongs to no network of ``keep``."""

    def __init__(self, api, owner: str, keep: frozenset[str]):
        super().__init__(api, owner)
        self.keep = keep

    def run_idl(self, txn):
        deleted = 0
        for row, parent, column in self._strays(self.keep):
            if parent is not None:
                parent.delvalue(column, row)
            row.delete()
            deleted += 1
        self.result = SyncReport(deleted=deleted)


class FindDrift(_OwnedRows):
    """Read-only: which networks of ``desired`` have rows that differ from
    their desired rows (or cannot be checked: a foreign row on one of their
    names). Lets the repair sweep check many networks in one pass and open a
    write transaction only for those that drifted."""

    def __init__(self, api, owner: str, desired: Mapping[str, list[Row] | None]):
        super().__init__(api, owner)
        self.desired = desired

    def run_idl(self, txn):
        self._ext_memo = {}
        drifted = set()
        for uid, wanted in self.desired.items():
            try:
                actual = self._actual(uid, wanted)
            except ForeignRowConflict:
                drifted.add(uid)
                continue
            for want in wanted or []:
                have = actual.pop(want.ident, None)
                if have is None or self._differs(want, have):
                    drifted.add(uid)
                    break
            else:
                if actual:
                    drifted.add(uid)
        self.result = drifted


class CountStrays(_OwnedRows):
    """Read-only: (rows we own that belong to no network of ``keep``, rows we
    own); with ``keep`` None, only the second."""

    def __init__(self, api, owner: str, keep: frozenset[str] | None):
        super().__init__(api, owner)
        self.keep = keep

    def run_idl(self, txn):
        self._ext_memo = {}
        strays = sum(1 for _ in self._strays(self.keep)) if self.keep is not None else 0
        total = sum(1 for table in ROOT_TABLES for row in self.api.tables[table].rows.values() if self._ours(row))
        total += sum(1 for table, column in CHILD_COLUMNS for parent in self.api.tables[table].rows.values()
                     for child in _get(parent, column) if self._ours(child))
        self.result = (strays, total)


class ReadStamp(_OwnedRows):
    def run_idl(self, txn):
        row = self._lookup("Address_Set", names.state_marker(self.owner))
        self.result = rows.stamp_of(_get(row, "external_ids"), self.owner) if row is not None else None


class ReadOwnedIds(_OwnedRows):
    """Our rows' external_ids by table. A command, so that it reads the IDL in
    the connection thread: iterating a table while an update arrives fails."""

    def run_idl(self, txn):
        out: dict[str, list[dict]] = {}
        for table in COLUMNS:
            if table == "NB_Global" or table in REF_TABLES:   # no external_ids: never ours
                continue
            for row in self.api.tables[table].rows.values():
                ext = _get(row, "external_ids")
                if ext.get(names.OWNER) == self.owner:
                    out.setdefault(table, []).append(dict(ext))
        self.result = out


class OvnBackend:
    """A connection to the OVN NB database and the operations netpeer needs.

    The connection is made in the background (the NB schema is fetched from
    the server, so it always matches the OVN version there) and re-made by
    ovsdbapp after a loss; while it is down, calls fail at once with
    ``Unavailable``. ``remote`` may list the members of a clustered NB,
    comma-separated: the IDL talks to the leader only and follows it through
    elections (tests/faults/test_ovn_faults.py).

    With ``stamp_first``, the replica is asked for only after the first
    ``read_stamp`` (or ``start_replica``; at most ``STAMP_FIRST_S`` later).
    ovsdb-server builds a monitor's first reply in one go, seconds at 10,000
    networks, and a stamp read sent just after it waited for all of it:
    netpeerd answered its first read 7.8-8.9 s after it started instead of 2.4 s
    (docs/performance.md, section 4, "The collector, and the stamp first").
    """

    def __init__(self, remote: str, owner: str = "netpeer", timeout: float = 10.0, site: SiteContext | None = None,
                 stamp_first: bool = False):
        self.remote = remote
        self.owner = owner
        #: This site, for networks peered with other sites (None: no sites).
        self.site = site
        self.timeout = timeout
        self._api = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._error: str | None = None
        self._replica_asked = threading.Event()
        if not stamp_first:
            self._replica_asked.set()
        self.ports = InstancePorts(self)
        #: The networks whose rows changed in the replica since the sweep last asked.
        self.changes = ChangeTracker(owner)
        #: Called with (kind, seconds) after every NB transaction (netpeer.observe.metrics).
        self.on_transaction: Callable[[str, float], None] = lambda kind, seconds: None
        self._starter = threading.Thread(target=self._connect, name="ovn-connect", daemon=True)
        self._starter.start()

    # ------------------------------------------------------------ connection
    def start_replica(self) -> None:
        """Ask for the replica now (``stamp_first``: without a stamp read)."""
        self._replica_asked.set()

    def _connect(self) -> None:
        self._replica_asked.wait(STAMP_FIRST_S)
        while not self._closed.is_set():
            try:
                helper = idlutils.get_schema_helper(self.remote, NB_SCHEMA)
                for table, columns in COLUMNS.items():
                    helper.register_columns(table, columns)
                idl = _idl.Idl(self.remote, helper, leader_only=True)
                idl.on_change = self.changes.note
                _idl.set_reconnect_backoff(idl, RECONNECT_BACKOFF_MS)
                conn = connection.Connection(idl=idl, timeout=self.timeout)
                # ovsdbapp keeps the connection on the class: give each backend
                # its own class so several backends can live in one process.
                api_class = type("NetpeerNbApi", (impl_idl.OvnNbApiIdlImpl,), {"_ovsdb_connection": None})
                # Index only the names we look up (roots). python-ovs keeps a
                # custom index entry stale when an indexed column is changed
                # by another client, and then fails on that row's next update
                # ("... not in list"), which broke the repair of a router port
                # renamed by hand (tests/trust/test_drift.py). We never look
                # ports up by name, so they get no index.
                api = api_class(conn, start=False, auto_index=False)
                for table in ROOT_TABLES + REF_TABLES:
                    api.create_index(table, "name")
                api.start_connection(conn)
                with self._lock:
                    self._api = api
                    self._error = None
                return
            except Exception as exc:  # keep trying: OVN may come up after us
                with self._lock:
                    self._error = str(exc) or exc.__class__.__name__
                LOG.warning("cannot connect to OVN NB %s: %s; retrying", self.remote, self._error)
                self._closed.wait(1.0)

    def wait_connected(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.connected:
                return True
            time.sleep(0.05)
        return self.connected

    @property
    def connected(self) -> bool:
        api = self._api
        return api is not None and _idl.session_connected(api.idl) and api.idl.has_ever_connected()

    def _ready_api(self):
        api = self._api
        if api is None or not _idl.session_connected(api.idl):
            raise Unavailable(f"OVN northbound database {self.remote} is unreachable; nothing was changed, retry")
        if not api.idl.has_ever_connected():   # the replica is still arriving: what it lacks would look absent
            raise Unavailable(f"netpeerd is still reading OVN northbound database {self.remote}; nothing was "
                              "changed, retry")
        return api

    def _run(self, make: Callable[[object], ovs_command.BaseCommand], what: str):
        """Runs one command in one NB transaction; the command's result.
        Every failure comes out as ``Unavailable`` or ``FailedPrecondition``.

        A refusal is tried once more after the replica moved on: a transaction
        that timed out may commit later (OVSDB writes are at-least-once, e.g.
        across an NB leader change), and a command that read the replica just
        before that late commit arrived would insert a row that now exists.
        Re-run on a fresh replica, the idempotent command finds it."""
        for attempt in (1, 2):
            api = self._ready_api()
            seqno = api.idl.change_seqno
            try:
                return self._commit(api, make(api), what)
            except _Refused as exc:
                if attempt == 2:
                    raise FailedPrecondition(
                        f"OVN refused the change ({str(exc.__cause__)[:200]}); nothing was changed. netpeerd's "
                        "repair sweep restores hand-edited rows: retry after it ran") from exc.__cause__
                deadline = time.monotonic() + 1.0
                while api.idl.change_seqno == seqno and time.monotonic() < deadline:
                    time.sleep(0.02)

    def _commit(self, api, cmd, what: str):
        txn = _idl.Transaction(api, api.ovsdb_connection, self.timeout, check_error=True, log_errors=False)
        txn.add(cmd)
        started = time.perf_counter()
        try:
            txn.commit()
            self.on_transaction(what, time.perf_counter() - started)
        except (ForeignRowConflict, MissingRow) as exc:
            raise FailedPrecondition(f"OVN: {exc}; nothing was changed") from exc
        except ovsdbapp_exceptions.TimeoutException as exc:
            # Never quote the exception in the answer: ovsdbapp's
            # TimeoutException spells out every command of the transaction,
            # i.e. all desired rows of the networks (100 KB and more), and
            # gRPC refuses status details that large: the client got
            # RESOURCE_EXHAUSTED instead of UNAVAILABLE (found by
            # tests/faults/test_ovn_faults.py). A timed-out transaction may
            # still commit later: the repair sweep reconciles it.
            LOG.warning("OVN NB %s timed out after %gs", what, self.timeout)
            raise Unavailable(f"OVN northbound database {self.remote} did not answer within "
                              f"{self.timeout:g}s; the change was not recorded, retry") from exc
        except RuntimeError as exc:
            if txn.refused:
                # The NB database refused the transaction (e.g. a hand edit
                # left a row holding one of our unique names): a state
                # problem, not bad input and not a crash. The sweep clears it.
                LOG.warning("OVN NB refused %s: %.300s", what, exc)
                raise _Refused() from exc
            if not _idl.session_connected(api.idl) or txn.status is not None:
                # Lost the connection, or gave up retrying (TRY_AGAIN) past the timeout.
                LOG.warning("OVN NB %s failed (%s: %.200s)", what, exc.__class__.__name__, exc)
                raise Unavailable(f"OVN northbound database {self.remote} did not answer; the change was "
                                  "not recorded, retry") from exc
            raise
        return cmd.result

    # ------------------------------------------------------------ Dataplane
    def _rows(self, desired: Desired) -> dict[str, list[Row] | None]:
        return {uid: rows.desired_rows(self.owner, state, self.site) if state is not None else None
                for uid, state in desired.items()}

    def sync(self, desired: Desired, stamp: Stamp | None = None, track: bool = False) -> SyncReport:
        """One NB transaction that makes the rows of these networks match (and records ``stamp``)."""
        wanted = self._rows(desired)
        return self._run(lambda api: SyncNetworks(api, self.owner, wanted, stamp, track), "sync") or SyncReport()

    def programmed(self) -> int:
        """NB_Global.hv_cfg: the configuration every chassis has applied."""
        api = self._ready_api()
        for row in api.tables["NB_Global"].rows.values():
            return row.hv_cfg
        return 0

    def drifted(self, desired: Desired) -> set[str]:
        """The networks of ``desired`` whose OVN rows differ from it; changes nothing."""
        wanted = self._rows(desired)
        result = self._run(lambda api: FindDrift(api, self.owner, wanted), "drift check")
        return result if result is not None else set(desired)

    def take_changes(self) -> set[str] | None:
        """The networks whose OVN rows changed since the last call, or None
        when only a full comparison can tell (``netpeer.ovn.changes``)."""
        api = self._api
        return None if api is None else self.changes.take(_idl.session_seqno(api.idl))

    def count_strays(self, keep: Iterable[str]) -> tuple[int, int]:
        keep_ = frozenset(keep)
        return self._run(lambda api: CountStrays(api, self.owner, keep_), "stray check")

    def count_owned(self) -> int:
        return self._run(lambda api: CountStrays(api, self.owner, None), "row count")[1]

    def read_stamp(self) -> Stamp | None:
        api = self._api
        if api is None or not api.idl.has_ever_connected():   # the replica is still arriving: the marker alone
            try:
                return early.read_stamp(self.remote, self.owner, self.timeout, RECONNECT_BACKOFF_MS)
            finally:
                self.start_replica()
        return self._run(lambda api: ReadStamp(api, self.owner), "stamp read")

    def read_back(self) -> list:
        """The networks and Bound pairs our rows describe (``--adopt-ovn``)."""
        from netpeer.ovn.adopt import ReadBack
        return self._run(lambda api: ReadBack(api, self.owner), "read back") or []

    def remove_strays(self, keep: Iterable[str]) -> SyncReport:
        keep_ = frozenset(keep)
        return self._run(lambda api: RemoveStrays(api, self.owner, keep_), "stray removal") or SyncReport()

    # ------------------------------------------------------------ inspection
    def owned_rows(self) -> dict[str, list[dict]]:
        """Our rows by table (for status and tests): their external_ids."""
        return self._run(lambda api: ReadOwnedIds(api, self.owner), "owned rows read") or {}

    def nb_cfg(self) -> tuple[int, int, int]:
        api = self._ready_api()
        for row in api.tables["NB_Global"].rows.values():
            return row.nb_cfg, row.sb_cfg, row.hv_cfg
        return 0, 0, 0

    def close(self) -> None:
        self._closed.set()
        self._replica_asked.set()   # a connection still waiting for the stamp read ends now
        api = self._api
        if api is not None:
            try:
                api.ovsdb_connection.stop()
            except Exception:  # pragma: no cover - best effort at shutdown
                pass


__all__ = ["OvnBackend", "InstancePort", "COLUMNS", "NB_SCHEMA", "ForeignRowConflict", "MissingRow"]
