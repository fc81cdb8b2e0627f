"""A sync as OVSDB operations, computed from plain data.

Every write of the backend (``netpeer.ovn.backend``): given the replica
(``netpeer.ovn.plain``) and each network's desired rows (``netpeer.ovn.rows``),
the operations of the one transaction that makes them true, and what it
changes. Pure: nothing is read but the replica, nothing is written. Only
rows tagged as ours are changed or deleted (``netpeer.ovn.owned``), a row of
someone else's on one of our names stops the network (``ForeignRowConflict``),
a child that lost its ``netpeer:id`` is deleted and made again, and a row
whose ``after`` is not met yet (``row.After``) waits: not inserted, not drift.

New rows are inserted with a named uuid and hung under an existing parent by
one ``mutate`` per parent and column; under a parent made in the same
transaction they go into its insert. A child goes by being taken out of its
parent (OVSDB deletes rows of non-root tables nothing refers to: an
explicit delete would fail if a hand edit also hung the row elsewhere); a root goes by a ``delete``, its children with it.
"""

from __future__ import annotations

import dataclasses
from collections import abc
from typing import Mapping

from netpeer.core.dataplane import SyncReport
from netpeer.ovn import names, owned, rows
from netpeer.ovn.ic_rows import Keys, Ref
from netpeer.ovn.plain import PlainReplica
from netpeer.ovn.row import Row
from netpeer.ovn.rows import CHILD_COLUMNS


class ForeignRowConflict(Exception):
    """A row that is not ours has the name of one of our rows."""


class MissingRow(Exception):
    """A row we refer to or hang ours under does not exist."""


def missing_ref(table: str, name: str) -> MissingRow:
    return MissingRow(f"{table} {name} does not exist: this site's gateways are not set up "
                      "(see docs/cross-site.md, what an operator deploys per site)")


def missing_transit_switch(name: str) -> MissingRow:
    return MissingRow(f"transit switch {name} does not exist in this site's NB: the link between the two sites "
                      "is not set up (see docs/cross-site.md, what an operator deploys per site)")


@dataclasses.dataclass(frozen=True)
class Plan:
    """The operations of one transaction, and what they change. ``cfg_op``:
    the index of the ``select`` whose reply holds the new ``nb_cfg`` (tracked syncs)."""

    ops: tuple[dict, ...]
    report: SyncReport
    cfg_op: int | None = None


_SCALAR = frozenset({str, int, bool, float})


def wire(value):
    """A desired column value as OVSDB's wire format (a list is a set, a dict a map)."""
    if type(value) in _SCALAR:   # most values: no abstract check (typing's Mapping costs 3 us a call)
        return value
    if isinstance(value, abc.Mapping):
        return ["map", [[k, v] for k, v in sorted(value.items())]]
    if isinstance(value, (list, tuple)):
        return ["set", [wire(v) for v in value]]
    return value


# Column values equal as they are (``same`` normalizes the rest). Exact types:
# abstract ones (``Mapping``) cost an ABC check per value, a third of a full comparison.
_PLAIN = frozenset({str, int, bool, float, dict})


def normalized(value):
    """Column values compare as sets where OVSDB stores sets."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return sorted(str(v) for v in value)
    if isinstance(value, abc.Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return value


def _where(uuid: str) -> list:
    return [["_uuid", "==", ["uuid", uuid]]]


@dataclasses.dataclass
class _Found:
    table: str
    uuid: str
    row: Mapping
    parent: tuple[str, str] | None = None   # (table, uuid)
    column: str | None = None


class _Planner:
    def __init__(self, replica: PlainReplica, owner: str):
        self.replica = replica
        self.owner = owner
        self.ops: list[dict] = []
        self.hang: dict[tuple[str, str, str], list] = {}     # (table, uuid, column) -> refs
        self.new_roots: dict[tuple[str, str], dict] = {}     # (table, name) -> its insert's row
        self.gone: set[str] = set()

    _ext = staticmethod(owned.ext)

    def _ours(self, row) -> bool:
        return owned.ours(row, self.owner)

    def lookup(self, table: str, name: str) -> tuple[str, Mapping] | None:
        found = self.replica.by_name(table, name)
        return (found[0], self.replica.tables[table][found[0]]) if found else None

    def _children(self, table: str, uuid: str, row, uid: str, found: dict) -> None:
        for parent_table, column in CHILD_COLUMNS:
            if parent_table != table:
                continue
            child_table = rows.CHILD_TABLES[(table, column)]
            for ref in row.get(column, ()):
                child = self.replica.tables[child_table].get(ref)
                if child is None:
                    continue
                ext = self._ext(child)
                if self._ours(child) and ext.get(names.NETWORK) == uid:
                    found[ext.get(names.ID) or f"malformed/{ref}"] = _Found(child_table, ref, child, (table, uuid),
                                                                             column)

    def actual(self, uid: str, wanted) -> dict[str, _Found]:
        """ident -> what the replica holds of network ``uid``."""
        found: dict[str, _Found] = {}
        for table, name in rows.root_names(uid):
            uuids = self.replica.by_name(table, name)
            if not uuids:
                continue
            uuid, root = uuids[0], self.replica.tables[table][uuids[0]]
            if any(not self._ours(self.replica.tables[table][u]) for u in uuids):
                # Never adopt, change or shadow a row someone else made.
                raise ForeignRowConflict(
                    f"{table} {name} exists but is not owned by netpeer "
                    f"(owner {self.owner!r}); remove or rename it so network {uid} can be programmed")
            ident = self._ext(root).get(names.ID) or rows.ident_of_root(table, uid, name)
            found[ident] = _Found(table, uuid, root)
            self._children(table, uuid, root, uid, found)
        switches = {w.parent.name for w in wanted if w.parent is not None and w.parent.table == "Logical_Switch"
                    and w.parent.name.startswith(names.TRANSIT_PREFIX)}
        switches |= {self._ext(f.row).get(names.TRANSIT_SWITCH) for f in found.values()}
        for ts in sorted(s for s in switches if s):
            hit = self.lookup("Logical_Switch", ts)
            if hit is not None and not self._ours(hit[1]):
                self._children("Logical_Switch", hit[0], hit[1], uid, found)
        return found

    def value(self, value):
        if isinstance(value, Keys):
            return wire(dict(value.pairs))
        if isinstance(value, Ref):
            hit = self.lookup(value.table, value.name)
            if hit is None:
                raise missing_ref(value.table, value.name)
            return ["uuid", hit[0]]
        return wire(value)

    def same(self, have, want) -> bool:
        if have == want and type(want) in _PLAIN:   # most columns of most rows: nothing to normalize
            return True
        if isinstance(want, Keys):   # our pairs only: others' keys stay
            return all(str((have or {}).get(k)) == str(v) for k, v in want.pairs.items())
        if isinstance(want, Ref):
            hit = self.lookup(want.table, want.name)
            held = list(have) if isinstance(have, tuple) else [] if have is None else [have]
            return hit is not None and held == [hit[0]]
        if isinstance(want, (list, tuple)) and not isinstance(have, tuple):
            have = [] if have is None else [have]   # an optional value: desired as a list of 0 or 1
        return normalized(have) == normalized(want)

    def attach(self, want: Row, ref: list) -> None:
        key = (want.parent.table, want.parent.name)
        new = self.new_roots.get(key)
        if new is not None:
            new.setdefault(want.parent.column, ["set", []])[1].append(ref)
            return
        hit = self.lookup(*key)
        if hit is None:
            if want.parent.name.startswith(names.TRANSIT_PREFIX):
                raise missing_transit_switch(want.parent.name)
            raise MissingRow(f"{want.parent.table} {want.parent.name} missing for {want.ident}")
        self.hang.setdefault((want.parent.table, hit[0], want.parent.column), []).append(ref)

    @staticmethod
    def held_back(want: Row, present: Mapping[str, _Found]) -> bool:
        """``want`` is not in OVN and waits for its ``after`` (``row.After``)."""
        after = want.after
        if after is None or after.unless in present:
            return False
        holder = present.get(after.ident)
        return holder is None or after.key not in (holder.row.get(after.column) or {})

    def sync_one(self, uid: str, wanted: list[Row]) -> SyncReport:
        actual = self.actual(uid, wanted)
        present = dict(actual) if any(w.after is not None for w in wanted) else actual
        created = updated = deleted = released = 0
        waiting: set[tuple[str, str]] = set()
        for want in wanted:
            have = actual.pop(want.ident, None)
            if have is None and want.after is not None:
                if self.held_back(want, present):
                    waiting.add((uid, want.external_ids.get(names.SITE, "")))
                    continue
                released += want.after.unless not in present
            if have is not None:
                differ = {c: v for c, v in want.columns.items() if not self.same(have.row.get(c), v)}
                changed = {c: self.value(v) for c, v in differ.items() if not isinstance(v, Keys)}
                if self._ext(have.row) != want.external_ids:
                    changed["external_ids"] = wire(dict(want.external_ids))
                if changed:
                    self.ops.append({"op": "update", "table": have.table, "where": _where(have.uuid), "row": changed})
                keys = [(c, v) for c, v in differ.items() if isinstance(v, Keys)]
                for column, value in keys:   # ours replaced pair by pair, the map's other pairs kept
                    held = have.row.get(column) or {}
                    stale = sorted(k for k in value.pairs if k in held)
                    mutations = [[column, "delete", ["set", stale]]] if stale else []
                    self.ops.append({"op": "mutate", "table": have.table, "where": _where(have.uuid),
                                     "mutations": mutations + [[column, "insert", wire(dict(value.pairs))]]})
                updated += bool(changed or keys)
                if want.parent is not None and have.parent is None:
                    self.attach(want, ["uuid", have.uuid])   # found but not under its parent (as the backend does)
                continue
            ref = f"row{len(self.ops)}"
            row = {c: self.value(v) for c, v in want.columns.items()}
            row["external_ids"] = wire(dict(want.external_ids))
            self.ops.append({"op": "insert", "table": want.table, "uuid-name": ref, "row": row})
            created += 1
            if want.parent is None:
                self.new_roots[(want.table, want.columns["name"])] = row
            else:
                self.attach(want, ["named-uuid", ref])
        self.gone |= {f.uuid for f in actual.values()}
        for f in actual.values():
            if f.parent is None:
                self.ops.append({"op": "delete", "table": f.table, "where": _where(f.uuid)})
            elif f.parent[1] not in self.gone:
                self.ops.append({"op": "mutate", "table": f.parent[0], "where": _where(f.parent[1]),
                                 "mutations": [[f.column, "delete", ["set", [["uuid", f.uuid]]]]]})
            deleted += 1
        return SyncReport(created, updated, deleted, released=released, waiting=frozenset(waiting))

    def stamp(self, want: Row) -> None:
        """Records ``want``'s stamp on the state marker, and makes the
        transaction conditional on the marker being as the replica shows it.

        Replicas of netpeerd write one at a time, each planning from its own
        copy of the NB, which can lag the last transaction of another replica
        by a moment. Planned from a stale copy, the deletes and updates of
        rows that transaction added do nothing, and still commit (the rows of
        a peering deleted just after it was bound stay). So every transaction
        that changes anything moves the marker (``names.SERIAL``, one more
        each time) and waits for it first: a plan made before another
        replica's transaction fails as ``timed out``, and is computed again
        on a copy that has caught up (``OvnBackend._write``)."""
        hit = self.lookup(want.table, want.columns["name"])
        where = [["name", "==", want.columns["name"]]]
        if hit is None:
            self.ops.insert(0, {"op": "wait", "timeout": 0, "table": want.table, "where": where,
                                "columns": ["name"], "until": "==", "rows": []})
            self.ops.append({"op": "insert", "table": want.table, "row": {
                "name": want.columns["name"], "external_ids": wire({**want.external_ids, names.SERIAL: "1"})}})
            return
        uuid, row = hit
        have = self._ext(row)
        if have.get(names.STATE_OF) != self.owner:
            raise ForeignRowConflict(f"{want.table} {want.columns['name']} exists but is not netpeer's state marker "
                                     f"(owner {self.owner!r}); remove or rename it")
        if not self.ops and all(have.get(k) == v for k, v in want.external_ids.items()):
            return   # nothing to change: no transaction
        self.ops.insert(0, {"op": "wait", "timeout": 0, "table": want.table, "where": where,
                            "columns": ["external_ids"], "until": "==", "rows": [{"external_ids": wire(dict(have))}]})
        try:
            serial = int(have.get(names.SERIAL, "0")) + 1
        except ValueError:
            serial = 1
        self.ops.append({"op": "update", "table": want.table, "where": _where(uuid),
                         "row": {"external_ids": wire({**want.external_ids, names.SERIAL: str(serial)})}})


def plan_sync(replica: PlainReplica, owner: str, desired: Mapping[str, list[Row] | None],
              marker: Row | None = None, track: bool = False) -> Plan:
    """The transaction that makes each network of ``desired`` (uid -> its
    rows, or None: the network goes) match, records the store's stamp on
    ``marker`` (the state marker's row, ``rows.state_row``) and, with
    ``track``, when it changes anything, bumps ``nb_cfg`` so every chassis
    acknowledges it (``Plan.cfg_op``)."""
    planner = _Planner(replica, owner)
    report = SyncReport()
    for uid, wanted in desired.items():
        report += planner.sync_one(uid, wanted or [])
    for (table, uuid, column), refs in planner.hang.items():
        planner.ops.append({"op": "mutate", "table": table, "where": _where(uuid),
                            "mutations": [[column, "insert", ["set", refs]]]})
    if marker is not None:
        planner.stamp(marker)
    cfg_op = None
    if track and planner.ops:
        planner.ops.append({"op": "mutate", "table": "NB_Global", "where": [], "mutations": [["nb_cfg", "+=", 1]]})
        cfg_op = len(planner.ops)
        planner.ops.append({"op": "select", "table": "NB_Global", "where": [], "columns": ["nb_cfg"]})
    return Plan(tuple(planner.ops), report, cfg_op)


def waiting(replica: PlainReplica, owner: str, desired: Mapping[str, list[Row] | None]) -> set[tuple[str, str]]:
    """(uid, other site) of the links of ``desired`` whose rows a sync would
    hold back; read-only. A network a sync would refuse waits for nothing."""
    out: set[tuple[str, str]] = set()
    for uid, wanted in desired.items():
        try:
            out |= _Planner(replica, owner).sync_one(uid, wanted or []).waiting
        except (ForeignRowConflict, MissingRow):
            continue
    return out


def drifted(replica: PlainReplica, owner: str, desired: Mapping[str, list[Row] | None]) -> set[str]:
    """The networks of ``desired`` whose rows a sync would change, or that
    cannot be checked (a foreign row on one of their names, a row they need
    missing). Read-only: lets the repair sweep check many networks in one
    pass and write only for those that drifted."""
    out = set()
    for uid, wanted in desired.items():
        planner = _Planner(replica, owner)
        try:
            planner.sync_one(uid, wanted or [])
        except (ForeignRowConflict, MissingRow):
            out.add(uid)
            continue
        if planner.ops or planner.hang:
            out.add(uid)
    return out
