"""The site's gateway chassis as OVN has them: each chassis of the HA
chassis group that netpeerd puts its transit ports on (``[interconnect]
gateway_group``), its priority (the NB's HA_Chassis rows), and whether it
is active or standby now.

Which one is active is known only to the southbound database: ovn-northd
turns each transit router port into a chassisredirect port binding whose
``chassis`` is the group's live chassis of highest priority, and moves it
when BFD finds that chassis dead. The NB of OVN 23.03 holds no state of
it. So with ``[interconnect] ovn_sb`` netpeerd keeps a small connection to
the site's SB (monitoring Chassis names only) and, when asked, reads the
group's port bindings there; without it each gateway's state is "unknown".
Reads are on demand (an admin's GetStatus), two selects on each database.
"""

from __future__ import annotations

from netpeer.core.dataplane import Gateway
from netpeer.ovn.connection import Connection, Disconnected, Refused, TimedOut, TryAgain

SB_SCHEMA = "OVN_Southbound"
#: How long a GetStatus waits for either database (s): the status answers anyway.
TIMEOUT = 2.0
OvsdbError = (Disconnected, Refused, TimedOut, TryAgain)


def _uuids(value) -> list[str]:
    """A reference column's uuids (``["uuid", x]`` or ``["set", [...]]``)."""
    if isinstance(value, list) and value and value[0] == "uuid":
        return [value[1]]
    if isinstance(value, list) and value and value[0] == "set":
        return [v[1] for v in value[1]]
    return []


class Gateways:
    """Reads the gateways of ``group`` from the NB connection ``nb`` and, if
    ``sb_remote`` is set, their state from the site's SB."""

    def __init__(self, nb: Connection, group: str, sb_remote: str = ""):
        self.nb, self.group = nb, group
        self.sb = Connection(sb_remote, SB_SCHEMA, {"Chassis": ["name"]}, timeout=TIMEOUT, leader_only=False,
                             name="ovn-sb") if sb_remote else None
        if self.sb is not None:
            self.sb.start_monitor()

    def read(self) -> tuple[Gateway, ...]:
        """The group's chassis, highest priority first; () when the NB does
        not answer or has no such group."""
        try:
            members = self._members()
        except OvsdbError:
            return ()
        active = self._active()
        state = (lambda name: "unknown") if active is None else \
            (lambda name: "active" if name in active else "standby")
        return tuple(Gateway(name, priority, state(name))
                     for name, priority in sorted(members, key=lambda m: (-m[1], m[0])))

    def _members(self) -> list[tuple[str, int]]:
        group = self.nb.transact([{"op": "select", "table": "HA_Chassis_Group", "where": [["name", "==", self.group]],
                                   "columns": ["ha_chassis"]}], timeout=TIMEOUT)[0]["rows"]
        refs = [u for row in group for u in _uuids(row["ha_chassis"])]
        if not refs:
            return []
        ops = [{"op": "select", "table": "HA_Chassis", "where": [["_uuid", "==", ["uuid", u]]],
                "columns": ["chassis_name", "priority"]} for u in refs]
        return [(row["chassis_name"], row["priority"]) for result in self.nb.transact(ops, timeout=TIMEOUT)
                for row in result["rows"]]

    def _active(self) -> set[str] | None:
        """The names of the chassis that bind the group's transit ports now
        (empty while it has none); None when that cannot be read."""
        if self.sb is None or not self.sb.up:
            return None
        try:
            group, ports, chassis = self.sb.transact([
                {"op": "select", "table": "HA_Chassis_Group", "where": [["name", "==", self.group]],
                 "columns": ["_uuid"]},
                {"op": "select", "table": "Port_Binding", "where": [["type", "==", "chassisredirect"]],
                 "columns": ["chassis", "ha_chassis_group"]},
                {"op": "select", "table": "Chassis", "where": [], "columns": ["_uuid", "name"]}], timeout=TIMEOUT)
        except OvsdbError:
            return None
        ours = {u for row in group["rows"] for u in _uuids(row["_uuid"])}
        names = {u: row["name"] for row in chassis["rows"] for u in _uuids(row["_uuid"])}
        return {names.get(c, c) for row in ports["rows"] if set(_uuids(row["ha_chassis_group"])) & ours
                for c in _uuids(row["chassis"])}

    def close(self) -> None:
        if self.sb is not None:
            self.sb.close()
