"""``NetworkPeering``: one side's consent to peer its network with another."""

from __future__ import annotations

import dataclasses
from typing import Optional

import pulumi
from pulumi.dynamic import Resource

from netpeer_provider import NetworkPeeringProvider
from pulumi_netpeer import _registry


@dataclasses.dataclass
class NetworkPeeringArgs:
    network: pulumi.Input[str]
    remote_network: pulumi.Input[str]
    name: Optional[pulumi.Input[str]] = None
    namespace: Optional[pulumi.Input[str]] = None
    remote_namespace: Optional[pulumi.Input[str]] = None
    remote_site: Optional[pulumi.Input[str]] = None
    remote_uid: Optional[pulumi.Input[str]] = None
    ttl: Optional[pulumi.Input[str]] = None
    description: Optional[pulumi.Input[str]] = None
    wait_for_bound: Optional[pulumi.Input[float]] = None
    wait_for_programmed: Optional[pulumi.Input[bool]] = None


class NetworkPeering(Resource, module="netpeer", name="NetworkPeering"):
    """One side's consent to peer ``network`` with ``remote_namespace/remote_network``.

    The peering is **Pending** until the other side declares the matching
    half, then **Bound** (traffic flows), or **Failed** when prefixes overlap.
    The answer is the same whether the remote exists or not: if it stays
    Pending, check the spelling on both sides.

    :param network: the local network's name (e.g. ``my_network.name``).
    :param remote_network: the other network's name.
    :param remote_namespace: its namespace; defaults to this peering's namespace.
    :param remote_site: its site when it is in another site (e.g. ``"west"``); empty (default) for this site.
    :param remote_uid: pins the remote network's identity (learned on binding otherwise).
        Changing or clearing it re-pins in place: after the other team deleted and
        re-created its network (reason ``RemoteReplaced``), set it to the new uid.
    :param ttl: how long the peering may stay Pending or Failed before it is deleted
        (``"90s"``, ``"12h"``, ``"7d"``; default 7 days).
    :param wait_for_bound: seconds ``pulumi up`` waits for Bound, showing the phase as
        it goes; it stops at once on Failed. If it is not Bound in time the peering
        stays (it binds when the other side consents) and ``pulumi up`` warns, or fails
        with ``netpeer:errorOnNotBound`` set to true. 0 (default) does not wait.
    :param wait_for_programmed: with ``wait_for_bound``, wait also until every OVN chassis
        has applied the peering (its ``dataplane`` is ``Programmed``: traffic flows).

    Changing the network, name, namespace or remote (its site included) replaces the peering (the old
    half is withdrawn first); description, ttl and remote_uid update in place. A
    Failed peering is a warning (an error with ``netpeer:errorOnNotBound``). To
    rename the resource, keep its old name in ``aliases`` (``opts=pulumi.ResourceOptions(
    aliases=[pulumi.Alias(name="old-name")])``) and set ``name`` to the peering's name.
    """

    namespace: pulumi.Output[str]
    network: pulumi.Output[str]
    name: pulumi.Output[str]
    remote_namespace: pulumi.Output[str]
    remote_network: pulumi.Output[str]
    remote_site: pulumi.Output[str]
    """The remote network's site; empty when it is in this site."""
    remote_uid: pulumi.Output[Optional[str]]
    """The remote network's uid: pinned, or learned when the peering bound."""
    network_uid: pulumi.Output[str]
    phase: pulumi.Output[str]
    """``Pending``, ``Bound`` or ``Failed``."""
    reason: pulumi.Output[str]
    """``AwaitingRemote``, ``Bound``, ``OverlappingPrefixes``, ``RemoteWithdrawn`` or ``RemoteReplaced``."""
    message: pulumi.Output[str]
    last_phase_transition_time: pulumi.Output[str]
    expires_at: pulumi.Output[Optional[str]]
    """When a Pending or Failed peering will be deleted; unset while Bound."""
    dataplane: pulumi.Output[str]
    """``Programming`` while the last change of the pair's dataplane has not reached every OVN chassis, else
    ``Programmed`` (Bound and Programmed: traffic flows)."""
    programmed_at: pulumi.Output[Optional[str]]
    """When the last change of the pair's dataplane reached every OVN chassis; unset while Programming."""
    ttl: pulumi.Output[str]
    description: pulumi.Output[str]
    wait_for_bound: pulumi.Output[float]
    wait_for_programmed: pulumi.Output[Optional[bool]]

    def __init__(self, resource_name: str, args: Optional[NetworkPeeringArgs] = None,
                 opts: Optional[pulumi.ResourceOptions] = None, *,
                 network: Optional[pulumi.Input[str]] = None, remote_network: Optional[pulumi.Input[str]] = None,
                 name: Optional[pulumi.Input[str]] = None, namespace: Optional[pulumi.Input[str]] = None,
                 remote_namespace: Optional[pulumi.Input[str]] = None, remote_uid: Optional[pulumi.Input[str]] = None,
                 ttl: Optional[pulumi.Input[str]] = None, description: Optional[pulumi.Input[str]] = None,
                 wait_for_bound: Optional[pulumi.Input[float]] = None,
                 remote_site: Optional[pulumi.Input[str]] = None,
                 wait_for_programmed: Optional[pulumi.Input[bool]] = None):
        if args is not None:
            network, remote_network, name, namespace = args.network, args.remote_network, args.name, args.namespace
            remote_namespace, remote_uid, ttl = args.remote_namespace, args.remote_uid, args.ttl
            description, wait_for_bound, remote_site = args.description, args.wait_for_bound, args.remote_site
            wait_for_programmed = args.wait_for_programmed
        name = name if name is not None else resource_name
        _registry.declare(namespace, network, name, f"as NetworkPeering {resource_name!r}")
        props = {
            "namespace": namespace, "network": network, "name": name, "remote_namespace": remote_namespace,
            "remote_network": remote_network, "remote_site": remote_site or "", "remote_uid": remote_uid, "ttl": ttl,
            "description": description or "", "wait_for_bound": wait_for_bound or 0,
            "wait_for_programmed": wait_for_programmed if wait_for_programmed is not None else False,
            "phase": None, "reason": None, "message": None, "network_uid": None,
            "last_phase_transition_time": None, "expires_at": None, "dataplane": None, "programmed_at": None,
            "pinned_remote_uid": None,
        }
        super().__init__(NetworkPeeringProvider(), resource_name, props, _registry.options(opts))
