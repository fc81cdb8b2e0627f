"""netpeer's provider logic, free of any infrastructure-as-code engine.

One core, thin faces: the Pulumi dynamic providers (``netpeer_provider.network``,
``netpeer_provider.peering``) and the OpenTofu provider
(``netpeer_provider.tofu.netpeer``) call this package and only translate: their engine's unknown
values to and from ``UNKNOWN``, property names, errors to their engine's
form. It must never import an engine's SDK (a test checks).

    from netpeer_provider.core import network, Session, Settings

    clean, failures = network.check(inputs)               # pure: no service call
    d = network.diff(old_outputs, clean)                  # Diff(changes, replaces, updates, ...)
    session = Session(Settings.resolve(config))           # endpoint, token, CA... ; faces add Terms
    created = network.create(session, clean)              # Created(id, outputs, warnings)
    network.preview(session, clean)                       # what create would answer (validate-only)
    now = network.read(session, created.id, created.outputs)  # Read(id, outputs, inputs) or None

What each resource has (fields, roles, replacement, secrets, descriptions)
is in ``schema``; ``OPERATIONS`` maps each resource name to its module.
"""

from __future__ import annotations

from types import ModuleType

from netpeer_provider.core import network, peering, review, schema
from netpeer_provider.core.errors import (Conflict, InvalidId, MissingSetting, NotBound, ProviderError,
                                          ServiceError, Terms)
from netpeer_provider.core.ids import NetworkId, PeeringId
from netpeer_provider.core.results import Created, Diff, Failure, Read, Updated
from netpeer_provider.core.session import Session, Settings
from netpeer_provider.core.values import UNKNOWN, known

# Each module has SCHEMA, check, diff, notes, validate_replacement, create, preview, read, import_,
# update, preview_update, delete.
OPERATIONS: dict[str, ModuleType] = {network.SCHEMA.name: network, peering.SCHEMA.name: peering}

__all__ = [
    "OPERATIONS", "UNKNOWN", "Conflict", "Created", "Diff", "Failure", "InvalidId", "MissingSetting",
    "NetworkId", "NotBound", "PeeringId", "ProviderError", "Read", "ServiceError", "Session", "Settings",
    "Terms", "Updated", "known", "network", "peering", "review", "schema",
]
