"""DynamicValue encoding (MessagePack and JSON) and schemas, without OpenTofu."""

from __future__ import annotations

import msgpack
import pytest

from netpeer_provider.tofu import (BOOL, DYNAMIC, NUMBER, STRING, UNKNOWN, Attribute, CodecError, Schema,
                                   list_of, map_of, object_of, set_of, tuple_of)
from netpeer_provider.tofu.codec import (contains_unknown, decode_json, decode_msgpack, encode_json,
                                         encode_msgpack, type_json)

T = object_of({
    "s": STRING, "n": NUMBER, "b": BOOL, "l": list_of(STRING), "set": set_of(NUMBER),
    "m": map_of(BOOL), "o": object_of({"x": STRING}), "t": tuple_of(STRING, NUMBER), "d": DYNAMIC,
})
VALUE = {"s": "é", "n": 1.5, "b": True, "l": ["a", None], "set": [1, 2], "m": {"k": False},
         "o": {"x": "y"}, "t": ["a", 7], "d": {"any": [1, "two"]}}


@pytest.mark.parametrize("encode,decode", [(encode_msgpack, decode_msgpack), (encode_json, decode_json)])
def test_round_trip(encode, decode):
    assert decode(encode(VALUE, T), T) == VALUE
    nulls = dict.fromkeys(VALUE)
    assert decode(encode({}, T), T) == nulls  # a missing attribute is null


def test_unknown_is_msgpack_extension_zero():
    data = encode_msgpack({"s": UNKNOWN}, object_of({"s": STRING}))
    assert msgpack.unpackb(data, ext_hook=lambda code, payload: ("ext", code))["s"] == ("ext", 0)
    assert decode_msgpack(data, object_of({"s": STRING})) == {"s": UNKNOWN}
    # refined unknowns (extension 12) and any other extension decode as UNKNOWN too
    refined = msgpack.packb(msgpack.ExtType(12, msgpack.packb({2: "pre"})))
    assert decode_msgpack(refined, STRING) is UNKNOWN
    assert contains_unknown({"a": [1, {"b": UNKNOWN}]}) and not contains_unknown({"a": [1]})
    with pytest.raises(CodecError):
        encode_json(UNKNOWN, STRING)
    with pytest.raises(TypeError):
        bool(UNKNOWN)


def test_numbers():
    big = 2 ** 80
    assert msgpack.unpackb(encode_msgpack(big, NUMBER)) == str(big)  # beyond int64: decimal string
    assert decode_msgpack(encode_msgpack(big, NUMBER), NUMBER) == big
    assert decode_msgpack(msgpack.packb("0.25"), NUMBER) == 0.25
    with pytest.raises(CodecError):
        encode_msgpack(True, NUMBER)


def test_dynamic_wire_forms():
    raw = msgpack.unpackb(encode_msgpack(["a", 1], DYNAMIC))
    assert raw == [b'["tuple",["string","number"]]', ["a", 1]]
    assert encode_json("x", DYNAMIC) == b'{"value":"x","type":"string"}'


def test_type_errors_name_the_path():
    with pytest.raises(CodecError, match=r"o\.x: expected a string"):
        encode_msgpack({"o": {"x": 3}}, T)
    with pytest.raises(CodecError, match="unexpected attribute"):
        encode_msgpack({"nope": 1}, T)
    with pytest.raises(CodecError, match=r"l\[1\]"):
        decode_json(b'{"l": ["a", 2]}', object_of({"l": list_of(STRING)}))


def test_schema_rules():
    s = Schema(attributes={"name": Attribute(STRING, required=True, force_new=True),
                           "id": Attribute(STRING, computed=True)})
    assert s.type == ["object", {"name": "string", "id": "string"}]
    assert s.force_new == ("name",) and s.computed == ("id",)
    assert type_json(s.type) == b'["object",{"name":"string","id":"string"}]'
    with pytest.raises(ValueError):
        Attribute(STRING, required=True, computed=True)
    with pytest.raises(ValueError):
        Attribute(STRING)
    with pytest.raises(ValueError):
        Schema(attributes={"Bad-Name": Attribute(STRING, optional=True)})
