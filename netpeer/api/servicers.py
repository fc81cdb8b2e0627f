"""The netpeer.v1 services: each method turns a request into a service call
and the answer into a message. Plain blocking code: ``netpeer.api.server``
runs it on a worker pool (reads and writes apart) and maps errors."""

from __future__ import annotations

from google.protobuf import empty_pb2

from netpeer import errors
from netpeer.api import convert
from netpeer.core.models import Caller
from netpeer.reasons import Reason
from netpeer.service import Service, batch, inbox
from netpeer.v1 import netpeer_pb2 as pb

READ, WRITE = "read", "write"

#: A list answer stops before it passes this size (AIP-158: a page may hold
#: fewer than page_size items; next_page_token says more follow): a page of
#: 1,000 networks of 256 routes and 100 peerings each would be 53 MB. It
#: holds one item at least, and so stays readable by clients with gRPC's
#: default limit of 4 MiB unless that one alone is larger.
PAGE_BYTES = 2 << 20


def handler(kind: str):
    """Marks a method as a unary handler that reads or writes."""
    def mark(method):
        method.netpeer_kind = kind
        return method
    return mark


def _mask(update_mask, allowed: tuple[str, ...], default: tuple[str, ...] | None = None) -> set[str]:
    """The fields to update: the mask's paths, or ``default`` (all of ``allowed``) when empty."""
    paths = set(update_mask.paths) if update_mask is not None else set()
    for p in paths:
        if p not in allowed:
            raise errors.InvalidArgument.for_field("update_mask", p, f"is not updatable; use one of {', '.join(allowed)}")
    return paths or set(default or allowed)


def _page(items: list, to_pb, size: int) -> tuple[list, bool]:
    """The messages of the first items (at most ``size``, and as many as fit
    in PAGE_BYTES but at least one) of ``items`` (the next ``size + 1``), and
    whether more follow."""
    out, total = [], 0
    for item in items[:size]:
        message = to_pb(item)
        total += message.ByteSize()
        if out and total > PAGE_BYTES:
            break
        out.append(message)
    return out, len(out) < len(items)


def _peering_request(request) -> batch.PeeringRequest:
    """A ``CreatePeeringRequest`` as the service takes it."""
    ns, network = convert.parse_network_name("parent", request.parent)
    p = request.peering
    ttl = convert.ttl_from_pb(p.ttl) if p.HasField("ttl") else None
    return batch.PeeringRequest(ns, network, request.peering_id, p.remote.network, p.remote.namespace or None,
                                p.remote.uid or None, ttl, p.description, p.remote.site)


class NetworkHandlers:
    def __init__(self, service: Service):
        self.service = service

    @handler(WRITE)
    def CreateNetwork(self, request, caller: Caller):
        ns = convert.parse_namespace("parent", request.parent)
        view = self.service.create_network(
            caller, ns, request.network_id, list(request.network.subnets),
            convert.routes_from_pb(request.network.routes), request.network.description,
            validate_only=request.validate_only)
        return convert.network_to_pb(view)

    @handler(READ)
    def GetNetwork(self, request, caller: Caller):
        ns, name = convert.parse_network_name("name", request.name)
        return convert.network_to_pb(self.service.get_network(caller, ns, name))

    @handler(READ)
    def ListNetworks(self, request, caller: Caller):
        ns = convert.parse_namespace("parent", request.parent)
        size = convert.page_size(request.page_size)
        revision = self.service.head_revision(caller, ns)   # first: a watch from it misses nothing the list lacks
        views = self.service.list_networks(caller, ns, after=convert.decode_page_token(request.page_token),
                                           limit=size + 1)
        networks, more = _page(views, convert.network_to_pb, size)
        return pb.ListNetworksResponse(
            networks=networks, revision=revision,
            next_page_token=convert.encode_page_token(views[len(networks) - 1].network.name) if more else "")

    @handler(WRITE)
    def UpdateNetwork(self, request, caller: Caller):
        ns, name = convert.parse_network_name("network.name", request.network.name)
        paths = _mask(request.update_mask if request.HasField("update_mask") else None,
                      ("description", "subnets", "routes"))
        n = request.network
        view = self.service.update_network(
            caller, ns, name,
            subnets=list(n.subnets) if "subnets" in paths else None,
            routes=convert.routes_from_pb(n.routes) if "routes" in paths else None,
            description=n.description if "description" in paths else None, etag=n.etag,
            validate_only=request.validate_only)
        return convert.network_to_pb(view)

    @handler(WRITE)
    def DeleteNetwork(self, request, caller: Caller):
        ns, name = convert.parse_network_name("name", request.name)
        self.service.delete_network(caller, ns, name, etag=request.etag)
        return empty_pb2.Empty()

    @handler(WRITE)
    def CreatePeering(self, request, caller: Caller):
        r = _peering_request(request)
        peering = self.service.create_peering(
            caller, r.namespace, r.network, r.name, r.remote_namespace, r.remote_network, r.remote_uid, r.ttl,
            r.description, validate_only=request.validate_only, remote_site=r.remote_site)
        return convert.peering_to_pb(peering)

    @handler(WRITE)
    def BatchCreatePeerings(self, request, caller: Caller):
        batch.check_size(len(request.requests))
        # A validate-only batch is admitted by its token's budget before its requests are read, and charged
        # until its answer is made.
        with self.service.validating(caller, request.validate_only):
            halves = []
            for i, child in enumerate(request.requests):
                with batch.numbered(i):
                    if child.validate_only:
                        raise errors.InvalidArgument.for_field("validate_only", "true", "is set on one request of "
                                                               "a batch: set the batch's validate_only instead")
                    halves.append(_peering_request(child))
            peerings = self.service.create_peerings(caller, halves, validate_only=request.validate_only)
            return pb.BatchCreatePeeringsResponse(peerings=[convert.peering_to_pb(p) for p in peerings])

    @handler(READ)
    def GetPeering(self, request, caller: Caller):
        ns, network, name = convert.parse_peering_name("name", request.name)
        return convert.peering_to_pb(self.service.get_peering(caller, ns, network, name))

    @handler(READ)
    def ListPeerings(self, request, caller: Caller):
        ns, network = convert.parse_network_name("parent", request.parent)
        size = convert.page_size(request.page_size)
        revision = self.service.head_revision(caller, ns)   # first: a watch from it misses nothing the list lacks
        items = self.service.list_peerings(caller, ns, network, after=convert.decode_page_token(request.page_token),
                                           limit=size + 1)
        peerings, more = _page(items, convert.peering_to_pb, size)
        return pb.ListPeeringsResponse(
            peerings=peerings, revision=revision,
            next_page_token=convert.encode_page_token(items[len(peerings) - 1].name) if more else "")

    @handler(WRITE)
    def UpdatePeering(self, request, caller: Caller):
        ns, network, name = convert.parse_peering_name("peering.name", request.peering.name)
        paths = _mask(request.update_mask if request.HasField("update_mask") else None,
                      ("description", "ttl", "remote.uid"), default=("description", "ttl"))
        p = request.peering
        ttl = None
        if "ttl" in paths and p.HasField("ttl"):
            ttl = convert.ttl_from_pb(p.ttl)
        peering = self.service.update_peering(
            caller, ns, network, name, description=p.description if "description" in paths else None,
            ttl=ttl, remote_uid=p.remote.uid if "remote.uid" in paths else None, etag=p.etag,
            validate_only=request.validate_only)
        return convert.peering_to_pb(peering)

    @handler(WRITE)
    def DeletePeering(self, request, caller: Caller):
        ns, network, name = convert.parse_peering_name("name", request.name)
        self.service.delete_peering(caller, ns, network, name, etag=request.etag)
        return empty_pb2.Empty()

    # the request inbox (netpeer.service.inbox)
    @handler(READ)
    def ListPeeringRequests(self, request, caller: Caller):
        parent = request.parent or ""
        if parent.count("/") >= 3:
            ns, network = convert.parse_network_name("parent", parent)
        else:
            ns, network = convert.parse_namespace("parent", parent), None
        size = convert.page_size(request.page_size)
        revision = self.service.head_revision(caller, ns)   # first: a watch from it misses nothing the list lacks
        items = self.service.list_peering_requests(caller, ns, network,
                                                   after=convert.decode_page_token(request.page_token),
                                                   limit=size + 1)
        requests, more = _page(items, convert.request_to_pb, size)
        return pb.ListPeeringRequestsResponse(
            requests=requests, revision=revision,
            next_page_token=convert.encode_page_token(inbox.encode_after(items[len(requests) - 1])) if more else "")

    @handler(WRITE)
    def DismissPeeringRequest(self, request, caller: Caller):
        ns, network, request_id = convert.parse_request_name("name", request.name)
        self.service.dismiss_peering_request(caller, ns, network, request_id)
        return empty_pb2.Empty()

    @handler(WRITE)
    def AcceptPeeringRequest(self, request, caller: Caller):
        ns, network, request_id = convert.parse_request_name("name", request.name)
        p = request.peering
        ttl = convert.ttl_from_pb(p.ttl) if p.HasField("ttl") else None
        peering = self.service.accept_peering_request(caller, ns, network, request_id, request.peering_id,
                                                      p.description, ttl, validate_only=request.validate_only)
        return convert.peering_to_pb(peering)


class TokenHandlers:
    def __init__(self, service: Service):
        self.service = service

    @handler(WRITE)
    def CreateToken(self, request, caller: Caller):
        ttl = convert.ttl_from_pb(request.ttl) if request.HasField("ttl") else None
        secret, token = self.service.create_token(caller, list(request.namespaces), request.description, ttl)
        out = pb.CreateTokenResponse(token=secret, token_id=token.token_id, namespaces=sorted(token.namespaces))
        if token.expires_at is not None:
            out.expires_at.CopyFrom(convert.ts(token.expires_at))
        return out

    @handler(READ)
    def ListTokens(self, request, caller: Caller):
        return pb.ListTokensResponse(tokens=[convert.token_to_pb(t) for t in self.service.list_tokens(caller)])

    @handler(WRITE)
    def RevokeToken(self, request, caller: Caller):
        self.service.revoke_token(caller, request.token)
        return empty_pb2.Empty()

    @handler(READ)
    def GetCaller(self, request, caller: Caller):
        return pb.Caller(token_id=caller.token_id, namespaces=sorted(caller.namespaces), admin=caller.admin)


class StatusHandlers:
    def __init__(self, service: Service):
        self.service = service

    @handler(READ)
    def GetStatus(self, request, caller: Caller):
        if not caller.admin:
            raise errors.PermissionDenied("only an admin token may read the server status",
                                          reason=Reason.ADMIN_REQUIRED)
        return convert.status_to_pb(self.service.status())
