"""The plain replica's reading of OVSDB's wire format and of update2
notifications (RFC 7047; ovsdb-server(7)), on hand-made messages. The same
code against a real ovsdb-server, with python-ovs as the oracle:
tests/functional/test_plain_replica.py."""

from __future__ import annotations

import pytest

from netpeer.ovn.plain import Kind, PlainReplica, apply_diff, columns_from_schema, decode

SCHEMA = {"tables": {"T": {"columns": {
    "name": {"type": "string"},
    "n": {"type": {"key": "integer"}},
    "flag": {"type": "boolean"},
    "peer": {"type": {"key": "string", "min": 0, "max": 1}},
    "ref": {"type": {"key": {"type": "uuid", "refTable": "T"}, "min": 0, "max": 1}},
    "addrs": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
    "ports": {"type": {"key": {"type": "uuid", "refTable": "T"}, "min": 0, "max": "unlimited"}},
    "ext": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
    "nets": {"type": {"key": "string", "min": 1, "max": "unlimited"}},
    "pairs": {"type": {"key": "string", "value": "integer", "min": 1, "max": "unlimited"}},
}}}}
COLS = columns_from_schema(SCHEMA, {"T": ["name", "n", "flag", "peer", "ref", "addrs", "ports", "ext", "nets",
                                          "pairs"]})["T"]
U1, U2 = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"


def test_kinds_and_defaults_come_from_the_schema():
    assert {c.name: (c.kind, c.default) for c in COLS.values()} == {
        "name": (Kind.SCALAR, ""), "n": (Kind.SCALAR, 0), "flag": (Kind.SCALAR, False),
        "peer": (Kind.OPTIONAL, None), "ref": (Kind.OPTIONAL, None), "addrs": (Kind.SET, ()),
        "ports": (Kind.SET, ()), "ext": (Kind.MAP, {}),
        "nets": (Kind.SET, ("",)), "pairs": (Kind.MAP, {"": 0})}   # at least one value: its atoms' defaults


@pytest.mark.parametrize("column, wire, value", [
    ("addrs", "10.0.0.1", ("10.0.0.1",)),                               # a set of one comes bare
    ("addrs", ["set", ["a", "b"]], ("a", "b")),
    ("addrs", ["set", []], ()),
    ("ports", ["uuid", U1], (U1,)),
    ("ports", ["set", [["uuid", U1], ["uuid", U2]]], (U1, U2)),
    ("peer", ["set", []], None),
    ("peer", "rp1", "rp1"),
    ("ref", ["uuid", U2], U2),
    ("ext", ["map", [["a", "1"], ["b", "2"]]], {"a": "1", "b": "2"}),
    ("n", 7, 7),
    ("flag", True, True),
])
def test_wire_values_decode_to_plain_ones(column, wire, value):
    assert decode(COLS[column], wire) == value


@pytest.mark.parametrize("column, old, diff, new", [
    ("addrs", ("a", "b"), "b", ("a",)),                                 # a listed atom held goes
    ("addrs", ("a",), ["set", ["b", "c"]], ("a", "b", "c")),            # atoms not held come
    ("ports", (U1,), ["uuid", U1], ()),
    ("ext", {"a": "1", "b": "2"}, ["map", [["a", "1"]]], {"b": "2"}),   # the same pair: removed
    ("ext", {"a": "1"}, ["map", [["a", "9"], ["c", "3"]]], {"a": "9", "c": "3"}),   # replaced, added
    ("peer", "rp9", "rp8", "rp8"),                                      # a single value is replaced
    ("peer", "rp9", ["set", []], None),
    ("peer", None, "rp1", "rp1"),
    ("name", "old", "new", "new"),
])
def test_update2_diffs_apply_as_python_ovs_applies_them(column, old, diff, new):
    assert apply_diff(COLS[column], old, diff) == new


def replica(**kw) -> PlainReplica:
    return PlainReplica({"T": COLS}, **kw)


def test_an_insert_takes_the_defaults_of_the_columns_it_leaves_out():
    r = replica()
    r.apply({"T": {U1: {"insert": {"name": "x", "addrs": "a"}}}})
    assert r.tables["T"][U1] == {"name": "x", "n": 0, "flag": False, "peer": None, "ref": None, "addrs": ("a",),
                                 "ports": (), "ext": {}, "nets": ("",), "pairs": {"": 0}}


def test_rows_are_replaced_not_changed_in_place_and_each_change_is_told():
    seen = []
    r = replica(on_change=lambda *change: seen.append(change))
    r.apply({"T": {U1: {"initial": {"name": "x", "ext": ["map", [["k", "v"]]]}}}})
    first = r.tables["T"][U1]
    r.apply({"T": {U1: {"modify": {"ext": ["map", [["k", "w"]]], "unknown-column": 1}}}})
    assert first["ext"] == {"k": "v"} and r.tables["T"][U1]["ext"] == {"k": "w"}
    r.apply({"T": {U1: {"delete": None}, U2: {"delete": None}}})   # a row never seen: nothing happens
    assert r.tables["T"] == {}
    assert [(t, u, old is None, new is None) for t, u, old, new in seen] == [
        ("T", U1, True, False), ("T", U1, False, False), ("T", U1, False, True)]
    assert seen[1][2] is first


def test_rows_are_found_by_name_through_renames_duplicates_and_deletes():
    r = replica(named=["T"])
    r.apply({"T": {U1: {"initial": {"name": "a"}}, U2: {"initial": {"name": "a"}}}})
    assert r.by_name("T", "a") == (U1, U2)
    r.apply({"T": {U1: {"modify": {"name": "b"}}}})
    assert r.by_name("T", "a") == (U2,) and r.by_name("T", "b") == (U1,)
    r.apply({"T": {U2: {"delete": None}}})
    assert r.by_name("T", "a") == ()
    r.clear()
    assert r.by_name("T", "b") == () and r.tables["T"] == {}
    with pytest.raises(ValueError, match=r"U rows are not found by name in this replica \(named: \['T'\]\)"):
        r.by_name("U", "a")


def test_updates_it_cannot_place_are_errors():
    r = replica()
    with pytest.raises(ValueError, match=f"T row {U1} modified before it was inserted"):
        r.apply({"T": {U1: {"modify": {"name": "x"}}}})
    with pytest.raises(ValueError, match=r"unknown row update \['rename'\]"):
        r.apply({"T": {U1: {"rename": {}}}})
