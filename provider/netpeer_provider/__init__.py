"""Pulumi dynamic providers for netpeer, over a Pulumi-free core.

``netpeer_provider.core`` holds the logic every face shares (validation,
diffs, the mapping to the netpeer API, ids, errors) and never imports
Pulumi. The dynamic providers (``network.NetworkProvider``,
``peering.NetworkPeeringProvider``) live in importable modules so that
Pulumi pickles them by reference: the state holds a few dozen bytes naming
the class, no code, and upgrading this package takes effect on the next
refresh or update. The provider objects carry no attributes at all; settings
(endpoint, token, CA) are read at run time from the stack configuration
given to ``configure`` or the environment.

The provider classes are imported on first use, so that importing the core
(``import netpeer_provider.core``) does not import Pulumi.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {"NetworkProvider": "netpeer_provider.network", "NetworkPeeringProvider": "netpeer_provider.peering"}

__all__ = ["NetworkProvider", "NetworkPeeringProvider"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
