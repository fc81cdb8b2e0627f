"""One desired OVN NB row, where it hangs and what it waits for: the
shape both mappings produce (``netpeer.ovn.rows`` for a site's networks,
``netpeer.ovn.ic_rows`` for the links between sites) and
``netpeer.ovn.plan`` turns into operations. Plain data, nothing else."""

from __future__ import annotations

import dataclasses
from typing import Mapping


@dataclasses.dataclass(frozen=True)
class Parent:
    """Where a child row hangs: ``table`` row named ``name``, in ``column``."""

    table: str
    name: str
    column: str


@dataclasses.dataclass(frozen=True)
class After:
    """A row that waits to be inserted until another of the network's rows,
    ``ident``, holds ``key`` in its map ``column``, written there by someone
    else (``ovn-ic``'s tunnel key on a transit switch port,
    ``netpeer.ovn.ic_rows``); or until the row ``unless`` exists, so that
    what is already there is never taken away for a key that went. A row
    already in OVN is compared and repaired as any other."""

    ident: str
    column: str
    key: str
    unless: str


@dataclasses.dataclass(frozen=True)
class Row:
    """One desired OVN NB row. ``ident`` is unique within an owner and is
    stored in ``external_ids`` (``netpeer:id``); the backend finds, compares
    and repairs rows by it. ``columns`` excludes ``external_ids``;
    ``after``, when set, holds the row back until it is met."""

    table: str
    ident: str
    kind: str
    columns: Mapping[str, object]
    external_ids: Mapping[str, str]
    parent: Parent | None = None
    after: After | None = None
