"""The history of a run, as JSON lines: what every client called, when, and
what it was answered; when each fault was injected; the run's settings.

One line per operation, written when it completes::

    {"type": "op", "process": 7, "f": "get_peering", "group": "g2e1", "node": "r1",
     "args": {"ns": "g2e1-x", "network": "n1", "peering": "to-g2e1-y-n1"},
     "call": 81236620551, "return": 81245000112, "outcome": "ok",
     "result": {"phase": "Bound", "reason": "Bound"}}

Times are ``time.monotonic_ns()`` of this process: ``call`` before the
request was sent, ``return`` after its answer arrived, so the moment the
service acted lies between them. ``outcome`` is ``ok`` (with the answer),
``fail`` (with the status code, for an answer that says nothing was
changed) or ``info`` (no answer, or one that does not say whether the call
took effect: a timeout, a connection lost after the request was sent).
``process`` numbers a client's calls in order; a client whose call ended
``info`` goes on as a new process (that call may still take effect later).

``tests/linearizability/checker`` (lincheck) reads this format.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path


def now() -> int:
    """The history's clock."""
    return time.monotonic_ns()


class History:
    """Appends the records of one run to ``path`` (thread-safe); counts them."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "w")
        self._lock = threading.Lock()
        self._processes = 0
        self.ops = 0
        self.outcomes: dict[str, int] = {"ok": 0, "fail": 0, "info": 0}
        self.faults: dict[str, int] = {}

    def process(self) -> int:
        """A new process number."""
        with self._lock:
            self._processes += 1
            return self._processes - 1

    def _write(self, record: dict) -> None:
        line = json.dumps(record, separators=(",", ":"), sort_keys=True)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def meta(self, **fields) -> None:
        self._write({"type": "meta", **fields})

    def op(self, *, process: int, f: str, group: str, args: dict, call: int, ret: int | None, outcome: str,
           result=None, error: str = "", message: str = "", node: str = "", site: str = "") -> None:
        record = {"type": "op", "process": process, "f": f, "group": group, "args": args, "call": call,
                  "return": ret, "outcome": outcome}
        if result is not None:
            record["result"] = result
        if error:
            record["error"] = error
        if message:
            record["message"] = message[:300]
        if node:
            record["node"] = node
        if site:
            record["site"] = site
        self._write(record)
        with self._lock:
            self.ops += 1
            self.outcomes[outcome] += 1

    def nemesis(self, kind: str, target: str, start: int, end: int | None = None, detail: str = "") -> None:
        record = {"type": "nemesis", "kind": kind, "target": target, "start": start}
        if end is not None:
            record["end"] = end
        if detail:
            record["detail"] = detail
        self._write(record)
        with self._lock:
            self.faults[kind] = self.faults.get(kind, 0) + 1

    def close(self) -> None:
        with self._lock:
            self._file.close()
