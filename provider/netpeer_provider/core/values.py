"""Values not known yet.

During a preview or plan the engine does not know every input: a network's
name may come from another resource that does not exist yet. Each face turns
its engine's marker (Pulumi's ``pulumi.output.Unknown`` and placeholder
string, OpenTofu's msgpack unknown) into ``UNKNOWN`` before calling the core,
and back again on the way out.
"""

from __future__ import annotations

from typing import Any


class _Unknown:
    """The type of ``UNKNOWN``: a single, truthy, comparable-by-identity value.

    Truthy on purpose: "is this field given?" checks (``if not value``) must
    treat a value that will be known later as given.
    """

    _instance: "_Unknown | None" = None

    def __new__(cls) -> "_Unknown":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self) -> str:
        # Copies and unpickling give back the same object, so `is UNKNOWN` holds.
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return True


UNKNOWN = _Unknown()


def known(value: Any) -> bool:
    """False if ``value`` is ``UNKNOWN`` or contains it (in lists, tuples or dict values)."""
    if value is UNKNOWN:
        return False
    if isinstance(value, (list, tuple)):
        return all(known(v) for v in value)
    if isinstance(value, dict):
        return all(known(v) for v in value.values())
    return True


def given(value: Any) -> bool:
    """A value the user set: not None, not empty text (unknown counts as given)."""
    return value is not None and value != ""
