"""Instance ports: switch ports that attach a workload to a network's switch.

netpeerd's sync never touches them (their kind, ``instance``, is not one it
manages); they go with their switch when the network is deleted. The dev
tools (``netpeer dev instance``) attach network namespaces through these
operations, so that what an OVN row of netpeer looks like, its name and its
tags, is still known in this package only.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Protocol

from netpeer.errors import FailedPrecondition
from netpeer.ovn import names, owned
from netpeer.ovn.plain import PlainReplica
from netpeer.ovn.rows import INSTANCE_KIND
from netpeer.reasons import Reason

INSTANCE = "netpeer:instance"   # the instance's name, on its switch port
NETNS = "netpeer:netns"         # where the instance lives (the dev tools' network namespace)


@dataclasses.dataclass(frozen=True)
class InstancePort:
    """One instance's port on network ``uid``'s switch."""

    uid: str
    namespace: str
    network: str
    instance: str
    mac: str
    ips: tuple[str, ...]           # addresses without prefix length
    netns: str = ""
    up: bool = False               # claimed by a chassis (ovn-controller)

    @property
    def name(self) -> str:
        return names.instance_port(self.uid, self.instance)

    def tags(self, owner: str) -> dict[str, str]:
        return {names.OWNER: owner, names.KIND: INSTANCE_KIND, names.NETWORK: self.uid,
                names.ID: f"instance/{self.instance}", names.NAMESPACE: self.namespace,
                names.DISPLAY: f"{self.namespace}/{self.network}", INSTANCE: self.instance, NETNS: self.netns}


def _is_instance(row, owner: str) -> bool:
    return owned.ours(row, owner, kinds=(INSTANCE_KIND,))


def _port_of(row) -> InstancePort:
    ext = owned.ext(row)
    words = " ".join(row["addresses"]).split()
    ns, _, net = ext.get(names.DISPLAY, "/").partition("/")
    return InstancePort(uid=ext.get(names.NETWORK, ""), namespace=ns, network=net,
                        instance=ext.get(INSTANCE, ""), mac=words[0] if words else "", ips=tuple(words[1:]),
                        netns=ext.get(NETNS, ""), up=row.get("up") is True)


def _where(uuid: str) -> list:
    return [["_uuid", "==", ["uuid", uuid]]]


def _unhang(replica: PlainReplica, uuids: set[str]) -> list[dict]:
    """Takes these ports out of every switch that holds them (OVSDB then deletes them)."""
    return [{"op": "mutate", "table": "Logical_Switch", "where": _where(suuid),
             "mutations": [["ports", "delete", ["set", [["uuid", u] for u in sorted(held)]]]]}
            for suuid, switch in replica.tables["Logical_Switch"].items()
            if (held := uuids.intersection(switch["ports"]))]


def list_ports(replica: PlainReplica, owner: str) -> list[InstancePort]:
    return [_port_of(row) for row in replica.tables["Logical_Switch_Port"].values() if _is_instance(row, owner)]


def put_ops(replica: PlainReplica, owner: str, items: list[tuple[InstancePort, str | None]]) -> list[dict]:
    """The operations that create or update each port (removing ``replace``)."""
    ops: list[dict] = []
    for port, replace in items:
        switch = replica.by_name("Logical_Switch", names.switch(port.uid))
        label = f"network {port.namespace}/{port.network}"
        if not switch:
            raise FailedPrecondition(f"{label}: its switch {names.switch(port.uid)} is not in this OVN "
                                     "database (is this the OVN deployment of the netpeerd you asked?)",
                                     reason=Reason.DATAPLANE_CONFLICT)
        if owned.ext(replica.tables["Logical_Switch"][switch[0]]).get(names.OWNER) != owner:
            raise FailedPrecondition(f"{label}: switch {names.switch(port.uid)} is not owned by {owner!r}; "
                                     "not attaching to it", reason=Reason.DATAPLANE_CONFLICT)
        existing = {row["name"]: (uuid, row) for uuid, row in replica.tables["Logical_Switch_Port"].items()
                    if row["name"] in (port.name, replace or port.name)}
        if replace and replace != port.name and replace in existing and _is_instance(existing[replace][1], owner):
            ops += _unhang(replica, {existing[replace][0]})
        found = existing.get(port.name)
        if found is not None and not _is_instance(found[1], owner):
            raise FailedPrecondition(f"switch port {port.name} exists and is not tagged as a netpeer instance; "
                                     "not touching it", reason=Reason.DATAPLANE_CONFLICT)
        row = {"addresses": ["set", [" ".join([port.mac, *port.ips])]],
               "external_ids": ["map", sorted([k, v] for k, v in port.tags(owner).items())]}
        if found is not None:
            ops.append({"op": "update", "table": "Logical_Switch_Port", "where": _where(found[0]), "row": row})
            continue
        ref = f"port{len(ops)}"
        ops.append({"op": "insert", "table": "Logical_Switch_Port", "uuid-name": ref,
                    "row": {"name": port.name, **row}})
        ops.append({"op": "mutate", "table": "Logical_Switch", "where": _where(switch[0]),
                    "mutations": [["ports", "insert", ["set", [["named-uuid", ref]]]]]})
    return ops


def delete_ops(replica: PlainReplica, owner: str, port_names: set[str]) -> tuple[list[dict], int]:
    """The operations that delete our instance ports of these names, and how many there are."""
    uuids = {uuid for uuid, row in replica.tables["Logical_Switch_Port"].items()
             if row["name"] in port_names and _is_instance(row, owner)}
    return _unhang(replica, uuids), len(uuids)


class Northbound(Protocol):
    """What instance ports need of the NB connection (``netpeer.ovn.backend.OvnBackend``)."""

    owner: str

    def read(self, read: Callable[[PlainReplica], object]):
        """``read(replica)`` on the rows of one moment."""

    def write(self, compute: Callable[[PlainReplica], tuple[list, object]], what: str):
        """Commits the operations ``compute(replica)`` gives in one NB
        transaction; (the result ``compute`` gave, the reply)."""


class InstancePorts:
    """The instance ports of one backend's owner; each call is one NB transaction."""

    def __init__(self, backend: Northbound):
        self._backend = backend

    def list(self) -> list[InstancePort]:
        owner = self._backend.owner
        return self._backend.read(lambda replica: list_ports(replica, owner))

    def put(self, port: InstancePort, replace: str | None = None) -> InstancePort:
        """Creates or updates ``port`` (idempotent); removes our port named
        ``replace`` in the same transaction (the instance moved networks)."""
        return self.put_many([(port, replace)])[0]

    def put_many(self, items: list[tuple[InstancePort, str | None]]) -> list[InstancePort]:
        """Several ``put`` in one NB transaction (on OVN 23.03 each NB
        transaction that adds ports costs a full ovn-northd recompute)."""
        owner, items = self._backend.owner, list(items)
        self._backend.write(lambda replica: (put_ops(replica, owner, items), None), "instance port write")
        return [port for port, _ in items]

    def delete(self, port_names: Iterable[str]) -> int:
        """Deletes our instance ports with these names; returns how many were there."""
        owner, wanted = self._backend.owner, set(port_names)
        if not wanted:
            return 0
        return self._backend.write(lambda replica: delete_ops(replica, owner, wanted), "instance port delete")[0]
