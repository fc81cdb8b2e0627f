"""The NB rows netpeer monitors, kept as plain Python values.

python-ovs's replica (``ovs.db.idl``) makes, for every row, a Row, a Datum per
column and an Atom per value, and that is most of netpeerd's start-up and of
what a large write costs it: 63-70 µs of CPU per row for the replica at
10,000 networks, against 21-23 µs for the same rows as plain values
(docs/performance-log.md, "The floors under the two open targets"). This module
is the replica of netpeer's own OVSDB client (``netpeer.ovn.connection``):
each row is a dict of column -> value, where a value is

- a scalar column's atom (``str``, ``int``, ``float``, ``bool``; a uuid as
  its string),
- an optional column's atom or ``None``,
- a set column's atoms as a ``tuple`` (in no meaningful order),
- a map column's pairs as a ``dict``.

It applies the server's ``update2`` notifications (``monitor_cond``) as
python-ovs does: the same defaults for columns an insert leaves out, the
same reading of a diff (a set's listed atoms are toggled, a map's listed
pairs added, removed when equal or replaced, a single value replaced). It
does no I/O: a connection feeds it whole messages. Rows are never changed in
place: an update replaces a row's dict, so a dict handed out stays as it was.
Readers must not change them either: rows share their columns' defaults
(one empty map for every row without ``external_ids``).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Callable, Iterable, Mapping

_MISSING = object()

#: What a scalar column holds when an insert leaves it out, by atomic type.
_DEFAULTS = {"integer": 0, "real": 0.0, "boolean": False, "string": "",
             "uuid": "00000000-0000-0000-0000-000000000000"}


class Kind(enum.Enum):
    SCALAR = "scalar"       # exactly one value
    OPTIONAL = "optional"   # zero or one value: None or the value
    SET = "set"             # any number of values: a tuple
    MAP = "map"             # key/value pairs: a dict


@dataclasses.dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    default: object   # what the column holds when an insert leaves it out

    @classmethod
    def from_schema(cls, name: str, type_: str | Mapping) -> "Column":
        """A column from its ``type`` in an OVSDB schema (RFC 7047, 3.2)."""
        if isinstance(type_, str):
            return cls(name, Kind.SCALAR, _DEFAULTS[type_])
        def atomic(t):
            return t if isinstance(t, str) else t["type"]
        key = atomic(type_["key"])
        lo, hi = type_.get("min", 1), type_.get("max", 1)
        # An insert that leaves out a column of at least one value holds its
        # atoms' defaults, as in python-ovs (a map of one pair, a set of one).
        if "value" in type_:
            return cls(name, Kind.MAP, {_DEFAULTS[key]: _DEFAULTS[atomic(type_["value"])]} if lo else {})
        if hi == 1:
            return cls(name, Kind.SCALAR, _DEFAULTS[key]) if lo == 1 else cls(name, Kind.OPTIONAL, None)
        return cls(name, Kind.SET, (_DEFAULTS[key],) if lo else ())


def columns_from_schema(schema: Mapping, monitored: Mapping[str, Iterable[str]]) -> dict[str, dict[str, Column]]:
    """The monitored columns of each table, typed from the schema's JSON."""
    out = {}
    for table, names in monitored.items():
        spec = schema["tables"][table]["columns"]
        out[table] = {name: Column.from_schema(name, spec[name]["type"]) for name in names}
    return out


def _atom(value):
    """An atom as plain Python: ``["uuid", x]`` (or ``["named-uuid", x]``) is ``x``."""
    return value[1] if isinstance(value, list) else value


def _atoms(value) -> list:
    """The atoms of a set as the wire has it: ``["set", [...]]``, or one atom bare."""
    if isinstance(value, list) and value and value[0] == "set":
        return [_atom(v) for v in value[1]]
    return [_atom(value)]


def decode(column: Column, value):
    """A column's value from its wire form (RFC 7047, 5.1)."""
    kind = column.kind
    if kind is Kind.MAP:
        return {_atom(k): _atom(v) for k, v in value[1]}
    if kind is Kind.SET:
        return tuple(_atoms(value))
    if kind is Kind.OPTIONAL:
        atoms = _atoms(value)
        return atoms[0] if atoms else None
    return _atom(value)


def apply_diff(column: Column, old, diff):
    """A column's value after an ``update2`` diff, read as python-ovs reads it:
    a set's listed atoms toggled; a map's listed pairs added, removed when
    equal to the one held, replacing it otherwise; a single (scalar or
    optional) value replaced by the one sent (ovsdb-server sends the new
    value, ``["set", []]`` to clear an optional one)."""
    kind = column.kind
    if kind is Kind.MAP:
        out = dict(old)
        for k, v in decode(column, diff).items():
            if k in out and out[k] == v:
                del out[k]
            else:
                out[k] = v
        return out
    if kind is Kind.SET:
        out = dict.fromkeys(old)   # a set that keeps an order: a diff costs its own size, not the column's
        for v in _atoms(diff):
            if v in out:
                del out[v]
            else:
                out[v] = None
        return tuple(out)
    return decode(column, diff)


#: ``on_change(table, uuid, old, new)``: a row was inserted (old None),
#: changed, or deleted (new None).
ChangeHook = Callable[[str, str, "Mapping | None", "Mapping | None"], None]


class PlainReplica:
    """The monitored tables as ``tables[table][uuid] -> {column: value}``,
    with rows found by name in the tables given in ``named``."""

    def __init__(self, columns: Mapping[str, Mapping[str, Column]], named: Iterable[str] = (),
                 on_change: ChangeHook | None = None):
        self.columns = columns
        self.tables: dict[str, dict[str, dict]] = {t: {} for t in columns}
        self.on_change = on_change
        self._named = {t: {} for t in named}   # table -> name -> set of uuids

    def clear(self) -> None:
        """Forgets every row (before the initial rows of a new connection)."""
        for table in self.tables.values():
            table.clear()
        for index in self._named.values():
            index.clear()

    def by_name(self, table: str, name: str) -> tuple[str, ...]:
        """The uuids of ``table``'s rows named ``name`` (names are not unique in every table)."""
        index = self._named.get(table)
        if index is None:
            raise ValueError(f"{table} rows are not found by name in this replica (named: {sorted(self._named)})")
        return tuple(sorted(index.get(name, ())))

    def apply(self, updates: Mapping[str, Mapping[str, Mapping]]) -> None:
        """Takes a ``monitor_cond`` reply or an ``update2`` notification's
        table updates: ``{table: {uuid: {"initial"|"insert"|"modify": row} or {"delete": null}}}``."""
        for table, rows in updates.items():
            columns, mine = self.columns[table], self.tables[table]
            for uuid, change in rows.items():
                old = mine.get(uuid)
                if "delete" in change:
                    if old is None:
                        continue
                    del mine[uuid]
                    new = None
                elif "modify" in change:
                    if old is None:
                        raise ValueError(f"{table} row {uuid} modified before it was inserted")
                    new = dict(old)
                    for name, diff in change["modify"].items():
                        column = columns.get(name)
                        if column is not None:
                            new[name] = apply_diff(column, old[name], diff)
                    mine[uuid] = new
                else:
                    given = change.get("initial", change.get("insert"))
                    if given is None:
                        raise ValueError(f"{table} row {uuid}: unknown row update {sorted(change)}")
                    new = {}
                    for name, column in columns.items():
                        value = given.get(name, _MISSING)
                        if value is _MISSING:
                            new[name] = column.default
                        elif type(value) is not list and column.kind is not Kind.SET:
                            new[name] = value   # a scalar or optional atom, sent bare: the common case
                        else:
                            new[name] = decode(column, value)
                    mine[uuid] = new
                self._index(table, uuid, old, new)
                if self.on_change is not None:
                    self.on_change(table, uuid, old, new)

    def _index(self, table: str, uuid: str, old, new) -> None:
        index = self._named.get(table)
        if index is None:
            return
        before, after = old and old.get("name"), new and new.get("name")
        if before == after:
            return
        if before is not None:
            index[before].discard(uuid)
            if not index[before]:
                del index[before]
        if after is not None:
            index.setdefault(after, set()).add(uuid)
