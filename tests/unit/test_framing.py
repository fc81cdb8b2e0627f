"""Messages out of an OVSDB byte stream (``netpeer.ovn.framing``), whatever
the chunks it arrives in: every cut of a stream whose strings hold quotes,
escapes, brackets and non-ASCII text."""

from __future__ import annotations

import json
import random

import pytest

from netpeer.ovn import framing
from netpeer.ovn.framing import Framer

STRING = framing._STRING

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


def test_a_message_is_given_as_soon_as_it_is_whole():
    framer = Framer()
    first, second = (json.dumps(m).encode() for m in MESSAGES[:2])
    assert framer.feed(first + second[:10]) == [MESSAGES[0]]
    assert framer.feed(second[10:] + first[:5]) == [MESSAGES[1]]
    assert framer.feed(first[5:]) == [MESSAGES[0]]
    assert framer.feed(b"") == []


def test_a_string_cut_by_a_chunk_never_reaches_the_expression(monkeypatch):
    """The expression that removes strings is only given whole ones: at a
    string left open by a chunk's end it would start again at each escaped
    quote inside it, to the chunk's end (quadratic for a long match)."""
    value = 'inport == {' + ", ".join(f'"np-peer-{i:05d}"' for i in range(2000)) + '}'
    data = json.dumps({"method": "update2", "params": [None, {"match": value}], "id": None}).encode()
    given = []

    class Watched:
        def sub(self, repl, region):
            given.append(region)
            return STRING.sub(repl, region)
    monkeypatch.setattr(framing, "_STRING", Watched())
    framer, out = Framer(), []
    for k in range(0, len(data), 4096):
        out += framer.feed(data[k:k + 4096])
    assert out == [json.loads(data)]
    assert len(given) > 10 and all(framing._open_string(region) == -1 for region in given)
    assert sum(map(len, given)) < 2 * len(data)
