"""``Network``: a virtual network (one OVN router + switch) in a namespace."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

import pulumi
from pulumi.dynamic import Resource

from netpeer_provider import NetworkProvider
from pulumi_netpeer import _registry


@dataclasses.dataclass
class InlinePeeringArgs:
    """A peering declared on its network (IEP-9 ``spec.peerings``)."""

    name: pulumi.Input[str]
    remote_network: pulumi.Input[str]
    remote_namespace: Optional[pulumi.Input[str]] = None
    remote_site: Optional[pulumi.Input[str]] = None
    remote_uid: Optional[pulumi.Input[str]] = None
    ttl: Optional[pulumi.Input[str]] = None
    description: Optional[pulumi.Input[str]] = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclasses.dataclass
class NetworkArgs:
    subnets: pulumi.Input[Sequence[pulumi.Input[str]]]
    name: Optional[pulumi.Input[str]] = None
    namespace: Optional[pulumi.Input[str]] = None
    routes: Optional[pulumi.Input[Sequence[pulumi.Input[str]]]] = None
    description: Optional[pulumi.Input[str]] = None
    peerings: Optional[Sequence[InlinePeeringArgs | dict]] = None


class Network(Resource, module="netpeer", name="Network"):
    """A network: IPv4/IPv6 ``subnets`` on one OVN switch behind one router.

    :param resource_name: the Pulumi name; also the network's name unless ``name`` is given.
    :param subnets: CIDRs of the network, e.g. ``["10.1.0.0/24", "fd00:1::/64"]``.
    :param routes: extra prefixes reachable inside the network, exported to peers too
        (``"10.9.0.0/24"`` or ``"10.9.0.0/24 via 10.1.0.5"``).
    :param namespace: defaults to the token's namespace when it grants exactly one.
    :param peerings: peerings declared inline (``InlinePeeringArgs`` or dicts with
        ``name``, ``remote_network``, optional ``remote_namespace``, ``remote_site``, ``remote_uid``,
        ``ttl``, ``description``; changing the remote, its site included, withdraws and re-declares it).

    Changing ``name`` or ``namespace`` replaces the network; subnets, routes,
    description and inline peerings update in place.
    """

    namespace: pulumi.Output[str]
    name: pulumi.Output[str]
    uid: pulumi.Output[str]
    """Assigned by the service; OVN objects are named from it."""
    subnets: pulumi.Output[list[str]]
    routes: pulumi.Output[list[str]]
    description: pulumi.Output[str]
    peerings: pulumi.Output[list[dict[str, Any]]]
    """Every peering of the network with ``phase``, ``reason``, ``remote_uid``,
    ``last_phase_transition_time``, ``expires_at``, ``dataplane`` and ``programmed_at`` (IEP-9
    ``status.peerings``)."""
    inline_peerings: pulumi.Output[list[dict[str, Any]]]
    peered_networks: pulumi.Output[list[dict[str, Any]]]
    """The networks this one is Bound to (OEP-8 ``status.peeredNetworks``): ``namespace``, ``name``,
    ``uid``, ``site`` (empty for this site) and ``prefixes``."""

    def __init__(self, resource_name: str, args: Optional[NetworkArgs] = None,
                 opts: Optional[pulumi.ResourceOptions] = None, *,
                 subnets: Optional[pulumi.Input[Sequence[pulumi.Input[str]]]] = None,
                 name: Optional[pulumi.Input[str]] = None, namespace: Optional[pulumi.Input[str]] = None,
                 routes: Optional[pulumi.Input[Sequence[pulumi.Input[str]]]] = None,
                 description: Optional[pulumi.Input[str]] = None,
                 peerings: Optional[Sequence[InlinePeeringArgs | dict]] = None):
        if args is not None:
            subnets, name, namespace = args.subnets, args.name, args.namespace
            routes, description, peerings = args.routes, args.description, args.peerings
        name = name if name is not None else resource_name
        inline = [p.to_dict() if isinstance(p, InlinePeeringArgs) else dict(p) for p in peerings or []]
        for p in inline:
            _registry.declare(namespace, name, p.get("name"), f"inline on Network {resource_name!r}")
        props = {
            "namespace": namespace, "name": name, "subnets": subnets, "routes": routes or [],
            "description": description or "", "peerings": inline,
            "uid": None, "inline_peerings": None, "peered_networks": None,
        }
        super().__init__(NetworkProvider(), resource_name, props, _registry.options(opts))
