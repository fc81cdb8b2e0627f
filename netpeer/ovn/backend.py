"""The OVN northbound backend: the only module that imports ovsdbapp.

Every write is one NB transaction (``check_error=True``) built from one
command, ``SyncNetworks``, that makes the rows of some networks look exactly
like the desired rows from ``netpeer.core.dataplane``: it inserts what is
missing, rewrites columns that drifted and deletes what should not be there.
It reads the IDL's replica at run time, so re-running it (ovsdbapp retries
commands after a reconnect) is idempotent. Only rows tagged with our owner
in ``external_ids`` are ever changed or deleted.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Iterable, Mapping

import ovs.db.idl
from ovsdbapp.backend.ovs_idl import command as ovs_command
from ovsdbapp.backend.ovs_idl import connection, idlutils
from ovsdbapp.schema.ovn_northbound import impl_idl

from netpeer.core.dataplane import Row
from netpeer.errors import FailedPrecondition, Unavailable
from netpeer.ovn import names

LOG = logging.getLogger(__name__)

NB_SCHEMA_FILE = "/usr/share/ovn/ovn-nb.ovsschema"

# The tables and columns netpeer reads and writes; the IDL replicates only these.
COLUMNS: dict[str, list[str]] = {
    "NB_Global": ["nb_cfg", "sb_cfg", "hv_cfg"],
    "Logical_Router": ["name", "ports", "static_routes", "policies", "external_ids"],
    "Logical_Router_Port": ["name", "mac", "networks", "peer", "external_ids"],
    "Logical_Router_Static_Route": ["ip_prefix", "nexthop", "output_port", "external_ids"],
    "Logical_Router_Policy": ["priority", "match", "action", "external_ids"],
    "Logical_Switch": ["name", "ports", "external_ids"],
    "Logical_Switch_Port": ["name", "type", "addresses", "options", "external_ids"],
    "Address_Set": ["name", "addresses", "external_ids"],
}
# Longest pause between two attempts to (re)connect to an NB member (python-ovs's minimum).
RECONNECT_BACKOFF_MS = 1000
ROOT_TABLES = ("Logical_Router", "Logical_Switch", "Address_Set")
CHILD_COLUMNS = (("Logical_Router", "ports"), ("Logical_Router", "static_routes"),
                 ("Logical_Router", "policies"), ("Logical_Switch", "ports"))
# Kinds a sync manages; rows of other kinds (instance ports made by the dev
# tools) live on our switches but are left alone until the switch goes.
MANAGED_KINDS = frozenset({"router", "switch", "lan-port", "peer-port", "route", "policy", "address-set"})


@dataclasses.dataclass(frozen=True)
class SyncReport:
    created: int = 0
    updated: int = 0
    deleted: int = 0

    @property
    def changed(self) -> int:
        return self.created + self.updated + self.deleted

    def __add__(self, other: "SyncReport") -> "SyncReport":
        return SyncReport(self.created + other.created, self.updated + other.updated,
                          self.deleted + other.deleted)


def _get(row, column: str):
    """A column's value, read straight from the IDL replica when the row has
    nothing pending in the current transaction. python-ovs rebuilds a set or
    map column from scratch on every attribute access (``Row.__getattr__``
    converts it to Python, back to a Datum, and to Python again), which made
    reading rows most of the cost of a sync; the result is the same."""
    d = row.__dict__
    data = d.get("_data")
    if data is not None and not d.get("_changes") and not d.get("_mutations"):
        datum = data.get(column)
        if datum is not None:
            return datum.to_python(row._uuid_to_row)
    return getattr(row, column)


def _norm(value):
    """Column values compare as sets where OVSDB stores sets."""
    if isinstance(value, (list, tuple)):
        return sorted(str(v) for v in value)
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return value


def _root_name(ext: Mapping[str, str]) -> str | None:
    """The name a root row we own must have, from its tags."""
    kind, uid, ident = ext.get(names.KIND), ext.get(names.NETWORK, ""), ext.get(names.ID, "")
    if kind == "router":
        return names.router(uid)
    if kind == "switch":
        return names.switch(uid)
    if kind == "address-set" and ident.rsplit("/", 1)[-1] in ("4", "6"):
        return names.address_set(uid, int(ident.rsplit("/", 1)[-1]))
    return None


def _root_ident(table: str, uid: str, name: str) -> str:
    """The netpeer:id of a root row of network ``uid`` (see core/dataplane.py)."""
    if table == "Logical_Router":
        return f"lr/{uid}"
    if table == "Logical_Switch":
        return f"ls/{uid}"
    return f"as/{uid}/{name.rsplit('ip', 1)[-1]}"


class ForeignRowConflict(RuntimeError):
    """A row that is not ours has the name of one of our rows."""


class SyncNetworks(ovs_command.BaseCommand):
    """Make the rows of each network in ``desired`` (uid -> rows, or None to
    remove the network) match. With ``orphans_except`` set, also delete every
    row we own whose network is not in that set (the repair sweep)."""

    def __init__(self, api, owner: str, desired: Mapping[str, list[Row] | None],
                 orphans_except: frozenset[str] | None = None):
        super().__init__(api)
        self.owner = owner
        self.desired = desired
        self.orphans_except = orphans_except

    def _ours(self, row) -> bool:
        ext = _get(row, "external_ids")
        return ext.get(names.OWNER) == self.owner and ext.get(names.KIND) in MANAGED_KINDS

    def _lookup(self, table: str, name: str):
        return self.api.lookup(table, name, default=None)

    def _actual(self, uid: str) -> dict[str, tuple[object, object | None, str | None]]:
        """ident -> (row, parent row, parent column) for the rows of ``uid``."""
        found = {}
        roots = [self._lookup("Logical_Router", names.router(uid)),
                 self._lookup("Logical_Switch", names.switch(uid)),
                 self._lookup("Address_Set", names.address_set(uid, 4)),
                 self._lookup("Address_Set", names.address_set(uid, 6))]
        for root in roots:
            if root is None:
                continue
            if not self._ours(root):
                # Never adopt, change or shadow a row someone else made.
                raise ForeignRowConflict(
                    f"{root._table.name} {root.name} exists but is not owned by netpeer "
                    f"(owner {self.owner!r}); remove or rename it so network {uid} can be programmed")
            # A root found by its name is this network's even if a hand edit
            # dropped its netpeer:id: the sync writes the tags back.
            ident = _get(root, "external_ids").get(names.ID) or _root_ident(root._table.name, uid, root.name)
            found[ident] = (root, None, None)
            for table, column in CHILD_COLUMNS:
                if root._table.name != table:
                    continue
                for child in _get(root, column):
                    ext = _get(child, "external_ids")
                    if ext.get(names.OWNER) == self.owner and ext.get(names.KIND) in MANAGED_KINDS \
                            and ext.get(names.NETWORK) == uid:
                        # A child without its netpeer:id cannot be matched to a
                        # desired row: it is deleted (and the desired one made)
                        # in the same transaction, so unique names do not clash.
                        found[ext.get(names.ID) or f"malformed/{child.uuid}"] = (child, root, column)
        return found

    def run_idl(self, txn):
        report = SyncReport()
        created_roots: dict[tuple[str, str], object] = {}
        for uid, rows in self.desired.items():
            report += self._sync_one(txn, uid, rows or [], created_roots)
        if self.orphans_except is not None:
            report += self._delete_orphans(self.orphans_except | set(self.desired))
        self.result = report

    def _sync_one(self, txn, uid: str, rows: list[Row], created_roots) -> SyncReport:
        actual = self._actual(uid)
        created = updated = deleted = 0
        for want in rows:
            have = actual.pop(want.ident, None)
            if have is not None:
                row, parent, column = have
                changed = False
                for col, value in want.columns.items():
                    if _norm(_get(row, col)) != _norm(value):
                        setattr(row, col, value)
                        changed = True
                if _get(row, "external_ids") != dict(want.external_ids):
                    row.external_ids = dict(want.external_ids)
                    changed = True
                if want.parent is not None and parent is None:
                    have = None  # fall through: re-attach below
                updated += changed
            if have is None:
                row = txn.insert(self.api.tables[want.table])
                for col, value in want.columns.items():
                    setattr(row, col, value)
                row.external_ids = dict(want.external_ids)
                created += 1
                if want.parent is None:
                    created_roots[(want.table, want.columns["name"])] = row
                else:
                    key = (want.parent.table, want.parent.name)
                    parent = created_roots.get(key) or self._lookup(*key)
                    if parent is None:
                        raise RuntimeError(f"{want.parent.table} {want.parent.name} missing for {want.ident}")
                    parent.addvalue(want.parent.column, row)
        for ident, (row, parent, column) in actual.items():
            if parent is not None:
                parent.delvalue(column, row)
            row.delete()
            deleted += 1
        return SyncReport(created, updated, deleted)

    def _stray(self, row, keep, root: bool) -> bool:
        """Ours, but not where a network of ``keep`` would have it: its network
        is gone, it lost its netpeer:id, or (a root) it was renamed by hand. A
        renamed root cannot be found by name, so it would stay beside the one
        the sync recreates: it goes, and its children with it."""
        if not self._ours(row):
            return False
        ext = _get(row, "external_ids")
        if ext.get(names.NETWORK) not in keep or not ext.get(names.ID):
            return True
        return root and row.name != _root_name(ext)

    def _delete_orphans(self, keep: set[str]) -> SyncReport:
        deleted = 0
        for table in ROOT_TABLES:
            for row in list(self.api.tables[table].rows.values()):
                if self._stray(row, keep, root=True):
                    row.delete()
                    deleted += 1
        for table, column in CHILD_COLUMNS:
            for parent in self.api.tables[table].rows.values():
                for child in list(getattr(parent, column)):
                    if self._stray(child, keep, root=False):
                        parent.delvalue(column, child)
                        child.delete()
                        deleted += 1
        return SyncReport(deleted=deleted)


class FindDrift(SyncNetworks):
    """Read-only: which networks of ``desired`` have rows that differ from
    their desired rows (or cannot be checked: a foreign row on one of their
    names). Lets the repair sweep check many networks in one pass and open
    a write transaction only for those that drifted."""

    def run_idl(self, txn):
        drifted = set()
        for uid, rows in self.desired.items():
            try:
                if self._differs(uid, rows or []):
                    drifted.add(uid)
            except ForeignRowConflict:
                drifted.add(uid)
        self.result = drifted

    def _differs(self, uid: str, rows: list[Row]) -> bool:
        actual = self._actual(uid)
        for want in rows:
            have = actual.pop(want.ident, None)
            if have is None:
                return True
            row, parent, _ = have
            if want.parent is not None and parent is None:
                return True
            for col, value in want.columns.items():
                if _norm(_get(row, col)) != _norm(value):
                    return True
            if _get(row, "external_ids") != dict(want.external_ids):
                return True
        return bool(actual)


class FindOrphans(SyncNetworks):
    """Read-only: whether any row we own belongs to no network of ``keep``."""

    def __init__(self, api, owner: str, keep: frozenset[str]):
        super().__init__(api, owner, {}, keep)

    def run_idl(self, txn):
        keep = self.orphans_except
        self.result = False
        for table in ROOT_TABLES:
            for row in self.api.tables[table].rows.values():
                if self._stray(row, keep, root=True):
                    self.result = True
                    return
        for table, column in CHILD_COLUMNS:
            for parent in self.api.tables[table].rows.values():
                for child in _get(parent, column):
                    if self._stray(child, keep, root=False):
                        self.result = True
                        return


class _Idl(connection.OvsdbIdl):
    """ovsdbapp's IDL without its per-row ``time.sleep(0)``: that yield is
    for green threads; with real threads it hands the GIL away once per row
    of every update and waits to get it back, which made each write wait
    behind the gRPC threads several times (the GIL still switches threads
    every few milliseconds without it)."""

    def cooperative_yield(self):
        pass


class OvnBackend:
    """A connection to the OVN NB database and the operations netpeer needs.

    The connection is made in the background and re-made by ovsdbapp after a
    loss; while it is down, writes fail at once with ``Unavailable``.
    ``remote`` may list the members of a clustered NB, comma-separated: the
    IDL talks to the leader only and follows it through elections
    (tests/faults/test_ovn_faults.py).
    """

    def __init__(self, remote: str, owner: str = "netpeer", timeout: float = 10.0):
        self.remote = remote
        self.owner = owner
        self.timeout = timeout
        self._api = None
        self._lock = threading.Lock()
        self._error: str | None = None
        self._starter = threading.Thread(target=self._connect, name="ovn-connect", daemon=True)
        self._starter.start()

    def _connect(self) -> None:
        while True:
            try:
                helper = ovs.db.idl.SchemaHelper(location=NB_SCHEMA_FILE)
                for table, columns in COLUMNS.items():
                    helper.register_columns(table, columns)
                idl = _Idl(self.remote, helper, leader_only=True)
                # Reconnect at most RECONNECT_BACKOFF_MS apart instead of the
                # python-ovs default (doubling up to 8 s). When a clustered
                # NB loses its leader, the members that answer first are
                # followers (or candidates) that leader_only refuses, each
                # refusal counts as a failed attempt, and the backoff grew to
                # 8 s: netpeerd stayed UNAVAILABLE for 15-16 s after a kill
                # although a new leader was elected in about 1.2 s. With a
                # 1 s cap it is back within 1-4 s (tests/faults, measured in
                # docs/reliability.md). One connection attempt per second to
                # a few NB members is negligible load.
                idl._session.reconnect.set_backoff(RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MS)
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
                for table in ROOT_TABLES:
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
                time.sleep(1.0)

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
        return api is not None and api.idl._session.is_connected() and api.idl.has_ever_connected()

    def _ready_api(self):
        api = self._api
        if api is None or not api.idl._session.is_connected():
            raise Unavailable(f"OVN northbound database {self.remote} is unreachable; nothing was changed, retry")
        return api

    def sync(self, desired: Mapping[str, list[Row] | None],
             orphans_except: Iterable[str] | None = None) -> SyncReport:
        """One NB transaction that makes the rows of these networks match."""
        api = self._ready_api()
        keep = frozenset(orphans_except) if orphans_except is not None else None
        cmd = SyncNetworks(api, self.owner, dict(desired), keep)
        try:
            with api.transaction(check_error=True, log_errors=False, timeout=self.timeout) as txn:
                txn.add(cmd)
        except Unavailable:
            raise
        except ForeignRowConflict as exc:
            raise FailedPrecondition(f"OVN: {exc}; nothing was changed") from exc
        except Exception as exc:
            if isinstance(exc, RuntimeError) and str(exc).startswith("OVSDB Error"):
                # The NB database refused the transaction (e.g. a hand edit left
                # a row holding one of our unique names): a state problem, not
                # bad input and not a crash. The repair sweep clears such rows.
                # (Checked by message: ovsdbapp's TimeoutException is a
                # RuntimeError too, and must stay UNAVAILABLE below.)
                LOG.warning("OVN NB refused a transaction: %.300s", exc)
                raise FailedPrecondition(
                    f"OVN refused the change ({str(exc)[:200]}); nothing was changed. netpeerd's repair "
                    "sweep restores hand-edited rows: retry after it ran") from exc
            if not api.idl._session.is_connected() or "timed out" in str(exc).lower() \
                    or exc.__class__.__name__ == "TimeoutException":
                # Never quote the exception in the answer: ovsdbapp's
                # TimeoutException spells out every command of the
                # transaction, i.e. all desired rows of the networks (100 KB
                # and more), and gRPC refuses status details that large: the
                # client got RESOURCE_EXHAUSTED instead of UNAVAILABLE
                # (found by tests/faults/test_ovn_faults.py). The log gets
                # the kind of failure only.
                LOG.warning("OVN NB transaction failed (%s: %.200s)", exc.__class__.__name__, exc)
                raise Unavailable(f"OVN northbound database {self.remote} did not answer within "
                                  f"{self.timeout:g}s; the change was not recorded, retry") from exc
            raise
        return cmd.result or SyncReport()

    def drifted(self, desired: Mapping[str, list[Row] | None]) -> set[str]:
        """The networks of ``desired`` whose OVN rows differ from it; changes nothing."""
        api = self._ready_api()
        cmd = FindDrift(api, self.owner, dict(desired))
        try:
            with api.transaction(check_error=True, log_errors=False, timeout=self.timeout) as txn:
                txn.add(cmd)
        except Exception as exc:
            raise Unavailable(f"OVN northbound database {self.remote}: drift check failed: {exc}") from exc
        return cmd.result if cmd.result is not None else set(desired)

    def has_orphans(self, keep: Iterable[str]) -> bool:
        """Whether OVN holds rows we own of networks not in ``keep``; changes nothing."""
        api = self._ready_api()
        cmd = FindOrphans(api, self.owner, frozenset(keep))
        with api.transaction(check_error=True, log_errors=False, timeout=self.timeout) as txn:
            txn.add(cmd)
        return bool(cmd.result)

    def owned_rows(self) -> dict[str, list[dict]]:
        """Our rows by table (for status and tests): external_ids and name."""
        api = self._ready_api()
        out: dict[str, list[dict]] = {}
        for table in COLUMNS:
            if table == "NB_Global":
                continue
            for row in api.tables[table].rows.values():
                if row.external_ids.get(names.OWNER) == self.owner:
                    out.setdefault(table, []).append(dict(row.external_ids))
        return out

    def nb_cfg(self) -> tuple[int, int, int]:
        api = self._ready_api()
        for row in api.tables["NB_Global"].rows.values():
            return row.nb_cfg, row.sb_cfg, row.hv_cfg
        return 0, 0, 0

    def close(self) -> None:
        api = self._api
        if api is not None:
            try:
                api.ovsdb_connection.stop()
            except Exception:  # pragma: no cover - best effort at shutdown
                pass
