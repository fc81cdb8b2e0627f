"""The gRPC server: NetworkService and TokenService, plus the standard health
and reflection services so grpcurl and load balancers work."""

from __future__ import annotations

import functools
import logging
from concurrent import futures

import grpc
from google.protobuf import empty_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from netpeer import errors
from netpeer.api import convert
from netpeer.api.errors import code_for
from netpeer.core.models import Caller
from netpeer.service import Service
from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc

LOG = logging.getLogger(__name__)


def _token(context: grpc.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata():
        if key == "authorization":
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


def rpc(method):
    """Authenticates the caller, runs the method, and maps every netpeer error
    to its status code; anything else is logged and answered INTERNAL."""

    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            caller = self.service.authenticate(_token(context))
            return method(self, request, context, caller)
        except errors.NetpeerError as exc:
            context.abort(code_for(exc), exc.message)
        except Exception:
            LOG.exception("internal error in %s", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, "internal error; see the netpeerd log")

    return wrapper


def _mask(update_mask, allowed: tuple[str, ...]) -> set[str]:
    paths = set(update_mask.paths) if update_mask is not None else set()
    for p in paths:
        if p not in allowed:
            raise errors.InvalidArgument.for_field("update_mask", p, f"is not updatable; use one of {', '.join(allowed)}")
    return paths or set(allowed)


class NetworkServicer(pb_grpc.NetworkServiceServicer):
    def __init__(self, service: Service):
        self.service = service

    @rpc
    def CreateNetwork(self, request, context, caller: Caller):
        ns = convert.parse_namespace("parent", request.parent)
        view = self.service.create_network(
            caller, ns, request.network_id, list(request.network.subnets),
            convert.routes_from_pb(request.network.routes), request.network.description)
        return convert.network_to_pb(view)

    @rpc
    def GetNetwork(self, request, context, caller: Caller):
        ns, name = convert.parse_network_name("name", request.name)
        return convert.network_to_pb(self.service.get_network(caller, ns, name))

    @rpc
    def ListNetworks(self, request, context, caller: Caller):
        ns = convert.parse_namespace("parent", request.parent)
        size = convert.page_size(request.page_size)
        views = self.service.list_networks(caller, ns, after=convert.decode_page_token(request.page_token),
                                           limit=size + 1)
        more = len(views) > size
        views = views[:size]
        return pb.ListNetworksResponse(
            networks=[convert.network_to_pb(v) for v in views],
            next_page_token=convert.encode_page_token(views[-1].network.name) if more else "")

    @rpc
    def UpdateNetwork(self, request, context, caller: Caller):
        ns, name = convert.parse_network_name("network.name", request.network.name)
        paths = _mask(request.update_mask if request.HasField("update_mask") else None,
                      ("description", "subnets", "routes"))
        n = request.network
        view = self.service.update_network(
            caller, ns, name,
            subnets=list(n.subnets) if "subnets" in paths else None,
            routes=convert.routes_from_pb(n.routes) if "routes" in paths else None,
            description=n.description if "description" in paths else None, etag=n.etag)
        return convert.network_to_pb(view)

    @rpc
    def DeleteNetwork(self, request, context, caller: Caller):
        ns, name = convert.parse_network_name("name", request.name)
        self.service.delete_network(caller, ns, name, etag=request.etag)
        return empty_pb2.Empty()

    @rpc
    def CreatePeering(self, request, context, caller: Caller):
        ns, network = convert.parse_network_name("parent", request.parent)
        p = request.peering
        ttl = convert.ttl_from_pb(p.ttl) if p.HasField("ttl") else None
        peering = self.service.create_peering(
            caller, ns, network, request.peering_id, p.remote.namespace or None, p.remote.network,
            p.remote.uid or None, ttl, p.description)
        return convert.peering_to_pb(peering)

    @rpc
    def GetPeering(self, request, context, caller: Caller):
        ns, network, name = convert.parse_peering_name("name", request.name)
        return convert.peering_to_pb(self.service.get_peering(caller, ns, network, name))

    @rpc
    def ListPeerings(self, request, context, caller: Caller):
        ns, network = convert.parse_network_name("parent", request.parent)
        size = convert.page_size(request.page_size)
        items = self.service.list_peerings(caller, ns, network, after=convert.decode_page_token(request.page_token),
                                           limit=size + 1)
        more = len(items) > size
        items = items[:size]
        return pb.ListPeeringsResponse(
            peerings=[convert.peering_to_pb(p) for p in items],
            next_page_token=convert.encode_page_token(items[-1].name) if more else "")

    @rpc
    def UpdatePeering(self, request, context, caller: Caller):
        ns, network, name = convert.parse_peering_name("peering.name", request.peering.name)
        paths = _mask(request.update_mask if request.HasField("update_mask") else None, ("description", "ttl"))
        p = request.peering
        ttl = None
        if "ttl" in paths and p.HasField("ttl"):
            ttl = convert.ttl_from_pb(p.ttl)
        peering = self.service.update_peering(
            caller, ns, network, name, description=p.description if "description" in paths else None,
            ttl=ttl, etag=p.etag)
        return convert.peering_to_pb(peering)

    @rpc
    def DeletePeering(self, request, context, caller: Caller):
        ns, network, name = convert.parse_peering_name("name", request.name)
        self.service.delete_peering(caller, ns, network, name, etag=request.etag)
        return empty_pb2.Empty()


class TokenServicer(pb_grpc.TokenServiceServicer):
    def __init__(self, service: Service):
        self.service = service

    @rpc
    def CreateToken(self, request, context, caller: Caller):
        secret, token = self.service.create_token(caller, list(request.namespaces), request.description)
        return pb.CreateTokenResponse(token=secret, token_id=token.token_id, namespaces=sorted(token.namespaces))

    @rpc
    def GetCaller(self, request, context, caller: Caller):
        return pb.Caller(token_id=caller.token_id, namespaces=sorted(caller.namespaces), admin=caller.admin)


class StatusServicer(pb_grpc.StatusServiceServicer):
    def __init__(self, service: Service):
        self.service = service

    @rpc
    def GetStatus(self, request, context, caller: Caller):
        if not caller.admin:
            raise errors.PermissionDenied("only an admin token may read the server status")
        return convert.status_to_pb(self.service.status())


def is_local_address(address: str) -> bool:
    """Unix sockets and loopback listeners may run without TLS."""
    if address.startswith("unix:"):
        return True
    host = address.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")


def build_server(service: Service, address: str, *, tls_cert: bytes | None = None, tls_key: bytes | None = None,
                 client_ca: bytes | None = None, workers: int = 16) -> tuple[grpc.Server, int]:
    """A started-ready (not yet started) server listening on ``address``.
    Returns the server and the bound port (0 for unix sockets)."""
    if tls_cert is None and not is_local_address(address):
        raise errors.InvalidArgument.for_field(
            "listen", address, "is not loopback or a unix socket: configure tls_cert and tls_key")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc"))
    pb_grpc.add_NetworkServiceServicer_to_server(NetworkServicer(service), server)
    pb_grpc.add_TokenServiceServicer_to_server(TokenServicer(service), server)
    pb_grpc.add_StatusServiceServicer_to_server(StatusServicer(service), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in ("", "netpeer.v1.NetworkService", "netpeer.v1.TokenService", "netpeer.v1.StatusService"):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection((
        pb.DESCRIPTOR.services_by_name["NetworkService"].full_name,
        pb.DESCRIPTOR.services_by_name["TokenService"].full_name,
        pb.DESCRIPTOR.services_by_name["StatusService"].full_name,
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        reflection.SERVICE_NAME), server)
    if tls_cert is not None:
        creds = grpc.ssl_server_credentials([(tls_key, tls_cert)], root_certificates=client_ca,
                                            require_client_auth=client_ca is not None)
        port = server.add_secure_port(address, creds)
    else:
        port = server.add_insecure_port(address)
    server.health = health_servicer  # type: ignore[attr-defined]
    return server, port
