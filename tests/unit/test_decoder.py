"""The NB replica's decoder: values that repeat are one shared object, values
that do not are not remembered, and both decode to what python-ovs makes."""

from __future__ import annotations

import ovs.db.data
import ovs.db.types
import pytest

from netpeer.ovn import _idl

EXTERNAL_IDS = {"key": "string", "value": "string", "min": 0, "max": "unlimited"}
NAME = {"key": "string"}


@pytest.fixture(autouse=True)
def small_sample(monkeypatch):
    monkeypatch.setattr(_idl._Memo, "SAMPLE", 8)


def tags(i: int) -> list:
    return ["map", [["netpeer:owner", "team-a"], ["netpeer:ident", f"policy/net-{i}/drop-in"]]]


def test_values_decode_as_python_ovs_does_whether_shared_or_not():
    decoder = _idl._Decoder()
    ids, name = ovs.db.types.Type.from_json(EXTERNAL_IDS), ovs.db.types.Type.from_json(NAME)
    for i in range(40):
        assert decoder.datum(ids, tags(i)) == ovs.db.data.Datum.from_json(ids, tags(i))
        assert decoder.datum(name, f"router-{i}") == ovs.db.data.Datum.from_json(name, f"router-{i}")


def test_unique_values_stop_being_remembered_and_repeated_ones_stay_shared():
    decoder = _idl._Decoder()
    ids, name = ovs.db.types.Type.from_json(EXTERNAL_IDS), ovs.db.types.Type.from_json(NAME)
    datums = [decoder.datum(ids, tags(i)) for i in range(40)]
    owners = {id(v) for d in datums for k, v in d.values.items() if k.value == "netpeer:owner"}
    assert len(owners) == 1, "a tag every row carries is one object"
    by_key = decoder._by_key[id(ids.value)]
    assert by_key["netpeer:owner"].shared and len(by_key["netpeer:owner"]) == 1
    assert not by_key["netpeer:ident"].shared and len(by_key["netpeer:ident"]) == 0, \
        "the idents never repeat: their memo is given up and empty"
    names = [decoder.datum(name, f"router-{i}") for i in range(40)]
    assert not decoder._scalars[id(name)].shared and len(decoder._scalars[id(name)]) == 0
    assert decoder.datum(name, "router-3") == names[3]


def test_values_that_repeat_a_few_times_each_keep_their_memo():
    decoder = _idl._Decoder()
    name = ovs.db.types.Type.from_json(NAME)
    first = [decoder.datum(name, f"10.{i % 6}.0.0/16") for i in range(40)]   # six prefixes, each often
    assert decoder._scalars[id(name)].shared
    assert first[0] is first[6]


def test_writes_make_the_datums_python_ovs_makes_and_leave_the_rest_to_it():
    writer = _idl.Writer()
    ids, name = ovs.db.types.Type.from_json(EXTERNAL_IDS), ovs.db.types.Type.from_json(NAME)
    prio = ovs.db.types.Type.from_json({"key": {"type": "integer", "minInteger": 0, "maxInteger": 32767}})
    nets = ovs.db.types.Type.from_json({"key": "string", "min": 1, "max": "unlimited"})
    action = ovs.db.types.Type.from_json({"key": {"type": "string", "enum": ["set", ["allow", "drop"]]}})
    for type_, value in [(ids, {"netpeer:owner": "team-a", "netpeer:ident": "policy/1"}), (ids, {}),
                         (name, "router-1"), (prio, 100), (nets, ["10.0.0.1/24", "fd00::1/64"]),
                         (action, "drop")]:
        for _ in range(2):   # made, then shared
            assert writer.datum(type_, value) == ovs.db.data.Datum.from_python(type_, value, lambda v: v)
    owners = {id(k) for d in (writer.datum(ids, {"netpeer:owner": "x"}) for _ in range(3)) for k in d.values}
    assert len(owners) == 1, "a repeated value is one Atom"
    # Out of range, not in the enum, the wrong count, booleans, references: python-ovs decides (and reports).
    ref = ovs.db.types.Type.from_json({"key": {"type": "uuid", "refTable": "Logical_Router_Port"}})
    flag = ovs.db.types.Type.from_json({"key": "boolean", "min": 0, "max": 1})
    for type_, value in [(prio, 40000), (action, "reject"), (nets, []), (name, ["a", "b"]), (flag, True),
                         (ref, "x"), (ids, {"k": 1.5})]:
        assert writer.datum(type_, value) is None, (type_.to_json(), value)
