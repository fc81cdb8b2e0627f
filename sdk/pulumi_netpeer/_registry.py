"""Catches, while the program runs, a peering declared both inline on a
Network and as a NetworkPeering resource (when the names are plain strings),
and gives both resources their replacement order."""

from __future__ import annotations

from typing import Optional

import pulumi

_DECLARED: dict[tuple[object, object, object], str] = {}


def declare(namespace, network, name, how: str) -> None:
    """Records one declaration; a second one of the same peering, made the
    other way, stops the program with one line (``pulumi.RunError``: no
    traceback)."""
    if not all(isinstance(x, str) or x is None for x in (namespace, network, name)) or not network or not name:
        return  # names only known later: the service's ALREADY_EXISTS answer catches it
    key = (namespace, network, name)
    other = _DECLARED.get(key)
    if other is not None and other != how:
        raise pulumi.RunError(
            f"peering {network}/{name} is declared {other} and {how}: a peering is managed either inline in "
            "Network(peerings=[...]) or as a NetworkPeering resource, not both")
    _DECLARED[key] = how


def options(opts: Optional[pulumi.ResourceOptions]) -> pulumi.ResourceOptions:
    """``opts`` with ``delete_before_replace`` on unless the program chose:
    names are unique in the service, so a replacement (``pulumi up --replace``
    too, which does not ask the provider) must delete the old one first."""
    if opts is not None and opts.delete_before_replace is not None:
        return opts
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True))
