"""A netpeerd whose service records the order in which writes were
serialized. Behaviour is the real ``Service``'s (locking, group commit and
all): the subclass only wraps each write's operation to note when it ran and
how it ended, and gives the service a clock that never returns the same
instant twice (so creation times order strictly, as the serialization does)."""

from __future__ import annotations

import threading
from datetime import timedelta

from netpeer.core.models import utcnow
from netpeer.errors import NetpeerError
from netpeer.service import Service, Settings
from tests.support import Netpeerd, start_netpeerd

WRITES = ("create_network", "update_network", "delete_network", "create_peering", "update_peering",
          "delete_peering")


class RecordingService(Service):
    def __init__(self, store, backend, settings: Settings = Settings(), **parts):
        self._clock_lock = threading.Lock()
        self._last = None
        super().__init__(store, backend, settings, clock=self._tick, **parts)
        self.entries: list[dict] = []      # writes whose operation ran against the store
        self.prelock: list[dict] = []      # calls refused before reading any state
        self._local = threading.local()
        self._record_lock = threading.Lock()
        self._seq = 0

    def _tick(self):
        with self._clock_lock:
            now = utcnow()
            if self._last is not None and now <= self._last:
                now = self._last + timedelta(microseconds=1)
            self._last = now
            return now

    @property
    def log(self) -> list[dict]:
        """The writes in the order the service serialized them."""
        with self._record_lock:
            return sorted(self.entries, key=lambda e: e["seq"])

    def _write(self, fn, validate_only: bool = False, **kwargs):
        """Notes when the write's operation runs and how it ends. The service
        runs operations one after the other inside its write transaction(s),
        possibly on another caller's thread (group commit), so the order in
        which they run is the order the service serialized them. An operation
        re-run (a group retried write by write) takes its last position."""
        entry = getattr(self._local, "entry", None)
        if entry is None or validate_only:
            return super()._write(fn, validate_only, **kwargs)

        def recorded(tx):
            try:
                out = fn(tx)
            except NetpeerError as exc:
                self._note(entry, code=type(exc).__name__, tx=id(tx))
                raise
            self._note(entry, code="OK", result=out[0], tx=id(tx))
            return out

        try:
            return super()._write(recorded, **kwargs)
        except NetpeerError as exc:
            if "seq" in entry and entry["code"] == "OK":
                # The operation ran but the write as a whole failed (OVN
                # refused or was unreachable): not applied.
                self._note(entry, code=type(exc).__name__, seq=None)
            raise

    def _note(self, entry, seq: int | None = -1, **fields):
        with self._record_lock:
            if "seq" not in entry:
                self.entries.append(entry)
            entry.update(fields)
            if seq == -1:
                entry["seq"] = self._seq
                self._seq += 1
            elif seq is None:
                self.entries.remove(entry)
                entry["seq"] = None
                self.prelock.append(entry)


def _recorded(name: str):
    base = getattr(Service, name)

    def method(self, caller, *args, **kwargs):
        entry = {"method": name, "args": args, "kwargs": kwargs}
        self._local.entry = entry
        try:
            return base(self, caller, *args, **kwargs)
        except NetpeerError as exc:
            if "seq" not in entry:
                entry.update(code=type(exc).__name__, seq=None)
                with self._record_lock:
                    self.prelock.append(entry)
            raise
        finally:
            self._local.entry = None

    method.__name__ = name
    return method


for _name in WRITES:
    setattr(RecordingService, _name, _recorded(_name))


def start_recording_netpeerd(ovn, directory, workers: int = 16) -> Netpeerd:
    return start_netpeerd(ovn, directory, service_factory=RecordingService, workers=workers)
