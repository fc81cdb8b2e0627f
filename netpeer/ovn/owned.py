"""Which rows of the replica are netpeer's, and which of those no network
wants (strays): read-only, over the plain replica (``netpeer.ovn.plain``).
The decision of what is ours is made here and in ``netpeer.ovn.plan``'s
lookups only, with ``ours``.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping

from netpeer.ovn import names, rows
from netpeer.ovn.plain import PlainReplica
from netpeer.ovn.rows import CHILD_COLUMNS, CHILD_TABLES, MANAGED_KINDS, ROOT_TABLES

_EMPTY: Mapping = {}


def ext(row: Mapping) -> Mapping:
    return row.get("external_ids") or _EMPTY


def ours(row: Mapping, owner: str, kinds=MANAGED_KINDS) -> bool:
    """Tagged as a row of ``owner``'s, of a kind netpeer manages."""
    tags = ext(row)
    return tags.get(names.OWNER) == owner and tags.get(names.KIND) in kinds


def children(replica: PlainReplica, table: str, column: str) -> Iterator[tuple[str, Mapping, str, Mapping]]:
    """(parent uuid, parent, child uuid, child) for every child hung under ``table``'s ``column``."""
    kids = replica.tables[CHILD_TABLES[(table, column)]]
    for puuid, parent in replica.tables[table].items():
        for ref in parent.get(column, ()):
            child = kids.get(ref)
            if child is not None:
                yield puuid, parent, ref, child


def _stray(row: Mapping, owner: str, keep, root: bool) -> bool:
    """Ours, but not where a network of ``keep`` would have it: its network
    is gone, it lost its netpeer:id, or (a root) it was renamed by hand. A
    renamed root cannot be found by name, so it would stay beside the one
    the sync recreates: it goes, and its children with it."""
    if not ours(row, owner):
        return False
    tags = ext(row)
    if tags.get(names.NETWORK) not in keep or not tags.get(names.ID):
        return True
    return root and row.get("name") != rows.root_name(tags)


def strays(replica: PlainReplica, owner: str, keep: frozenset[str]) -> list[tuple[str, str, tuple | None]]:
    """(table, uuid, (parent table, parent uuid, column) or None) of every
    stray row; roots first."""
    out: list[tuple[str, str, tuple | None]] = []
    for table in ROOT_TABLES:
        out += [(table, uuid, None) for uuid, row in replica.tables[table].items() if _stray(row, owner, keep, True)]
    for table, column in CHILD_COLUMNS:
        out += [(CHILD_TABLES[(table, column)], ref, (table, puuid, column))
                for puuid, _, ref, child in children(replica, table, column) if _stray(child, owner, keep, False)]
    return out


def removal(found: Iterable[tuple[str, str, tuple | None]]) -> list[dict]:
    """The operations that delete these rows: a root by a ``delete`` (its
    children with it), a child by leaving its parent (OVSDB then deletes it)."""
    found = list(found)
    gone = {uuid for _, uuid, parent in found if parent is None}
    ops = [{"op": "delete", "table": table, "where": [["_uuid", "==", ["uuid", uuid]]]}
           for table, uuid, parent in found if parent is None]
    for _, uuid, parent in found:
        if parent is not None and parent[1] not in gone:
            ops.append({"op": "mutate", "table": parent[0], "where": [["_uuid", "==", ["uuid", parent[1]]]],
                        "mutations": [[parent[2], "delete", ["set", [["uuid", uuid]]]]]})
    return ops


def count_owned(replica: PlainReplica, owner: str) -> int:
    total = sum(1 for table in ROOT_TABLES for row in replica.tables[table].values() if ours(row, owner))
    return total + sum(1 for table, column in CHILD_COLUMNS
                       for _, _, _, child in children(replica, table, column) if ours(child, owner))


def owned_ids(replica: PlainReplica, owner: str) -> dict[str, list[dict]]:
    """Our rows' external_ids by table (any kind of ours: instance ports too)."""
    out: dict[str, list[dict]] = {}
    for table, held in replica.tables.items():
        for row in held.values():
            tags = row.get("external_ids")
            if tags and tags.get(names.OWNER) == owner:
                out.setdefault(table, []).append(dict(tags))
    return out
