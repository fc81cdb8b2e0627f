"""What every NB command of the backend knows: which rows are ours and where
a network's rows are (``_OwnedRows``), read-only. Split from
``netpeer.ovn.backend`` so that module stays one screenful of commands and
the connection; the decision of what is ours is still made in one place.
"""

from __future__ import annotations

from typing import Iterable

from ovsdbapp.backend.ovs_idl import command as ovs_command

from netpeer.ovn import _idl, names, rows
from netpeer.ovn.ic_rows import Ref
from netpeer.ovn.plan import ForeignRowConflict, missing_ref, normalized
from netpeer.ovn.rows import CHILD_COLUMNS, MANAGED_KINDS, ROOT_TABLES, Row

_get = _idl.read_column


class _OwnedRows(ovs_command.BaseCommand):
    """What every command knows: which rows are ours and where a network's
    rows are. Changes nothing by itself."""

    #: Read-only commands set this to a dict: each row's external_ids is then
    #: read once per command (a comparison looks at them up to four times).
    #: A command that writes must not: its own changes would not be seen.
    _ext_memo: dict | None = None

    def __init__(self, api, owner: str):
        super().__init__(api)
        self.owner = owner

    def _ext(self, row) -> dict:
        memo = self._ext_memo
        if memo is None:
            return _get(row, "external_ids")
        ext = memo.get(row.uuid)
        if ext is None:
            ext = memo[row.uuid] = _get(row, "external_ids")
        return ext

    def _ours(self, row, kinds=MANAGED_KINDS) -> bool:
        ext = self._ext(row)
        return ext.get(names.OWNER) == self.owner and ext.get(names.KIND) in kinds

    def _lookup(self, table: str, name: str):
        return self.api.lookup(table, name, default=None)

    def _value(self, value):
        """A desired column value as the IDL takes it (a ``Ref`` becomes its row)."""
        if isinstance(value, Ref):
            row = self._lookup(value.table, value.name)
            if row is None:
                raise missing_ref(value.table, value.name)
            return [row]
        return value

    def _same(self, have, want) -> bool:
        if isinstance(want, Ref):
            target = self._lookup(want.table, want.name)
            rows_ = have if isinstance(have, (list, tuple)) else [have]
            return target is not None and [r.uuid for r in rows_ if r is not None] == [target.uuid]
        return normalized(have) == normalized(want)

    def _transit_children(self, uid: str, found: dict, wanted) -> None:
        """Adds to ``found`` the rows of ``uid`` on transit switches (switches
        we do not own, created by ovn-ic): those named by the desired rows and
        by the network's own transit router ports."""
        switches = {w.parent.name for w in wanted or () if w.parent is not None and w.parent.table == "Logical_Switch"
                    and w.parent.name.startswith(names.TRANSIT_PREFIX)}
        switches |= {self._ext(row).get(names.TRANSIT_SWITCH) for row, _, _ in found.values()}
        for ts in sorted(s for s in switches if s):
            switch = self._lookup("Logical_Switch", ts)
            if switch is None or self._ours(switch):
                continue
            for child in _get(switch, "ports"):
                ext = self._ext(child)
                if self._ours(child) and ext.get(names.NETWORK) == uid:
                    found[ext.get(names.ID) or f"malformed/{child.uuid}"] = (child, switch, "ports")

    def _actual(self, uid: str, wanted=None) -> dict[str, tuple[object, object | None, str | None]]:
        """ident -> (row, parent row, parent column) for the rows of ``uid``."""
        found = {}
        for table, name in rows.root_names(uid):
            root = self._lookup(table, name)
            if root is None:
                continue
            if not self._ours(root):
                # Never adopt, change or shadow a row someone else made.
                raise ForeignRowConflict(
                    f"{table} {name} exists but is not owned by netpeer "
                    f"(owner {self.owner!r}); remove or rename it so network {uid} can be programmed")
            # A root found by its name is this network's even if a hand edit
            # dropped its netpeer:id: the sync writes the tags back.
            ident = self._ext(root).get(names.ID) or rows.ident_of_root(table, uid, name)
            found[ident] = (root, None, None)
            for parent_table, column in CHILD_COLUMNS:
                if parent_table != table:
                    continue
                for child in _get(root, column):
                    ext = self._ext(child)
                    if self._ours(child) and ext.get(names.NETWORK) == uid:
                        # A child without its netpeer:id cannot be matched to a
                        # desired row: it is deleted (and the desired one made)
                        # in the same transaction, so unique names do not clash.
                        found[ext.get(names.ID) or f"malformed/{child.uuid}"] = (child, root, column)
        self._transit_children(uid, found, wanted)
        return found

    def _stray(self, row, keep, root: bool) -> bool:
        """Ours, but not where a network of ``keep`` would have it: its network
        is gone, it lost its netpeer:id, or (a root) it was renamed by hand. A
        renamed root cannot be found by name, so it would stay beside the one
        the sync recreates: it goes, and its children with it."""
        if not self._ours(row):
            return False
        ext = self._ext(row)
        if ext.get(names.NETWORK) not in keep or not ext.get(names.ID):
            return True
        return root and row.name != rows.root_name(ext)

    def _strays(self, keep) -> Iterable[tuple[object, object | None, str | None]]:
        """(row, parent, column) of every stray row; roots first."""
        for table in ROOT_TABLES:
            for row in list(self.api.tables[table].rows.values()):
                if self._stray(row, keep, root=True):
                    yield row, None, None
        for table, column in CHILD_COLUMNS:
            for parent in list(self.api.tables[table].rows.values()):
                for child in list(_get(parent, column)):
                    if self._stray(child, keep, root=False):
                        yield child, parent, column

    def _differs(self, want: Row, have) -> bool:
        row, parent, _ = have
        if want.parent is not None and parent is None:
            return True
        if any(not self._same(_get(row, col), value) for col, value in want.columns.items()):
            return True
        return self._ext(row) != dict(want.external_ids)
