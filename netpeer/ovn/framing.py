"""JSON-RPC messages out of an OVSDB byte stream, parsed by the standard library.

OVSDB sends JSON values back to back with nothing between them, so a reader
must find where each one ends. python-ovs's parser does that by parsing as
the bytes come, and builds every value object by object: most of the CPU of a
replica kept as plain values (docs/performance-log.md). ``Framer`` finds the ends
cheaply instead (strings removed by one regular expression, then the
braces counted, both in C) and parses each whole message once with
``json``. A string cut by a chunk's end is scanned again with the next chunk;
messages that end inside a chunk are handed on at once, the next one's start
kept.
"""

from __future__ import annotations

import json
import re

# A whole JSON string: runs of anything but a quote or a backslash, with escapes between
# them (written unrolled: 3x faster in re than an alternation per character, 0.9 s for
# a 74 MB monitor reply at 10,000 networks).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_DECODER = json.JSONDecoder()
# Where one top-level value ends and the next begins, once strings are removed.
_BETWEEN = re.compile(rb"\}\s*\{")


def _open_string(region: bytes) -> int:
    """Where a string still open at the end of ``region`` starts (-1: none).
    A quote is a string's edge unless an odd number of backslashes precede
    it; their parity is counted in C (a quote after j backslashes is found
    once by each of the patterns of 0..j backslashes), so a long string cut
    by a chunk's end costs one pass, not one per escaped quote in it."""
    edges, sign, j = 0, 1, 0
    while True:
        found = region.count(b"\\" * j + b'"')
        if not found:
            break
        edges, sign, j = edges + sign * found, -sign, j + 1
    if edges % 2 == 0:
        return -1
    pos = len(region)
    while True:
        pos = region.rfind(b'"', 0, pos)
        before = pos
        while before > 0 and region[before - 1] == 0x5C:   # the backslashes right before it
            before -= 1
        if (pos - before) % 2 == 0:
            return pos


class Framer:
    """``feed(bytes)`` returns the messages the stream completes, in order."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scanned = 0       # bytes of _buf scanned: it ends outside any string
        self._depth = 0         # braces open at _scanned
        self._between = False   # a message ended (and another began) before _scanned

    def _scan(self) -> None:
        region = bytes(self._buf[self._scanned:])
        cut = _open_string(region)   # scanned again with the next bytes
        if cut >= 0:
            region = region[:cut]
        outside = _STRING.sub(b"", region)
        self._scanned += len(region)
        self._depth += outside.count(b"{") - outside.count(b"}")   # messages are objects: braces are enough
        self._between = self._between or _BETWEEN.search(outside) is not None

    def feed(self, data: bytes) -> list:
        self._buf += data
        self._scan()
        if self._depth != 0 and not self._between:
            return []   # the first message is still open
        # Parse the whole values up to _scanned (with one still open after
        # them, parsing stops there); keep the rest and scan it again.
        text = self._buf[:self._scanned].decode()
        out, pos, end = [], 0, len(text)
        while True:
            while pos < end and text[pos] in " \t\r\n":
                pos += 1
            if pos == end:
                break
            try:
                value, pos = _DECODER.raw_decode(text, pos)
            except ValueError:
                if self._depth == 0:
                    raise
                break   # the open message
            out.append(value)
        del self._buf[:len(text[:pos].encode())]
        self._scanned, self._depth, self._between = 0, 0, False
        self._scan()
        return out
