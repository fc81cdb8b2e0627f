"""What netpeerd reads from OVN before its replica of the NB is whole.

The replica takes a while to arrive (about 11-14 s at 10,000 networks,
docs/performance.md), but the start-up check that the store and OVN belong
together (``netpeer.service.epoch``) needs one row of it: the state marker
with the store's stamp. Reading that row through a monitor of its own, with
a condition on its name, lets netpeerd check the pair and answer reads from
its store within a second or two of starting. Writes still wait for the
whole replica: they are computed against it. netpeerd asks for the replica
after this read (``OvnBackend(stamp_first=True)``): ovsdb-server builds a
monitor's first reply in one go, and a read sent behind it waits for all of it.
"""

from __future__ import annotations

import time

import ovs.db.idl

from netpeer.core.dataplane import Stamp
from netpeer.errors import Unreachable
from netpeer.ovn import _idl, names, rows


_MARKER_SCHEMA = {
    "name": names.NB_SCHEMA, "version": "0.0.0",
    "tables": {"Address_Set": {"columns": {
        "name": {"type": "string"},
        "external_ids": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}}}}}}


def read_stamp(remote: str, owner: str, timeout: float, reconnect_ms: int) -> Stamp | None:
    """``owner``'s stamp as the NB leader holds it now (None: none yet),
    read through a monitor of the state marker alone, reconnecting at most
    ``reconnect_ms`` apart (a cluster's followers refuse it). Raises
    ``Unreachable`` when the NB does not answer within ``timeout``."""
    deadline = time.monotonic() + timeout
    # The two columns as the NB schema has them: no schema to fetch first
    # (ovsdbapp's fetch blocks without a timeout on a server that does not answer).
    helper = ovs.db.idl.SchemaHelper(schema_json=_MARKER_SCHEMA)
    helper.register_all()
    idl = ovs.db.idl.Idl(remote, helper, leader_only=True)
    _idl.set_reconnect_backoff(idl, reconnect_ms)
    try:
        idl.cond_change("Address_Set", [["name", "==", names.state_marker(owner)]])
        while not (idl.has_ever_connected() and _idl.session_connected(idl)):
            if time.monotonic() >= deadline:
                raise Unreachable(f"OVN northbound database {remote} did not answer within {timeout:.0f} s")
            idl.run()
            # Not ``idl.wait``: with a condition not yet sent it wakes at once, every time (a busy loop).
            time.sleep(0.01)
        marker = names.state_marker(owner)
        stamps = (rows.stamp_of(row.external_ids, owner) for row in idl.tables["Address_Set"].rows.values()
                  if row.name == marker)
        return next((s for s in stamps if s is not None), None)
    finally:
        idl.close()
