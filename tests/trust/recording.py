"""A netpeerd whose service records the order in which writes were
serialized. Behaviour is the real ``Service``'s: the subclass only notes,
under the service's own write lock, which call ran and how it ended, and
gives the service a clock that never returns the same instant twice (so
creation times order strictly, as the serialization does)."""

from __future__ import annotations

import threading
from datetime import timedelta

from netpeer.api.server import build_server
from netpeer.core.models import utcnow
from netpeer.errors import NetpeerError
from netpeer.ovn.backend import OvnBackend
from netpeer.service import Service
from netpeer.store.sqlite import SqliteStore
from tests.conftest import ADMIN_TOKEN, Netpeerd

WRITES = ("create_network", "update_network", "delete_network", "create_peering", "update_peering",
          "delete_peering")


class RecordingService(Service):
    def __init__(self, store, backend, owner: str = "netpeer"):
        self._clock_lock = threading.Lock()
        self._last = None
        super().__init__(store, backend, owner=owner, clock=self._tick)
        self.log: list[dict] = []          # writes that reached the lock, in serialization order
        self.prelock: list[dict] = []      # calls refused before reading any state
        self._local = threading.local()
        self._prelock_lock = threading.Lock()

    def _tick(self):
        with self._clock_lock:
            now = utcnow()
            if self._last is not None and now <= self._last:
                now = self._last + timedelta(microseconds=1)
            self._last = now
            return now

    def _write(self, fn):
        entry = getattr(self._local, "entry", None)
        with self._lock:  # re-entrant: the base class takes it again
            try:
                result = super()._write(fn)
            except NetpeerError as exc:
                if entry is not None:
                    entry.update(code=type(exc).__name__, seq=len(self.log))
                    self.log.append(entry)
                raise
            if entry is not None:
                entry.update(code="OK", seq=len(self.log), result=result)
                self.log.append(entry)
            return result


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
                with self._prelock_lock:
                    self.prelock.append(entry)
            raise
        finally:
            self._local.entry = None

    method.__name__ = name
    return method


for _name in WRITES:
    setattr(RecordingService, _name, _recorded(_name))


def start_recording_netpeerd(ovn, directory, workers: int = 16):
    store = SqliteStore(directory / "netpeer.db")
    backend = OvnBackend(ovn.nb_remote, owner="netpeer", timeout=10)
    assert backend.wait_connected(30), "netpeerd could not connect to the OVN NB database"
    service = RecordingService(store, backend)
    service.bootstrap_admin(ADMIN_TOKEN)
    socket = directory / "netpeer.sock"
    server, _ = build_server(service, f"unix://{socket}", workers=workers)
    server.start()

    def stop():
        server.stop(grace=1).wait()
        backend.close()
        store.close()

    return Netpeerd(ovn, service, backend, store, f"unix://{socket}", socket), stop
