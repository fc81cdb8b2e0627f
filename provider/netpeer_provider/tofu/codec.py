"""Values on the wire of the provider protocol (``DynamicValue``) <-> plain Python values.

Types are written the way the protocol writes them in a schema (cty's JSON type notation):

    "string" | "number" | "bool" | "dynamic"
    ["list", T] | ["set", T] | ["map", T] | ["tuple", [T, ...]] | ["object", {"name": T, ...}]

Python values: ``None`` for null, :data:`UNKNOWN` for a value known only after apply, ``str``,
``int``/``float`` for numbers, ``bool``, ``list`` for lists, sets and tuples (a set's order means
nothing), ``dict`` for maps and objects (an object's dict always has every attribute).

MessagePack is what OpenTofu sends and what we answer with. JSON appears in ``import``-related and
upgrade requests (``DynamicValue.json``) and in the raw state given to ``UpgradeResourceState``.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

STRING = "string"
NUMBER = "number"
BOOL = "bool"
DYNAMIC = "dynamic"


def list_of(t: Any) -> list:
    return ["list", t]


def set_of(t: Any) -> list:
    return ["set", t]


def map_of(t: Any) -> list:
    return ["map", t]


def tuple_of(*ts: Any) -> list:
    return ["tuple", list(ts)]


def object_of(attrs: dict[str, Any]) -> list:
    return ["object", dict(attrs)]


class _Unknown:
    """The single value standing for "known only after apply"."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        raise TypeError("UNKNOWN has no truth value: compare with `is UNKNOWN`")

    def __reduce__(self):
        return (_Unknown, ())


UNKNOWN = _Unknown()

_INT64 = (-(1 << 63), (1 << 63) - 1)


class CodecError(ValueError):
    """A value does not match its type; ``path`` tells where (attribute names, keys, indexes)."""

    def __init__(self, message: str, path: tuple = ()):
        self.path = tuple(path)
        where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        super().__init__(f"{where}: {message}" if where else message)


def type_json(t: Any) -> bytes:
    """A type in the compact JSON form the protocol uses in ``Schema.Attribute.type``."""
    return json.dumps(t, separators=(",", ":")).encode()


def _kind(t: Any) -> str:
    if isinstance(t, str):
        if t in (STRING, NUMBER, BOOL, DYNAMIC):
            return t
    elif isinstance(t, (list, tuple)) and len(t) in (2, 3) and t[0] in ("list", "set", "map", "tuple", "object"):
        return t[0]
    raise CodecError(f"not a type: {t!r}")


# --- decoding -------------------------------------------------------------------------------------

def _number(v: Any, path: tuple) -> int | float:
    if isinstance(v, bool):
        raise CodecError(f"expected a number, got {v!r}", path)
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):  # numbers beyond float64 travel as decimal strings
        try:
            d = Decimal(v)
        except ArithmeticError:
            raise CodecError(f"expected a number, got {v!r}", path) from None
        return int(d) if d == d.to_integral_value() else float(d)
    raise CodecError(f"expected a number, got {type(v).__name__}", path)


def _from_plain(v: Any, t: Any, path: tuple, *, msgpack: bool) -> Any:
    """Shape a value freshly parsed from MessagePack or JSON after its type."""
    if v is None or v is UNKNOWN:
        return v
    k = _kind(t)
    if k == STRING:
        if not isinstance(v, str):
            raise CodecError(f"expected a string, got {type(v).__name__}", path)
        return v
    if k == NUMBER:
        return _number(v, path)
    if k == BOOL:
        if not isinstance(v, bool):
            raise CodecError(f"expected a bool, got {type(v).__name__}", path)
        return v
    if k == DYNAMIC:
        if msgpack:  # [type as JSON bytes, value]
            if not (isinstance(v, list) and len(v) == 2 and isinstance(v[0], (bytes, str))):
                raise CodecError("malformed dynamic value", path)
            return _from_plain(v[1], json.loads(v[0]), path, msgpack=True)
        if not (isinstance(v, dict) and "value" in v and "type" in v):  # {"value": ..., "type": ...}
            raise CodecError("malformed dynamic value", path)
        return _from_plain(v["value"], v["type"], path, msgpack=False)
    if k in ("list", "set"):
        if not isinstance(v, list):
            raise CodecError(f"expected a {k}, got {type(v).__name__}", path)
        return [_from_plain(e, t[1], path + (i,), msgpack=msgpack) for i, e in enumerate(v)]
    if k == "tuple":
        if not isinstance(v, list) or len(v) != len(t[1]):
            raise CodecError(f"expected a tuple of {len(t[1])}", path)
        return [_from_plain(e, et, path + (i,), msgpack=msgpack) for i, (e, et) in enumerate(zip(v, t[1]))]
    if k == "map":
        if not isinstance(v, dict):
            raise CodecError(f"expected a map, got {type(v).__name__}", path)
        return {key: _from_plain(e, t[1], path + (key,), msgpack=msgpack) for key, e in v.items()}
    # object
    if not isinstance(v, dict):
        raise CodecError(f"expected an object, got {type(v).__name__}", path)
    attrs = t[1]
    extra = set(v) - set(attrs)
    if extra:
        raise CodecError(f"unexpected attribute(s) {sorted(extra)}", path)
    return {name: _from_plain(v.get(name), at, path + (name,), msgpack=msgpack) for name, at in attrs.items()}


def _ext_hook(code: int, data: bytes) -> Any:
    # Any extension is an unknown value (code 12 adds refinements, which we may ignore).
    return UNKNOWN


def decode_msgpack(data: bytes, t: Any) -> Any:
    import msgpack

    try:
        raw = msgpack.unpackb(data, raw=False, ext_hook=_ext_hook, strict_map_key=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise CodecError(f"bad MessagePack: {exc}") from None
    return _from_plain(raw, t, (), msgpack=True)


def decode_json(data: bytes | str, t: Any) -> Any:
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise CodecError(f"bad JSON: {exc}") from None
    return _from_plain(raw, t, (), msgpack=False)


def from_json_value(v: Any, t: Any) -> Any:
    """A value already parsed from JSON (e.g. a stored state) -> Python, checked against ``t``."""
    return _from_plain(v, t, (), msgpack=False)


def decode(dynamic_value: Any, t: Any) -> Any:
    """A ``tfplugin6.DynamicValue`` (or ``None``) -> Python; MessagePack first, else JSON."""
    if dynamic_value is None:
        return None
    if dynamic_value.msgpack:
        return decode_msgpack(dynamic_value.msgpack, t)
    if dynamic_value.json:
        return decode_json(dynamic_value.json, t)
    return None


# --- encoding -------------------------------------------------------------------------------------

def infer_type(v: Any) -> Any:
    """The type of a Python value, for attributes of type "dynamic"."""
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, (int, float, Decimal)):
        return NUMBER
    if isinstance(v, str):
        return STRING
    if isinstance(v, (list, tuple)):
        return ["tuple", [infer_type(e) for e in v]]
    if isinstance(v, dict):
        return ["object", {k: infer_type(e) for k, e in v.items()}]
    if v is None or v is UNKNOWN:
        return DYNAMIC
    raise CodecError(f"cannot tell the type of {type(v).__name__}")


def _to_plain(v: Any, t: Any, path: tuple, ext: Any) -> Any:
    """Python value -> a structure msgpack can pack (``ext`` builds the unknown marker)."""
    if v is None:
        return None
    if v is UNKNOWN:
        if ext is None:
            raise CodecError("an unknown value cannot be written as JSON", path)
        return ext
    k = _kind(t)
    if k == STRING:
        if not isinstance(v, str):
            raise CodecError(f"expected a string, got {type(v).__name__}", path)
        return v
    if k == NUMBER:
        if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
            raise CodecError(f"expected a number, got {type(v).__name__}", path)
        if isinstance(v, Decimal):
            v = int(v) if v == v.to_integral_value() else (float(v) if ext is None else str(v))
        if isinstance(v, int) and ext is not None and not (_INT64[0] <= v <= _INT64[1]):
            return str(v)  # MessagePack integers stop at 64 bits: a decimal string, as the protocol allows
        return v
    if k == BOOL:
        if not isinstance(v, bool):
            raise CodecError(f"expected a bool, got {type(v).__name__}", path)
        return v
    if k == DYNAMIC:
        vt = infer_type(v)
        if ext is None:
            return {"value": _to_plain(v, vt, path, ext), "type": vt}
        return [type_json(vt), _to_plain(v, vt, path, ext)]
    if k in ("list", "set"):
        if not isinstance(v, (list, tuple, set, frozenset)):
            raise CodecError(f"expected a {k}, got {type(v).__name__}", path)
        return [_to_plain(e, t[1], path + (i,), ext) for i, e in enumerate(v)]
    if k == "tuple":
        if not isinstance(v, (list, tuple)) or len(v) != len(t[1]):
            raise CodecError(f"expected a tuple of {len(t[1])}", path)
        return [_to_plain(e, et, path + (i,), ext) for i, (e, et) in enumerate(zip(v, t[1]))]
    if k == "map":
        if not isinstance(v, dict):
            raise CodecError(f"expected a map, got {type(v).__name__}", path)
        out = {}
        for key, e in v.items():
            if not isinstance(key, str):
                raise CodecError(f"map keys are strings, got {key!r}", path)
            out[key] = _to_plain(e, t[1], path + (key,), ext)
        return out
    if not isinstance(v, dict):
        raise CodecError(f"expected an object, got {type(v).__name__}", path)
    attrs = t[1]
    extra = set(v) - set(attrs)
    if extra:
        raise CodecError(f"unexpected attribute(s) {sorted(extra)}", path)
    return {name: _to_plain(v.get(name), at, path + (name,), ext) for name, at in attrs.items()}


def encode_msgpack(v: Any, t: Any) -> bytes:
    import msgpack

    return msgpack.packb(_to_plain(v, t, (), msgpack.ExtType(0, b"\x00")), use_bin_type=True)


def encode_json(v: Any, t: Any) -> bytes:
    return json.dumps(_to_plain(v, t, (), None), separators=(",", ":")).encode()


def contains_unknown(v: Any) -> bool:
    if v is UNKNOWN:
        return True
    if isinstance(v, dict):
        return any(contains_unknown(e) for e in v.values())
    if isinstance(v, (list, tuple, set, frozenset)):
        return any(contains_unknown(e) for e in v)
    return False
