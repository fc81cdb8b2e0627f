"""Every use of python-ovs and ovsdbapp internals, in one place.

Each one is here because a public API does not offer it and a measurement or
a fault test showed it matters; the figure is next to it. Upgrading
python-ovs or ovsdbapp means re-checking this file only.
"""

from __future__ import annotations

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


class Idl(connection.OvsdbIdl):
    """ovsdbapp's IDL without its per-row ``time.sleep(0)``: that yield is for
    green threads; with real threads it hands the GIL away once per row of
    every update and waits to get it back, which made each write wait behind
    the gRPC threads several times (the GIL still switches threads every few
    milliseconds without it)."""

    #: Called with (table name, row, old values or None) for every row the
    #: server adds, changes or deletes (``netpeer.ovn.changes``).
    on_change = None

    def cooperative_yield(self):
        pass

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
            self.status = commit_block()
            return self.status

        txn.commit_block = recorded

    @property
    def refused(self) -> bool:
        return self.status in (ovs.db.idl.Transaction.ERROR, ovs.db.idl.Transaction.NOT_LOCKED)
