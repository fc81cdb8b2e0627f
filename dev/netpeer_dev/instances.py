"""Instances of a dev stack: network namespaces attached to a network's switch.

Longer than 400 lines: the instance bookkeeping (state file under a lock,
address planning, the port, the namespace) is one transaction-like unit per
verb; the OVN part is in ``netpeer.ovn.ports`` and the namespace part in
``netpeer_dev.netns``.

``netpeer dev instance add|list|delete`` (and ``netpeer dev down``) use this.
An instance of network N is

- one OVN instance port on N's switch (``netpeer.ovn.ports.InstancePort``:
  name, MAC, addresses and tags are built there). ``instance`` is not one of
  the kinds netpeerd's sync manages (``netpeer.ovn.rows.MANAGED_KINDS``), so
  neither a write nor the repair sweep touches the port; it goes away with
  its switch when the network is deleted;
- one Linux network namespace (:func:`netpeer_dev.netns.add_instance`): a
  veth whose other end is on br-int with ``iface-id`` = the port name, the
  addresses, and default routes via the network's gateways (the first usable
  address of each subnet).

There is no port security on the switch port: an instance can send from any
source address, so the router policies of a peering (not the switch) are what
stops a spoofed source.

The instances of a stack are listed in ``instances.json`` in its state
directory (written under a lock, replaced atomically); namespace names are
``np<6 hex digits of the state dir's hash>-<name>``, so several stacks (a
developer's, the tests') share a machine. Only namespaces created here, and
only switch ports tagged as instances, are ever changed or deleted.

This is dev tooling: it writes the port through netpeer's own OVN layer
(``netpeer.ovn``, one NB transaction per change, idempotent), not through
netpeerd's API, which has no notion of workloads.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import ipaddress
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import netaddr

from netpeer import errors
from netpeer.core.validate import gateway
from netpeer.ovn import names
from netpeer.ovn.backend import OvnBackend
from netpeer.ovn.ports import InstancePort
from netpeer.ovn.rows import INSTANCE_KIND
from netpeer_dev import netns as nsx
from netpeer_dev.daemons import OvnDaemonError, OvnDaemons

__all__ = ["Instance", "Fleet", "delete_all", "fleet_of", "KIND"]

#: ``netpeer:kind`` of instance switch ports (not managed by netpeerd's sync).
KIND = INSTANCE_KIND
NAME_MAX = 48                   # the namespace name (prefix + name) must stay <= 64
FIRST_HOST = 10                 # default addresses start at .10 / ::a
MTU = 1400

Address = ipaddress.IPv4Interface | ipaddress.IPv6Interface


@dataclasses.dataclass(frozen=True)
class Instance:
    """One instance as recorded in the state file."""

    name: str
    namespace: str          # netpeer namespace of the network
    network: str            # network name
    uid: str                # network uid when the instance was attached
    netns: str
    port: str
    mac: str
    ips: tuple[str, ...]    # CIDR, e.g. "10.1.0.10/24"
    gateways: tuple[str, ...]

    @property
    def addresses(self) -> list[str]:
        """The bare IP addresses."""
        return [str(ipaddress.ip_interface(a).ip) for a in self.ips]

    def address(self, version: int) -> str | None:
        """The first address of IP ``version``, or None."""
        for a in self.ips:
            iface = ipaddress.ip_interface(a)
            if iface.version == version:
                return str(iface.ip)
        return None

    def to_json(self, state: str | None = None) -> dict[str, Any]:
        out = {"name": self.name, "network": self.network, "namespace": self.namespace,
               "ips": list(self.ips), "netns": self.netns, "network_uid": self.uid, "port": self.port,
               "mac": self.mac, "gateways": list(self.gateways)}
        if state is not None:
            out["state"] = state
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Instance":
        return cls(name=d["name"], namespace=d["namespace"], network=d["network"], uid=d["network_uid"],
                   netns=d["netns"], port=d["port"], mac=d["mac"], ips=tuple(d["ips"]),
                   gateways=tuple(d.get("gateways", ())))


class Fleet:
    """The instances of one deployment: an OvnDaemons with a chassis, a state
    directory for ``instances.json``, and the owner netpeerd tags rows with.
    ``mtu`` of the instances' interfaces (lower across sites: GENEVE inside WireGuard)."""

    def __init__(self, daemons: OvnDaemons, state_dir: str | os.PathLike, owner: str = "netpeer",
                 prefix: str | None = None, mtu: int = MTU):
        self.daemons = daemons
        self.mtu = mtu
        self.dir = Path(state_dir).absolute()
        self.owner = owner
        self.prefix = prefix or "np" + hashlib.sha256(str(self.dir).encode()).hexdigest()[:6]
        self.file = self.dir / "instances.json"
        self._backend: OvnBackend | None = None

    # ------------------------------------------------------------ state file

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Instance]]:
        """The recorded instances, under an exclusive lock; written back on exit."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "instances.lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            items = self._read()
            before = dict(items)
            try:
                yield items
            finally:
                if items != before:
                    self._write(items)

    def _read(self) -> dict[str, Instance]:
        try:
            raw = json.loads(self.file.read_text())
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError as exc:
            raise errors.FailedPrecondition(f"{self.file} is not valid JSON ({exc}); fix or remove it") from None
        return {d["name"]: Instance.from_json(d) for d in raw.get("instances", [])}

    def _write(self, items: dict[str, Instance]) -> None:
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"instances": [items[k].to_json() for k in sorted(items)]}, indent=2) + "\n")
        os.replace(tmp, self.file)

    # ------------------------------------------------------------------ NB

    def _ports(self):
        """netpeer's OVN layer on this deployment's NB (connected on first use)."""
        if self._backend is None:
            backend = OvnBackend(self.daemons.nb_remote, owner=self.owner, timeout=30)
            if not backend.wait_connected(30):
                backend.close()
                raise errors.Unavailable(f"cannot reach the OVN NB database {self.daemons.nb_remote}")
            self._backend = backend
        return self._backend.ports

    def close(self) -> None:
        """Closes the OVN connection (if one was made)."""
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _instance_ports(self) -> list[InstancePort]:
        """Every switch port tagged as an instance of our owner."""
        return self._ports().list()

    def _used_addresses(self, uid: str, except_port: str) -> set[ipaddress._BaseAddress]:
        used = set()
        for port in self._instance_ports():
            if port.name == except_port or port.uid != uid:
                continue
            for word in port.ips:
                try:
                    used.add(ipaddress.ip_address(word))
                except ValueError:
                    pass
        return used

    # ------------------------------------------------------------- planning

    @staticmethod
    def _subnets(network: dict[str, Any]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        return [ipaddress.ip_network(s) for s in network["subnets"]]

    @staticmethod
    def _gateway(net) -> ipaddress._BaseAddress:
        """The router's address on a subnet, as netpeerd programs it (core.validate.gateway)."""
        return ipaddress.ip_address(str(gateway(netaddr.IPNetwork(str(net)))))

    @classmethod
    def _reserved(cls, net) -> set:
        """Network address, gateway (first usable) and IPv4 broadcast."""
        out = {net.network_address, cls._gateway(net)}
        if net.version == 4:
            out.add(net.broadcast_address)
        return out

    def _plan_addresses(self, network: dict[str, Any], label: str, wanted: list[str] | None,
                        previous: Instance | None, used: set) -> list[Address]:
        subnets = self._subnets(network)
        if wanted:
            chosen: list[Address] = []
            for i, text in enumerate(wanted):
                field = f"--ip[{i}]"
                try:
                    iface = ipaddress.ip_interface(text.strip())
                except ValueError:
                    raise errors.InvalidArgument.for_field(field, text, "is not an IP address") from None
                home = next((s for s in subnets if s.version == iface.version and iface.ip in s), None)
                if home is None:
                    raise errors.InvalidArgument.for_field(
                        field, text, f"is not inside any subnet of {label} ({', '.join(network['subnets'])})")
                if "/" in text and iface.network.prefixlen != home.prefixlen:
                    raise errors.InvalidArgument.for_field(field, text, f"must use the subnet's length /{home.prefixlen}")
                if iface.ip in self._reserved(home):
                    raise errors.InvalidArgument.for_field(
                        field, text, f"is a reserved address of {home} (network, gateway or broadcast)")
                if iface.ip in used:
                    raise errors.AlreadyExists(f"{field}: {text!r} is used by another instance of {label}",
                                               field=field, value=text)
                if any(c.ip == iface.ip for c in chosen):
                    raise errors.InvalidArgument.for_field(field, text, "is given twice")
                chosen.append(ipaddress.ip_interface(f"{iface.ip}/{home.prefixlen}"))
            return chosen
        if previous is not None:
            # Re-use the addresses it had, when they still fit (re-created network).
            kept = []
            for text in previous.ips:
                iface = ipaddress.ip_interface(text)
                home = next((s for s in subnets if s.version == iface.version and iface.ip in s), None)
                if home is None or iface.ip in used or iface.ip in self._reserved(home):
                    kept = []
                    break
                kept.append(ipaddress.ip_interface(f"{iface.ip}/{home.prefixlen}"))
            if kept:
                return kept
        chosen = []
        for s in subnets:
            reserved = self._reserved(s)
            first, last = int(s.network_address), int(s.network_address) + s.num_addresses - 1
            candidates = [range(first + FIRST_HOST, min(last, first + FIRST_HOST + 4096) + 1),
                          range(first + 2, min(last, first + FIRST_HOST - 1) + 1)]
            pick = None
            for r in candidates:
                for value in r:
                    ip = ipaddress.ip_address(value) if s.version == 4 else ipaddress.IPv6Address(value)
                    if ip not in used and ip not in reserved:
                        pick = ip
                        break
                if pick is not None:
                    break
            if pick is None:
                raise errors.FailedPrecondition(f"no free address left in {s} of {label}")
            chosen.append(ipaddress.ip_interface(f"{pick}/{s.prefixlen}"))
        return chosen

    @classmethod
    def _gateways(cls, network: dict[str, Any], addresses: list[Address]) -> list[str]:
        """One default gateway per IP version: the gateway (first usable
        address) of the subnet holding the instance's first address of that version."""
        out, seen = [], set()
        for iface in addresses:
            if iface.version in seen:
                continue
            seen.add(iface.version)
            out.append(str(cls._gateway(iface.network)))
        return out

    # ---------------------------------------------------------------- verbs

    def validate_name(self, name: str) -> str:
        from netpeer.core import validate
        validate.name("NAME", name)
        if len(name) > NAME_MAX:
            raise errors.InvalidArgument.for_field("NAME", name, f"is longer than {NAME_MAX} characters")
        return name

    def netns_of(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def _require_chassis(self) -> None:
        if not self.daemons.running(chassis=True):
            raise errors.FailedPrecondition(
                f"the chassis of {self.daemons.state_dir} is not running (ovs-vswitchd, ovn-controller): "
                "start it with `netpeer dev up --chassis`")

    def add(self, network: dict[str, Any], name: str, ips: Iterable[str] | None = None, *,
            wait: bool = True, timeout: float = 30.0) -> Instance:
        """Create (or bring back) instance ``name`` on ``network`` (a network as
        the API returns it: namespace, name, uid, subnets). Idempotent: an
        existing instance of that name on the same network is re-used, with its
        addresses unless others are asked for (then it is refused)."""
        self.validate_name(name)
        wanted = [ip for ip in (ips or []) if ip]
        label = f"{network['namespace']}/{network['name']}"
        uid = network["uid"]
        self._require_chassis()
        try:
            with self._locked() as items:
                previous = items.get(name)
                if previous is not None and (previous.namespace, previous.network) != (network["namespace"],
                                                                                       network["name"]):
                    raise errors.AlreadyExists(
                        f"instance {name!r} exists on network {previous.namespace}/{previous.network}; "
                        f"delete it first (netpeer dev instance delete {name})", field="NAME", value=name)
                port, mac = names.instance_port(uid, name), names.instance_mac(uid, name)
                used = self._used_addresses(uid, except_port=port)
                same_network = previous is not None and previous.uid == uid
                addresses = self._plan_addresses(network, label, wanted, previous, used)
                if same_network and wanted and sorted(map(str, addresses)) != sorted(previous.ips):
                    raise errors.FailedPrecondition(
                        f"instance {name!r} exists with addresses {', '.join(previous.ips)}; "
                        f"delete it first to change them")
                gateways = self._gateways(network, addresses)
                inst = Instance(name=name, namespace=network["namespace"], network=network["name"], uid=uid,
                                netns=self.netns_of(name), port=port, mac=mac,
                                ips=tuple(str(a) for a in addresses), gateways=tuple(gateways))
                self._program_port(inst, stale=previous.port if previous and previous.port != port else None)
                items[name] = inst   # recorded before the namespace exists: delete can always clean up
            nsx.add_instance(self.daemons, inst.netns, inst.port, inst.mac, list(inst.ips), list(inst.gateways),
                             mtu=self.mtu)
            if wait:
                nsx.wait_instance_up(self.daemons, inst.netns, timeout=timeout)
        except (nsx.NetnsError, OvnDaemonError, ValueError) as exc:
            raise errors.Unavailable(f"instance {name!r}: {exc}") from None
        return inst

    def _program_port(self, inst: Instance, stale: str | None) -> None:
        """One NB transaction: the switch port with its addresses and tags
        (idempotent); a port of the same instance on another network goes."""
        self._ports().put(InstancePort(uid=inst.uid, namespace=inst.namespace, network=inst.network,
                                       instance=inst.name, mac=inst.mac, ips=tuple(inst.addresses),
                                       netns=inst.netns), replace=stale)

    def get(self, name: str) -> Instance | None:
        return self._read().get(name)

    def list(self) -> list[Instance]:
        return [v for _, v in sorted(self._read().items())]

    def states(self) -> dict[str, str]:
        """name -> ``up`` (namespace there, port claimed by ovn-controller),
        ``detached`` (namespace there, but no switch port, e.g. its network was
        deleted, or no chassis) or ``missing`` (no namespace)."""
        items = self.list()
        ports: dict[str, InstancePort] = {}
        try:
            if items and self.daemons.running():
                ports = {port.name: port for port in self._instance_ports()}
        except errors.NetpeerError:
            pass
        out = {}
        for inst in items:
            if not nsx.netns_exists(inst.netns):
                out[inst.name] = "missing"
                continue
            port = ports.get(inst.port)
            out[inst.name] = "up" if port is not None and port.up else "detached"
        return out

    def delete(self, name: str) -> None:
        """Remove the instance's switch port, veth and namespace. NotFound when unknown."""
        if not self.file.exists():
            raise errors.NotFound(f"instance {name!r} not found (netpeer dev instance list)", field="NAME",
                                  value=name)
        with self._locked() as items:
            inst = items.get(name)
            if inst is None:
                raise errors.NotFound(f"instance {name!r} not found (netpeer dev instance list)", field="NAME",
                                      value=name)
            self._delete(inst)
            del items[name]

    def _delete(self, inst: Instance) -> None:
        try:
            if self.daemons.running():
                self._ports().delete([inst.port])
            nsx.delete_instance(self.daemons, inst.netns)
        except (nsx.NetnsError, OvnDaemonError) as exc:
            raise errors.Unavailable(f"instance {inst.name!r}: {exc}") from None

    def delete_all(self, say: Callable[[str], None] = lambda m: None) -> int:
        """Remove every instance: recorded ones, plus namespaces with our prefix
        and instance ports naming them that a lost state file would miss."""
        count, failures = 0, []
        if not self.dir.exists():
            return 0
        with self._locked() as items:
            for name in sorted(items):
                say(f"deleting instance {name} (netns {items[name].netns})")
                try:
                    self._delete(items[name])
                except errors.NetpeerError as exc:
                    failures.append(str(exc))
                    continue
                del items[name]
                count += 1
            for netns in nsx.list_instances(f"{self.prefix}-"):
                say(f"deleting leftover namespace {netns}")
                try:
                    nsx.delete_instance(self.daemons, netns)
                    count += 1
                except (nsx.NetnsError, OvnDaemonError) as exc:
                    failures.append(str(exc))
            try:
                if self.daemons.running():
                    self._ports().delete(port.name for port in self._instance_ports()
                                         if port.netns.startswith(f"{self.prefix}-"))
            except (OvnDaemonError, errors.NetpeerError) as exc:
                failures.append(str(exc))
        if failures:
            raise errors.Unavailable("could not delete every instance: " + "; ".join(failures))
        return count


def _owner_of(config_file: Path) -> str:
    try:
        import tomllib
        return str(tomllib.loads(config_file.read_text()).get("owner", "netpeer"))
    except (FileNotFoundError, ValueError):
        return "netpeer"


def fleet_of(stack) -> Fleet:
    """The instances of a ``netpeer_dev.cli.DevStack``."""
    return Fleet(stack.ovn, stack.dir, owner=_owner_of(stack.config_file))


def delete_all(stack, say: Callable[[str], None]) -> int:
    """Called by ``netpeer dev down`` before the daemons stop."""
    with fleet_of(stack) as fleet:
        return fleet.delete_all(say)

