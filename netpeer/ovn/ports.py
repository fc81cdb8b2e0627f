"""Instance ports: switch ports that attach a workload to a network's switch.

netpeerd's sync never touches them (their kind, ``instance``, is not one it
manages); they go with their switch when the network is deleted. The dev
tools (``netpeer dev instance``) attach network namespaces through these
operations, so that what an OVN row of netpeer looks like, its name and its
tags, is still known in this package only.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterable

from ovsdbapp.backend.ovs_idl import command as ovs_command

from netpeer.errors import FailedPrecondition
from netpeer.ovn import _idl, names
from netpeer.ovn.rows import INSTANCE_KIND

if TYPE_CHECKING:  # pragma: no cover
    from netpeer.ovn.backend import OvnBackend

INSTANCE = "netpeer:instance"   # the instance's name, on its switch port
NETNS = "netpeer:netns"         # where the instance lives (the dev tools' network namespace)

_get = _idl.read_column


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
    ext = _get(row, "external_ids")
    return ext.get(names.OWNER) == owner and ext.get(names.KIND) == INSTANCE_KIND


def _port_of(row) -> InstancePort:
    ext = _get(row, "external_ids")
    words = " ".join(_get(row, "addresses")).split()
    ns, _, net = ext.get(names.DISPLAY, "/").partition("/")
    return InstancePort(uid=ext.get(names.NETWORK, ""), namespace=ns, network=net,
                        instance=ext.get(INSTANCE, ""), mac=words[0] if words else "", ips=tuple(words[1:]),
                        netns=ext.get(NETNS, ""), up=list(_get(row, "up")) == [True])


def _ports_named(api, port_names: set[str]) -> list:
    return [row for row in api.tables["Logical_Switch_Port"].rows.values() if row.name in port_names]


class _ListPorts(ovs_command.ReadOnlyCommand):
    def __init__(self, api, owner: str):
        super().__init__(api)
        self.owner = owner

    def run_idl(self, txn):
        self.result = [_port_of(row) for row in self.api.tables["Logical_Switch_Port"].rows.values()
                       if _is_instance(row, self.owner)]


class _PutPorts(ovs_command.BaseCommand):
    def __init__(self, api, owner: str, items: list[tuple[InstancePort, str | None]]):
        super().__init__(api)
        self.owner, self.items = owner, items

    def run_idl(self, txn):
        for port, replace in self.items:
            self._put(txn, port, replace)
        self.result = [port for port, _ in self.items]

    def _put(self, txn, port: InstancePort, replace: str | None) -> None:
        owner = self.owner
        switch = self.api.lookup("Logical_Switch", names.switch(port.uid), default=None)
        label = f"network {port.namespace}/{port.network}"
        if switch is None:
            raise FailedPrecondition(f"{label}: its switch {names.switch(port.uid)} is not in this OVN "
                                     "database (is this the OVN deployment of the netpeerd you asked?)")
        if _get(switch, "external_ids").get(names.OWNER) != owner:
            raise FailedPrecondition(f"{label}: switch {names.switch(port.uid)} is not owned by {owner!r}; "
                                     "not attaching to it")
        existing = {row.name: row for row in _ports_named(self.api, {port.name, replace or port.name})}
        if replace and replace != port.name and replace in existing and _is_instance(existing[replace], owner):
            stale = existing[replace]
            for parent in self.api.tables["Logical_Switch"].rows.values():
                if stale in _get(parent, "ports"):
                    parent.delvalue("ports", stale)
            stale.delete()
        row = existing.get(port.name)
        if row is not None and not _is_instance(row, owner):
            raise FailedPrecondition(f"switch port {port.name} exists and is not tagged as a netpeer instance; "
                                     "not touching it")
        if row is None:
            row = txn.insert(self.api.tables["Logical_Switch_Port"])
            row.name = port.name
            switch.addvalue("ports", row)
        row.addresses = [" ".join([port.mac, *port.ips])]
        row.external_ids = port.tags(owner)


class _DeletePorts(ovs_command.BaseCommand):
    def __init__(self, api, owner: str, port_names: set[str]):
        super().__init__(api)
        self.owner, self.port_names = owner, port_names

    def run_idl(self, txn):
        rows = [row for row in _ports_named(self.api, self.port_names) if _is_instance(row, self.owner)]
        for parent in self.api.tables["Logical_Switch"].rows.values():
            for row in rows:
                if row in _get(parent, "ports"):
                    parent.delvalue("ports", row)
        for row in rows:
            row.delete()
        self.result = len(rows)


class InstancePorts:
    """The instance ports of one backend's owner; each call is one NB transaction."""

    def __init__(self, backend: "OvnBackend"):
        self._backend = backend

    def list(self) -> list[InstancePort]:
        owner = self._backend.owner
        return self._backend._run(lambda api: _ListPorts(api, owner), "instance port list") or []

    def put(self, port: InstancePort, replace: str | None = None) -> InstancePort:
        """Creates or updates ``port`` (idempotent); removes our port named
        ``replace`` in the same transaction (the instance moved networks)."""
        return self.put_many([(port, replace)])[0]

    def put_many(self, items: list[tuple[InstancePort, str | None]]) -> list[InstancePort]:
        """Several ``put`` in one NB transaction (on OVN 23.03 each NB
        transaction that adds ports costs a full ovn-northd recompute)."""
        owner = self._backend.owner
        return self._backend._run(lambda api: _PutPorts(api, owner, list(items)), "instance port write")

    def delete(self, port_names: Iterable[str]) -> int:
        """Deletes our instance ports with these names; returns how many were there."""
        owner, wanted = self._backend.owner, set(port_names)
        if not wanted:
            return 0
        return self._backend._run(lambda api: _DeletePorts(api, owner, wanted), "instance port delete") or 0
