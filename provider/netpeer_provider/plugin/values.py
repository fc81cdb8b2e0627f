"""Pulumi property values and names to the core's plain values and back.

The engine speaks ``PropertyValue`` maps keyed by camelCase names
(``remoteNetwork``), with computed (unknown) values in previews and secrets
wrapped. An unknown value reaches the plugin as Pulumi's placeholder string
(``04da6b54-...``), not as a computed value: it must never be taken for a
name (a network replaced in the same run); the core speaks plain dicts keyed by snake_case names, with
``core.UNKNOWN``. Numbers are floats on the wire.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from pulumi.provider.experimental.property_value import PropertyValue, PropertyValueType
from pulumi.runtime.rpc import UNKNOWN as PLACEHOLDER

from netpeer_provider import core
from netpeer_provider.core import schema

_UPPER = re.compile(r"(?<!^)(?=[A-Z])")


def snake_case(name: str) -> str:
    """``remoteNetwork`` -> ``remote_network`` (the inverse of ``schema.camel_case``)."""
    return _UPPER.sub("_", name).lower()


def to_core(value: PropertyValue) -> Any:
    """A property value as a plain value: unknown (computed, or the placeholder) as ``core.UNKNOWN``, secrets
    unwrapped, keys snake_case."""
    kind = value.type
    if kind is PropertyValueType.COMPUTED or (kind is PropertyValueType.STRING and value.value == PLACEHOLDER):
        return core.UNKNOWN
    if kind is PropertyValueType.ARRAY:
        return [to_core(v) for v in value.value]
    if kind is PropertyValueType.MAP:
        return {snake_case(k): to_core(v) for k, v in value.value.items()}
    if kind is PropertyValueType.RESOURCE:
        return core.UNKNOWN  # a resource reference where a value was expected: never one of ours
    return value.value


def props_to_core(props: Mapping[str, PropertyValue]) -> dict[str, Any]:
    """A request's property map as a core dict."""
    return {snake_case(k): to_core(v) for k, v in props.items()}


def to_pulumi(value: Any, *, keep_unknowns: bool = True) -> PropertyValue:
    """A plain value as a property value (keys camelCase). ``keep_unknowns``
    false drops unknown members of maps (a preview's outputs must not hold
    computed values with this SDK)."""
    if value is core.UNKNOWN:
        return PropertyValue.computed()
    if value is None:
        return PropertyValue.null()
    if isinstance(value, bool):
        return PropertyValue(value)
    if isinstance(value, (int, float)):
        return PropertyValue(float(value))
    if isinstance(value, str):
        return PropertyValue(value)
    if isinstance(value, (list, tuple)):
        return PropertyValue([to_pulumi(v, keep_unknowns=keep_unknowns) for v in value
                              if keep_unknowns or core.known(v)])
    if isinstance(value, Mapping):
        return PropertyValue(props_to_pulumi(value, keep_unknowns=keep_unknowns))
    raise TypeError(f"cannot send {type(value).__name__} to the engine")


def props_to_pulumi(props: Mapping[str, Any], *, keep_unknowns: bool = True) -> dict[str, PropertyValue]:
    """A core dict as a property map (see ``to_pulumi``)."""
    return {schema.camel_case(k): to_pulumi(v, keep_unknowns=keep_unknowns) for k, v in props.items()
            if keep_unknowns or core.known(v)}


def settings(args: Mapping[str, PropertyValue]) -> dict[str, Any]:
    """The provider's configuration (``Configure``/``CheckConfig`` arguments)
    as ``core.Settings.resolve`` takes it: snake_case keys, plain values;
    values not known yet are left out."""
    names = {schema.camel_case(f.name) for f in schema.PROVIDER.fields}
    out = {}
    for key, value in args.items():
        plain = to_core(value) if key in names else core.UNKNOWN
        if core.known(plain):
            out[snake_case(key)] = plain
    return out
