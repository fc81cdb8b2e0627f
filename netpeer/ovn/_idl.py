"""Every use of python-ovs and ovsdbapp internals, in one place.

Each one is here because a public API does not offer it and a measurement or
a fault test showed it matters; the figure is next to it. Upgrading
python-ovs or ovsdbapp means re-checking this file only, which is why it is
one file of more than 400 lines.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import types

import ovs.db.custom_index
import ovs.db.data
import ovs.db.error
import ovs.db.idl
from ovsdbapp.backend.ovs_idl import connection
from ovsdbapp.backend.ovs_idl import transaction as ovs_transaction


def read_column(row, column: str):
    """A column's value, read straight from the IDL replica when the row has
    nothing pending in the current transaction.

    python-ovs rebuilds a set or map column from scratch on every attribute
    access (``Row.__getattr__`` converts it to Python, back to a Datum, and to
    Python again), which made reading rows most of the cost of a sync: bind
    p99 at 1,000 networks went from 92.6 ms to 13.1 ms together with group
    commit (docs/performance.md). Sets and maps of plain values (names,
    ``external_ids``) are read without ``to_python``'s per-atom reference
    lookup: that lookup was half the CPU of the repair sweep's comparison.
    The result is the same as ``getattr``."""
    d = row.__dict__
    data = d.get("_data")
    if data is not None and not d.get("_changes") and not d.get("_mutations"):
        datum = data.get(column)
        if datum is not None:
            kind = datum.type
            if kind.key.ref_table is None and not kind.is_scalar():
                if kind.value is None:
                    return sorted(k.value for k in datum.values)
                if kind.value.ref_table is None:
                    return {k.value: v.value for k, v in datum.values.items()}
            return datum.to_python(row._uuid_to_row)
    return getattr(row, column)


def session_connected(idl) -> bool:
    """Whether the IDL's session is connected now (python-ovs only offers
    ``has_ever_connected``)."""
    return idl._session.is_connected()


def session_seqno(idl) -> int:
    """A number that changes whenever the IDL's session connects or
    disconnects. After a reconnection python-ovs may replace its whole
    replica without a notification per row (``Idl.__clear``), so a change
    tracker must not trust what it heard across one (``netpeer.ovn.changes``)."""
    return idl._session.get_seqno()


def column_or_none(row, column: str):
    """A column's value, or None when ``row`` does not carry it (python-ovs
    hands ``notify`` the old values of the changed columns only)."""
    data = row.__dict__.get("_data")
    if data is None:
        return None
    datum = data.get(column)
    return datum.to_python(row._uuid_to_row) if datum is not None else None


def set_reconnect_backoff(idl, ms: int) -> None:
    """Reconnect at most ``ms`` apart instead of python-ovs's default
    (doubling up to 8 s). When a clustered NB loses its leader, the members
    that answer first are followers (or candidates) that ``leader_only``
    refuses, each refusal counts as a failed attempt, and the backoff grew to
    8 s: netpeerd stayed UNAVAILABLE for 15-16 s after a leader kill although
    a new leader was elected in about 1.2 s. With a 1 s cap it is back within
    1-4 s (tests/faults, docs/reliability.md)."""
    idl._session.reconnect.set_backoff(ms, ms)


def _own(json):
    """A copy of a string of the update, so that the replica keeps none of
    the parsed message's objects: the message is freed after it is read, and
    memory holding only its objects goes back to the system instead of being
    pinned by one kept string in every block (at 2,000 networks the
    replica's resident set grew by 88 MiB with copies, 128 MiB without, and 252 MiB
    before ``_Decoder``; figures after ``release_free_heap``)."""
    return json.encode().decode() if type(json) is str else json


# glibc's malloc_trim, or None elsewhere (then nothing is given back early).
_LIBC = ctypes.util.find_library("c")
_MALLOC_TRIM = getattr(ctypes.CDLL(_LIBC), "malloc_trim", None) if _LIBC else None
# Rows read from the server since memory was last given back, above which it is.
TRIM_AFTER_ROWS = 10_000


def release_free_heap() -> None:
    """Give the C heap's free memory back to the system. A replication (at
    start, after a reconnection) parses the whole NB into Python objects
    first; glibc keeps most of what they freed unless asked (at 2,000
    networks: 88 MiB over the starting size instead of 193 MiB)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


class _Memo(dict):
    """JSON value -> the one shared object for it, for one column (or one key
    of a map column), until the values prove not to repeat.

    Some columns never repeat a value (names, idents, matches): sharing them
    saves nothing and the memo would keep a second reference to every one of
    them (a dict entry per value, about 15 MiB at 10,000 networks). Once a
    memo holds ``SAMPLE`` values with almost no value read twice, it is
    dropped and the column's values are no longer shared. The threshold is
    large so that a column whose values do repeat, but only a few times each
    and in random order (the prefixes of the routes, one per peer), is kept."""

    __slots__ = ("reads", "shared")

    # A memo that grows past this starts again: values that churn (the
    # idents of deleted networks) must not stay forever.
    CAP = 1 << 18
    SAMPLE = 1 << 14

    def __init__(self):
        super().__init__()
        self.reads = 0
        self.shared = True

    def keep(self, key, value) -> None:
        if len(self) >= self.CAP:
            self.clear()
            self.reads = 0
        self[key] = value
        if len(self) == self.SAMPLE and self.reads - self.SAMPLE <= self.SAMPLE // 64:
            self.clear()
            self.shared = False


class _Scalar(ovs.db.data.Datum):
    """A Datum of one value (a name, a match, a priority), as the decoder
    makes it: python-ovs keeps the one Atom in a dict of its own, 224 bytes,
    more than the Datum, the Atom and most strings together; this keeps the
    Atom and makes the dict when ``values`` is read. Never changed in place:
    python-ovs replaces a datum of one value rather than patching it
    (``Datum.diff``), and a change in a transaction is a new Datum."""

    __slots__ = ("_atom",)

    def __init__(self, type_, atom):   # pylint: disable=super-init-not-called
        self.type = type_
        self._atom = atom

    @property
    def values(self):
        return {self._atom: None}


class _Decoder:
    """Builds python-ovs Datums from the JSON of an update, as
    ``Datum.from_json`` does, sharing the values that repeat.

    netpeer's rows repeat most of what they hold: the keys of every
    ``external_ids``, the owner, kind and namespace tags, priorities,
    actions, port types. python-ovs made a new Atom and a new string for each
    of them in every row. At 2,000 networks (34,000 NB rows) the replica took
    4,397 bytes per row and 6.1 s to arrive; sharing them (and the column
    names, below) takes 2,474 bytes per row and 4.8 s, with the same values
    (docs/performance.md, section 4, "The replica, smaller"). The values of
    a map have a memo per key, so that unique ones (``netpeer:ident``) stop
    being remembered while the tags beside them are still shared
    (``_Memo``).

    What is shared is never changed in place: Atoms never are, and a Datum of
    at most one value is replaced, not patched, by python-ovs
    (``Datum.diff`` patches only sets and maps, which are never shared).
    Anything unusual (references, floats, a malformed value) goes to
    python-ovs's own parser, which also raises its own errors."""

    # Map keys with a memo of their own, at most (keys are few: tags, options).
    KEYS_CAP = 1 << 12

    def __init__(self):
        self._atoms: dict[int, _Memo] = {}      # id(BaseType) -> JSON value -> Atom
        self._by_key: dict[int, dict] = {}      # id(value BaseType) -> map key -> _Memo of values
        self._scalars: dict[int, _Memo] = {}    # id(Type) -> JSON value -> Datum
        self._defaults: dict[int, object] = {}

    @staticmethod
    def _memo(store: dict, key) -> _Memo:
        memo = store.get(key)
        if memo is None:
            memo = store[key] = _Memo()
        return memo

    @staticmethod
    def _atom(base, json, memo: _Memo):
        if type(json) is str or type(json) is int:   # not bool: True == 1 would share
            if not memo.shared:
                return ovs.db.data.Atom.from_json(base, _own(json))
            memo.reads += 1
            atom = memo.get(json)
            if atom is None:
                json = _own(json)   # also as the key: a key is kept as long as the value
                atom = ovs.db.data.Atom.from_json(base, json)
                memo.keep(json, atom)
            return atom
        return ovs.db.data.Atom.from_json(base, json)

    def _map(self, type_, inner) -> dict:
        key, value = type_.key, type_.value
        keys = self._memo(self._atoms, id(key))
        by_key = self._by_key.get(id(value))
        if by_key is None or len(by_key) >= self.KEYS_CAP:
            by_key = self._by_key[id(value)] = {}
        values = {}
        for k, v in inner:
            key_atom = self._atom(key, k, keys)
            vals = by_key.get(key_atom.value)
            if vals is None:
                vals = by_key[key_atom.value] = _Memo()
            values[key_atom] = self._atom(value, v, vals)
        return values

    def datum(self, type_, json):
        if type(json) is list:
            if len(json) == 2 and type(json[1]) is list and type_.n_min <= len(json[1]) <= type_.n_max:
                kind, inner = json
                if kind == "set" and type_.value is None:
                    keys = self._memo(self._atoms, id(type_.key))
                    values = {self._atom(type_.key, e, keys): None for e in inner}
                    if len(values) == len(inner):
                        return ovs.db.data.Datum(type_, values)
                elif kind == "map" and type_.value is not None and all(
                        type(e) is list and len(e) == 2 for e in inner):
                    values = self._map(type_, inner)
                    if len(values) == len(inner):
                        return ovs.db.data.Datum(type_, values)
        elif type_.value is None and type_.n_max == 1 and (type(json) is str or type(json) is int):
            memo = self._memo(self._scalars, id(type_))
            if not memo.shared:
                return _Scalar(type_, ovs.db.data.Atom.from_json(type_.key, _own(json)))
            memo.reads += 1
            datum = memo.get(json)
            if datum is None:
                json = _own(json)
                datum = _Scalar(type_, ovs.db.data.Atom.from_json(type_.key, json))
                memo.keep(json, datum)
            return datum
        return ovs.db.data.Datum.from_json(type_, json)

    def default(self, type_):
        """The column's default value, for comparing only."""
        datum = self._defaults.get(id(type_))
        if datum is None:
            datum = self._defaults[id(type_)] = ovs.db.data.Datum.default(type_)
        return datum


class Writer:
    """Datums for the writes of one command, as python-ovs's
    ``Row.__setattr__`` makes them (``Datum.from_python``), with the Atom of
    each repeated value made and checked once: a netpeer row repeats most of
    what it holds (the tags of ``external_ids``, priorities, actions), and
    python-ovs made and checked an Atom for each, every time. Only plain
    strings and integers of columns without references; anything else
    (rows, booleans, a wrong count of values) goes to python-ovs, which also
    reports its own errors. One per command, so that nothing it remembers
    outlives the transaction."""

    def __init__(self):
        self._atoms: dict[tuple, object] = {}

    def _atom(self, base, value):
        kind = type(value)
        if (kind is not str and kind is not int) or base.ref_table is not None:
            return None
        key = (id(base), kind, value)
        atom = self._atoms.get(key)
        if atom is None:
            try:
                atom = ovs.db.data.Atom.from_python(base, value)
            except ovs.db.error.Error:
                return None
            self._atoms[key] = atom
        return atom

    def datum(self, type_, value):
        """The Datum of ``value``, or None to leave it to python-ovs."""
        values = {}
        if isinstance(value, dict):
            if type_.value is None:
                return None
            for k, v in value.items():
                ka, va = self._atom(type_.key, k), self._atom(type_.value, v)
                if ka is None or va is None:
                    return None
                values[ka] = va
        elif isinstance(value, (list, tuple, set, frozenset)):
            if type_.value is not None:
                return None
            for k in value:
                ka = self._atom(type_.key, k)
                if ka is None:
                    return None
                values[ka] = None
        else:
            if type_.value is not None:
                return None
            ka = self._atom(type_.key, value)
            if ka is None:
                return None
            values[ka] = None
        if not type_.n_min <= len(values) <= type_.n_max:
            return None
        return ovs.db.data.Datum(type_, values)


# (table, column) -> whether an index of the replica has the column.
_INDEXED: dict[tuple[str, str], bool] = {}


def write_column(row, column: str, value, writer: Writer) -> None:
    """``setattr(row, column, value)`` in a transaction, the same write with
    less Python per value (``Writer``): at 500 networks, 1,000 binds in
    one batch spent two thirds of building their NB transaction making
    Atoms. Columns an index of the replica covers (names) go through
    python-ovs, which keeps its indexes."""
    table = row._table
    key = (table.name, column)
    indexed = _INDEXED.get(key)
    if indexed is None:
        indexed = _INDEXED[key] = any(column in (c.column for c in idx.columns)
                                      for idx in table.rows.indexes.values())
    idl = row._idl
    datum = None
    if not indexed and column not in idl.readonly.get(table.name, ()):
        datum = writer.datum(table.columns[column].type, value)
    if datum is None:
        setattr(row, column, value)
        return
    idl.txn._write(row, table.columns[column], datum)


# A row's pending changes outside any transaction: none, and not writable.
_NOTHING_PENDING = types.MappingProxyType({})
# The per-transaction maps of a python-ovs row.
_TXN_MAPS = ("_changes", "_mutations", "_prereqs")


class _TxnMap:
    """A per-transaction map of a replica row (``_changes``, ``_mutations``,
    ``_prereqs``), made when a transaction first writes to the row.

    python-ovs gives every row three empty dicts for the transaction it may
    join one day: 192 bytes a row, 28 MiB of the replica at 10,000 networks
    (150,000 rows), nearly all of them never used. A row that is not among
    the current transaction's rows has nothing pending: reading gives a
    shared empty map that cannot be written to. python-ovs adds a row to the
    transaction's rows before it writes into ``_changes`` or ``_mutations``;
    from then on the first read stores a real dict in the row, the one
    python-ovs writes into (under the GIL ``setdefault`` is atomic: two
    threads get the same dict). ``Row.verify`` writes ``_prereqs`` without
    adding the row, so that one is made for any row read in a transaction
    (only ``verify`` and the commit read it). After the commit
    ``Transaction`` takes the maps of the rows it wrote away again."""

    def __init__(self, name: str, txn_rows_only: bool = True):
        self.name = name
        self.txn_rows_only = txn_rows_only

    def __get__(self, row, owner=None):
        if row is None:
            return self
        txn = row._idl.txn
        if txn is None or (self.txn_rows_only and txn._txn_rows.get(row.uuid) is not row):
            return _NOTHING_PENDING
        return row.__dict__.setdefault(self.name, {})


class _Row(ovs.db.idl.Row):
    """A row of the replica, as python-ovs's with its per-transaction maps
    made on demand (``_TxnMap``)."""

    _changes = _TxnMap("_changes")
    _mutations = _TxnMap("_mutations")
    _prereqs = _TxnMap("_prereqs", txn_rows_only=False)

    def __init__(self, idl, table, uuid, data):   # pylint: disable=super-init-not-called
        d = self.__dict__   # as python-ovs does: Row.__setattr__ writes columns
        d["uuid"] = uuid
        d["_idl"] = idl
        d["_table"] = table
        d["_data"] = data
        d["_persist_uuid"] = False


def _forget_txn_maps(rows) -> None:
    """Give the replica rows a transaction wrote their on-demand maps back
    (python-ovs leaves three new empty dicts on each at the end)."""
    for row in rows:
        if type(row) is _Row:
            d = row.__dict__
            for name in _TXN_MAPS:
                if d.get(name) == {}:
                    del d[name]


class _Rows(ovs.db.custom_index.IndexedRows):
    """A table's rows by uuid, as python-ovs's ``IndexedRows`` but keeping
    the row itself rather than a list of one row (python-ovs's list is for
    the moment a transaction holds a second row of the same uuid): about
    100 bytes less per row, 14 MiB at 10,000 networks."""

    def __getitem__(self, key):
        held = self.data[key]
        return held[-1] if type(held) is list else held

    def __setitem__(self, key, item):
        held = self.data.get(key)
        if held is None:
            self.data[key] = item
        elif type(held) is list:
            held.append(item)
        else:
            self.data[key] = [held, item]
        for index in self.indexes.values():
            index.add(item)

    def __delitem__(self, key):
        held = self.data[key]
        if type(held) is list:
            item = held.pop()
            if len(held) == 1:
                self.data[key] = held[0]
        else:
            item = held
            del self.data[key]
        for index in self.indexes.values():
            index.remove(item)


class Idl(connection.OvsdbIdl):
    """ovsdbapp's IDL without its per-row ``time.sleep(0)``: that yield is for
    green threads; with real threads it hands the GIL away once per row of
    every update and waits to get it back, which made each write wait behind
    the gRPC threads several times (the GIL still switches threads every few
    milliseconds without it). Rows are read from the server's updates by
    ``_Decoder``."""

    #: Called with (table name, row, old values or None) for every row the
    #: server adds, changes or deletes (``netpeer.ovn.changes``).
    on_change = None

    def __init__(self, *args, **kwargs):
        self._decoder = _Decoder()
        self._rows_read = 0
        self._column_info: dict[str, dict] = {}     # table -> column -> (column, name, type)
        super().__init__(*args, **kwargs)
        for table in self.tables.values():
            table.rows = _Rows(table)   # empty still: indexes are made after this

    def _Idl__create_row(self, table, uuid):
        """A new replica row (``_Row``)."""
        return _Row(self, table, uuid, ovs.db.idl.ColumnDefaultDict(table))

    def cooperative_yield(self):
        pass

    def run(self):
        result = super().run()
        if self._rows_read >= TRIM_AFTER_ROWS:
            self._rows_read = 0
            release_free_heap()
        return result

    def _Idl__row_update(self, table, row, row_json):
        """python-ovs's ``Idl.__row_update`` (a whole row from the server, new
        or replacing), with ``_Decoder`` and the schema's column names as
        keys: python-ovs kept the update's own string for each column of each
        row (19 MiB at 2,000 networks). A column's name and type are read
        once per table: python-ovs's column forwards each attribute read
        (``IdlColumn.__getattr__``), four per column and row. Same result,
        same warnings."""
        changed = False
        current = row._data
        self._rows_read += 1
        columns = self._column_info.get(table.name)
        if columns is None:
            columns = self._column_info[table.name] = {n: (c, c.name, c.type) for n, c in table.columns.items()}
        decode = self._decoder.datum
        for name, datum_json in row_json.items():
            found = columns.get(name)
            if found is None:
                ovs.db.idl.vlog.warn(f"unknown column {name} updating table {table.name}")
                continue
            column, column_name, type_ = found
            try:
                datum = decode(type_, datum_json)
            except ovs.db.error.Error as e:
                ovs.db.idl.vlog.warn(f"error parsing column {name} in table {table.name}: {e}")
                continue
            old = current.get(column_name)   # not current[...]: that builds a default Datum
            if old is None:
                if not datum.values and type_.n_min == 0:
                    continue   # the default, which python-ovs does not store either
                old = self._decoder.default(type_)
            if datum != old:
                current[column_name] = datum
                changed = changed or column.alert
        return changed

    def notify(self, event, row, updates=None):
        hook = self.on_change
        if hook is not None:
            hook(row._table.name, row, updates)


class Transaction(ovs_transaction.Transaction):
    """ovsdbapp's transaction, remembering the final status of the OVSDB
    commit. ovsdbapp reports a refusal by the database as a bare
    ``RuntimeError("OVSDB Error: ...")``; the recorded status tells it apart
    from a timeout or a lost connection without reading the message."""

    status: int | None = None

    def pre_commit(self, txn):
        super().pre_commit(txn)
        commit_block = txn.commit_block

        def recorded():
            written = list(txn._txn_rows.values())
            self.status = commit_block()
            _forget_txn_maps(written)
            return self.status

        txn.commit_block = recorded

    @property
    def refused(self) -> bool:
        return self.status in (ovs.db.idl.Transaction.ERROR, ovs.db.idl.Transaction.NOT_LOCKED)
