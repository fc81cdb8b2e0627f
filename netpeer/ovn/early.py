"""What netpeerd reads from OVN before its replica of the NB is whole.

The replica takes a while to arrive (about 11-14 s at 10,000 networks,
docs/performance-log.md), but the start-up check that the store and OVN belong
together (``netpeer.service.epoch``) needs one row of it: the state marker
with the store's stamp. Reading that row through a monitor of its own, with
a condition on its name, lets netpeerd check the pair and answer reads from
its store within a second or two of starting. Writes still wait for the
whole replica: they are computed against it. netpeerd asks for the replica
after this read (``OvnBackend(stamp_first=True)``): ovsdb-server builds a
monitor's first reply in one go, and a read sent behind it waits for all of it.
"""

from __future__ import annotations

from netpeer.core.dataplane import Stamp
from netpeer.errors import Unreachable
from netpeer.ovn import names, rows
from netpeer.ovn.connection import TimedOut, read_once
from netpeer.reasons import Reason


def read_stamp(remote: str, owner: str, timeout: float, reconnect_ms: int) -> Stamp | None:
    """``owner``'s stamp as the NB leader holds it now (None: none yet),
    read through a monitor of the state marker alone, reconnecting at most
    ``reconnect_ms`` apart (a cluster's followers are left for its leader).
    Raises ``Unreachable`` when the NB does not answer within ``timeout``."""
    marker = names.state_marker(owner)

    def read(replica):
        stamps = (rows.stamp_of(row["external_ids"], owner) for row in replica.tables["Address_Set"].values()
                  if row["name"] == marker)
        return next((s for s in stamps if s is not None), None)

    try:
        return read_once(remote, names.NB_SCHEMA, {"Address_Set": ["name", "external_ids"]},
                         {"Address_Set": [["name", "==", marker]]}, timeout, reconnect_ms / 1000, read)
    except TimedOut as exc:
        raise Unreachable(f"OVN northbound database {remote} did not answer within {timeout:.0f} s "
                          f"({exc})", reason=Reason.DATAPLANE_UNAVAILABLE) from exc
