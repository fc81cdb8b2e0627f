"""From ``netpeer_provider.core`` to OpenTofu's terms: schemas, values, paths, durations.

Everything here is a translation; no rule of netpeer's lives in this module.

- ``attributes(resource)``: OpenTofu attributes derived from ``core.schema``. A core input becomes a
  required, or an optional+computed attribute (optional inputs with a default too: the plan writes the
  default when the configuration leaves the attribute out, so removing ``description`` plans ``""``);
  a core output becomes a computed attribute. Input-only fields (a network's inline ``peerings``) and
  the provider's bookkeeping outputs (``internal``) are left out; ``id`` (the resource name) is added.
- ``to_core``/``from_core``: OpenTofu's ``UNKNOWN`` <-> the core's.
- ``path``: a core failure's path (``subnets[0]``, ``routes[1].next_hop``) -> an attribute path of
  the schema (``("subnets", 0)``), cut where the schema has nothing finer.
- ``seconds``/``duration``: ``wait_for_bound`` is a duration string here (``"0s"``, ``"2m"``,
  ``"1m30s"``); the core counts seconds.
- ``TIMEOUTS``/``timeout``: the ``timeouts { create = "5m" }`` block, OpenTofu's way to bound an
  operation's waits; the core is given the shorter of a wait and its operation's timeout.
"""

from __future__ import annotations

import re
from typing import Any

from netpeer_provider import core
from netpeer_provider.core import schema as cs

from .codec import BOOL, NUMBER, STRING, UNKNOWN, list_of, object_of
from .schema import Attribute, Block

# Fields whose OpenTofu type differs from the core's, with the description to show instead.
OVERRIDES: dict[tuple[str, str], tuple[Any, str]] = {
    ("NetworkPeering", "wait_for_bound"): (
        STRING, "How long a create or update waits for the peering to be Bound: a duration like `0s`, "
                "`90s`, `2m`, `1m30s` (at most `1h`); it stops at once if the peering is Failed. If it is not "
                "Bound in time the peering stays (it binds when the other side consents) and the apply warns, "
                "or fails if the provider setting `error_on_not_bound` is true (the peering is recorded). `0s` "
                "(the default) does not wait. A setting of the provider; the service never sees it."),
}
ID_DESCRIPTION = "The resource name, `{}`; also the import id."
_SCALARS = {cs.Kind.STRING: STRING, cs.Kind.NUMBER: NUMBER, cs.Kind.BOOL: BOOL}


def tofu_type(t: cs.Type) -> Any:
    """A core type in the protocol's type notation."""
    if t.kind is cs.Kind.LIST:
        return list_of(tofu_type(t.items))
    if t.kind is cs.Kind.OBJECT:
        return object_of({f.name: tofu_type(f.type) for f in t.fields})
    return _SCALARS[t.kind]


def fields(resource: cs.Resource) -> dict[str, cs.Field]:
    """The core fields that OpenTofu sees, by name (inputs before outputs of the same name)."""
    out: dict[str, cs.Field] = {}
    for f in resource.fields:
        if f.role is cs.Role.INPUT_ONLY or f.internal or f.name in out:
            continue
        out[f.name] = f
    return out


def attributes(resource: cs.Resource) -> dict[str, Attribute]:
    """The OpenTofu attributes of a core resource (see the module docstring)."""
    attrs = {"id": Attribute(STRING, ID_DESCRIPTION.format(resource.id_format), computed=True)}
    for name, f in fields(resource).items():
        t, text = OVERRIDES.get((resource.name, name), (tofu_type(f.type), f.description))
        if f.role is cs.Role.REQUIRED:
            attrs[name] = Attribute(t, text, required=True, sensitive=f.secret)
        elif f.role.is_input:
            attrs[name] = Attribute(t, text, optional=True, computed=True, sensitive=f.secret)
        else:
            attrs[name] = Attribute(t, text, computed=True, sensitive=f.secret)
    return attrs


def defaults(resource: cs.Resource) -> dict[str, Any]:
    """What the plan writes for an optional input the configuration leaves out."""
    out = {}
    for name, f in fields(resource).items():
        if f.role is cs.Role.OPTIONAL and f.default is not None:
            out[name] = duration(f.default) if (resource.name, name) in OVERRIDES else f.default
    return out


def provider_attributes() -> dict[str, Attribute]:
    """The provider block: every setting optional (each falls back to its environment variable)."""
    return {f.name: Attribute(tofu_type(f.type), f"{f.description} Defaults to `${f.env}`.", optional=True,
                              sensitive=f.secret) for f in cs.PROVIDER.fields}


def to_core(value: Any) -> Any:
    """OpenTofu's ``UNKNOWN`` as the core's (which, unlike ours, may be tested for truth)."""
    if value is UNKNOWN:
        return core.UNKNOWN
    if isinstance(value, list):
        return [to_core(v) for v in value]
    if isinstance(value, dict):
        return {k: to_core(v) for k, v in value.items()}
    return value


def from_core(value: Any) -> Any:
    if value is core.UNKNOWN:
        return UNKNOWN
    if isinstance(value, (list, tuple)):
        return [from_core(v) for v in value]
    if isinstance(value, dict):
        return {k: from_core(v) for k, v in value.items()}
    return value


def known(value: Any) -> bool:
    return core.known(to_core(value))


_STEP = re.compile(r"([a-z_][a-z0-9_]*)|\[(\d+)\]|\[([^\]]*)\]")


def path(text: str | None, t: Any) -> tuple | None:
    """``"routes[1].next_hop"`` -> ``("routes", 1)`` for the object type ``t``; None when the first
    name is not an attribute of ``t`` (the message still names it)."""
    if not text:
        return None
    steps: list = []
    current = t
    for m in _STEP.finditer(text):
        name, index, key = m.groups()
        if name is not None:
            if not (isinstance(current, list) and current[0] == "object" and name in current[1]):
                break
            steps.append(name)
            current = current[1][name]
        elif index is not None and isinstance(current, list) and current[0] == "list":
            steps.append(int(index))
            current = current[1]
        else:
            break
    return tuple(steps) or None


_DURATION = re.compile(r"^(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,9})s)?$")


def seconds(field: str, text: Any) -> int:
    """``"1m30s"`` -> 90. ``ValueError`` with the one line to show for anything else."""
    if isinstance(text, str):
        m = _DURATION.match(text.strip())
        if text.strip() == "0":
            return 0
        if m and any(m.groups()):
            h, mi, s = (int(g or 0) for g in m.groups())
            return h * 3600 + mi * 60 + s
    raise ValueError(f"{field}: {text!r} is not a duration (like 0s, 90s, 2m, 1m30s)")


def duration(value: Any) -> str:
    """Seconds -> the shortest duration string (``0s``, ``90s``, ``2m``, ``1h``)."""
    n = int(value or 0)
    for unit, size in (("h", 3600), ("m", 60)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}s"


TIMEOUT_OPERATIONS = ("create", "update", "delete")
TIMEOUTS = Block({op: Attribute(STRING, f"How long a {op} may wait (for a peering to be Bound or Programmed; "
                                        f"for a network's peerings to go): a duration like `90s`, `5m`, `1h`. "
                                        f"Unset: the operation's own limit.", optional=True)
                  for op in TIMEOUT_OPERATIONS},
                 description="Bounds on the waits of each operation (OpenTofu's `timeouts` block).")


def timeout_errors(value: Any) -> list[tuple[str, str]]:
    """(operation, one line) for each duration of a ``timeouts`` block that does not parse."""
    out = []
    for op in TIMEOUT_OPERATIONS:
        text = (value or {}).get(op) if value is not UNKNOWN else None
        if text is not None and text is not UNKNOWN:
            try:
                seconds(f"timeouts.{op}", text)
            except ValueError as exc:
                out.append((op, str(exc)))
    return out


def timeout(value: Any, op: str) -> int | None:
    """The seconds ``timeouts.<op>`` gives, or None when it is unset (or does not parse: validated before)."""
    text = (value or {}).get(op) if value is not UNKNOWN else None
    try:
        return None if text is None or text is UNKNOWN else seconds(f"timeouts.{op}", text)
    except ValueError:
        return None
