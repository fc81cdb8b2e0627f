"""The request inbox for every face (docs/inbox.md): the requests other
networks make to peer with the networks of a namespace, read so that a
team can accept one in code (a NetworkPeering / ``netpeer_peering`` built
from its fields). Pulumi's ``getPeeringRequests`` function and OpenTofu's
``netpeer_peering_requests`` data source both call ``list_requests``."""

from __future__ import annotations

from typing import Any

from netpeer_provider.core.session import Session, default_namespace

#: A request's fields: (snake_case name, "string" or "array" of strings, description).
REQUEST_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("id", "string", "The request's id (what `netpeer peering accept` takes)."),
    ("network", "string", "The network of the namespace the request names."),
    ("requester_namespace", "string", "The namespace of the network that asks."),
    ("requester_network", "string", "The network that asks: the remote network of the peering that accepts."),
    ("requester_uid", "string", "Its uid: pin the accepting peering's remote_uid to it."),
    ("requester_peering", "string", "The name of the requester's peering."),
    ("prefixes", "array", "What the requester's network would expose: subnets, then routes."),
    ("description", "string", "The requester's peering's description."),
    ("create_time", "string", "When the request was made (RFC 3339)."),
    ("expires_at", "string", "When it expires unless accepted (RFC 3339)."),
    ("ttl", "string", "The requester's peering's ttl."),
    ("pinned_uid", "string", "The uid of the network the requester's peering is pinned to (\"\" when none)."),
)


def list_requests(session: Session, namespace: str | None = None, network: str | None = None) -> dict[str, Any]:
    """``{"namespace": ..., "network": ..., "requests": [...]}``: the requests
    not dismissed to ``namespace`` (the token's, when it grants exactly one),
    to ``network`` only when given; each request with ``REQUEST_FIELDS``."""
    ns = namespace or session.call("reading the token's namespace", default_namespace)
    found = session.call(f"listing the peering requests to namespace {ns}",
                         lambda client: client.list_peering_requests(ns, network or None))
    empty = {"string": "", "array": []}
    return {"namespace": ns, "network": network or "",
            "requests": [{name: (empty[kind] if r.get(name) is None else r[name]) for name, kind, _ in REQUEST_FIELDS}
                         for r in found]}
