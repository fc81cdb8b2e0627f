"""Catches, while the program runs, a peering declared both inline on a
Network and as a NetworkPeering resource (when the names are plain strings)."""

from __future__ import annotations

_DECLARED: dict[tuple[object, object, object], str] = {}


def declare(namespace, network, name, how: str) -> None:
    if not all(isinstance(x, str) or x is None for x in (namespace, network, name)) or not network or not name:
        return  # names only known later: the service's ALREADY_EXISTS answer catches it
    key = (namespace, network, name)
    other = _DECLARED.get(key)
    if other is not None and other != how:
        raise ValueError(
            f"peering {network}/{name} is declared {other} and {how}: a peering is managed either inline in "
            "Network(peerings=[...]) or as a NetworkPeering resource, not both")
    _DECLARED[key] = how
