"""Messages out of an OVSDB byte stream (``netpeer.ovn.framing``), whatever
the chunks it arrives in: every cut of a stream whose strings hold quotes,
escapes, brackets and non-ASCII text."""

from __future__ import annotations

import json
import random

import pytest

from netpeer.ovn.framing import Framer

MESSAGES = [
    {"id": 1, "result": {"Logical_Router": {"u1": {"initial": {"name": "lr-{a}", "external_ids": [
        "map", [["netpeer:display", "team-a/net [1]"], ["note", "a \\\"quoted\\\" } ] value"]]]}}}}},
    {"method": "update2", "params": [None, {"Logical_Router_Policy": {"u2": {"insert": {
        "match": "inport == \"lrp-1\" && ip4.src == $as_x", "priority": 2000}}}}], "id": None},
    {"method": "echo", "params": ["one \" } quote", "{"], "id": "echo"},
    {"id": 2, "result": [{"uuid": ["uuid", "u3"]}, {}], "error": None, "note": "ünïcode \\ back\\\\slash"},
]


def stream(messages) -> bytes:
    return b"".join(json.dumps(m, ensure_ascii=False).encode() for m in messages)


def test_every_cut_of_the_stream_gives_the_same_messages():
    data = stream(MESSAGES)
    for cut in range(1, len(data)):
        framer = Framer()
        assert framer.feed(data[:cut]) + framer.feed(data[cut:]) == MESSAGES, cut


@pytest.mark.parametrize("seed", range(20))
def test_random_chunks_give_the_same_messages(seed):
    data, rng = stream(MESSAGES * 3), random.Random(seed)
    framer, out, pos = Framer(), [], 0
    while pos < len(data):
        step = rng.randint(1, 40)
        out += framer.feed(data[pos:pos + step])
        pos += step
    assert out == MESSAGES * 3


def test_messages_are_given_once_the_bytes_end_between_two():
    framer = Framer()
    first, second = (json.dumps(m).encode() for m in MESSAGES[:2])
    assert framer.feed(first) == [MESSAGES[0]]
    assert framer.feed(second[:10]) == []
    assert framer.feed(second[10:] + first[:5]) == []   # the server writes whole messages: the rest is on its way
    assert framer.feed(first[5:]) == [MESSAGES[1], MESSAGES[0]]
    assert framer.feed(b"") == []
