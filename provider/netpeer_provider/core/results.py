"""What the operations return: frozen values, plain dicts of outputs."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from netpeer_provider.core import schema
from netpeer_provider.core.values import known


@dataclasses.dataclass(frozen=True)
class Failure:
    """An input that cannot be right: ``path`` (``subnets[0]``, ``peerings[1].ttl``)
    and a one-line message naming the field and the value."""

    path: str
    message: str


@dataclasses.dataclass(frozen=True)
class Diff:
    """What changing the inputs would do.

    ``changes``: anything to do at all. ``replaces``: inputs whose change makes
    it another object (delete and create), in schema order. ``updates``: inputs
    that change in place. ``delete_before_replace``: the old one must go first
    (its name is unique)."""

    changes: bool
    replaces: tuple[str, ...] = ()
    updates: tuple[str, ...] = ()
    delete_before_replace: bool = True

    def detailed(self) -> dict[str, str]:
        """Each changed input and what its change does: ``"replace"`` or
        ``"update"``. Engines that show per-field diffs show exactly these
        (and no spurious ones, such as a defaulted namespace)."""
        out = {name: "update" for name in self.updates}
        out.update({name: "replace" for name in self.replaces})
        return out


@dataclasses.dataclass(frozen=True)
class Created:
    """A created resource: its id and outputs, and one-line warnings for the
    user (a peering that ended Failed, or still Pending after its wait)."""

    id: str
    outputs: dict[str, Any]
    warnings: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Updated:
    """An updated resource's outputs, and one-line warnings (as ``Created``)."""

    outputs: dict[str, Any]
    warnings: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Read:
    """A resource as the service has it: its outputs, and the inputs that would
    declare it as it is (so a refresh or an import shows no spurious diff)."""

    id: str
    outputs: dict[str, Any]
    inputs: dict[str, Any]


def identity_changes(fields: tuple[schema.Field, ...], olds: Mapping[str, Any],
                     news: Mapping[str, Any]) -> list[str]:
    """The replacing fields that change, in schema order. A defaulted field
    left unset keeps what the service chose; a field whose declared value is
    kept (``declared_as``) is compared with that, so clearing it is a change."""
    out = []
    for f in fields:
        new, old = news.get(f.name), olds.get(f.declared_as or f.name)
        if f.role is schema.Role.OPTIONAL_COMPUTED and f.declared_as is None and not new:
            continue
        if not known(new) or (new or None) != (old or None):
            out.append(f.name)
    return out
