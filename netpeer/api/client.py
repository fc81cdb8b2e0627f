"""A small client for the netpeer.v1 API, shared by the CLI and the Pulumi
provider. Results are plain JSON-shaped dicts (the CLI's ``-o json``);
failures raise ``netpeer.errors`` classes carrying the server's one line.

Longer than 400 lines: ``Client`` has a method per call of the API, each
a few lines; the conversions to JSON-shaped dicts beside it are shared by
all of them."""

from __future__ import annotations

import os
import secrets
import time
from datetime import timedelta
from typing import Any, Iterator, Mapping, Sequence

import grpc
from google.protobuf import field_mask_pb2

from netpeer.api import convert
from netpeer.api.errors import decode, from_rpc_error
from netpeer.api.intake import ANSWER_BYTES
from netpeer.core.validate import format_duration
from netpeer.errors import InvalidArgument, Unavailable
from netpeer.reasons import Reason
from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc

PHASE_NAMES = {pb.PENDING: "Pending", pb.BOUND: "Bound", pb.FAILED: "Failed", pb.PHASE_UNSPECIFIED: ""}


DATAPLANE_NAMES = {pb.PROGRAMMED: "Programmed", pb.PROGRAMMING: "Programming", pb.DATAPLANE_UNSPECIFIED: ""}
EVENT_TYPES = {pb.WatchEvent.BOOKMARK: "Bookmark", pb.WatchEvent.CREATED: "Created", pb.WatchEvent.UPDATED: "Updated",
               pb.WatchEvent.PHASE_CHANGED: "PhaseChanged", pb.WatchEvent.PROGRAMMED: "Programmed",
               pb.WatchEvent.DELETED: "Deleted", pb.WatchEvent.TYPE_UNSPECIFIED: ""}


def _precise(msg, field: str) -> str | None:
    """RFC 3339 with microseconds (times that tests and scripts compare)."""
    if not msg.HasField(field):
        return None
    return getattr(msg, field).ToDatetime().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_json(e: pb.WatchEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"revision": e.revision, "type": EVENT_TYPES[e.type], "time": _precise(e, "time")}
    if e.type == pb.WatchEvent.BOOKMARK:
        return out
    parts = e.name.split("/")
    out["kind"] = ("peering" if "peerings" in parts else "peering_request" if "peeringRequests" in parts
                   else "network")
    out["namespace"] = parts[1]
    out["network"] = parts[3]
    out["name"] = parts[5] if out["kind"] != "network" else parts[3]
    if e.HasField("peering_request"):
        out["peering_request"] = request_json(e.peering_request)
    elif e.HasField("peering"):
        out["peering"] = peering_json(e.peering)
        out.update({k: out["peering"][k] for k in ("phase", "reason", "message", "dataplane")})
    elif e.HasField("network"):
        out["network_object"] = network_json(e.network)
    return out


def _time(msg, field: str) -> str | None:
    if not msg.HasField(field):
        return None
    return getattr(msg, field).ToDatetime().strftime("%Y-%m-%dT%H:%M:%SZ")


def peering_json(p: pb.Peering) -> dict[str, Any]:
    ns, network, name = convert.parse_peering_name("name", p.name)
    return {
        "name": name, "namespace": ns, "network": network,
        "remote_namespace": p.remote.namespace, "remote_network": p.remote.network, "remote_site": p.remote.site,
        "remote_uid": p.remote_uid or None, "network_uid": p.network_uid,
        "phase": PHASE_NAMES[p.phase], "reason": p.reason, "message": p.message,
        "last_phase_transition_time": _time(p, "last_phase_transition_time"),
        "expires_at": _time(p, "expires_at"),
        "ttl": format_duration(p.ttl.ToTimedelta()), "description": p.description,
        "create_time": _time(p, "create_time"), "etag": p.etag,
        "dataplane": DATAPLANE_NAMES[p.dataplane], "programmed_at": _precise(p, "programmed_at"),
    }


def request_json(r: pb.PeeringRequest) -> dict[str, Any]:
    """A request to a network of the caller's namespace (docs/inbox.md)."""
    ns, network, request = convert.parse_request_name("name", r.name)
    return {
        "id": request, "namespace": ns, "network": network,
        "requester_site": r.requester.site, "requester_namespace": r.requester.namespace,
        "requester_network": r.requester.network, "requester_uid": r.requester.uid,
        "requester_peering": r.requester_peering,
        "prefixes": list(r.prefixes), "description": r.description, "pinned_uid": r.pinned_uid or None,
        "create_time": _time(r, "create_time"), "ttl": format_duration(r.ttl.ToTimedelta()),
        "expires_at": _time(r, "expires_at"),
    }


def network_json(n: pb.Network) -> dict[str, Any]:
    ns, name = convert.parse_network_name("name", n.name)
    return {
        "name": name, "namespace": ns, "uid": n.uid, "subnets": list(n.subnets),
        "routes": [f"{r.prefix} via {r.next_hop}" if r.next_hop else r.prefix for r in n.routes],
        "description": n.description,
        "peerings": [{"name": p.name, "remote_namespace": p.remote_namespace, "remote_network": p.remote_network,
                      "remote_site": p.remote_site, "phase": PHASE_NAMES[p.phase], "reason": p.reason,
                      "last_phase_transition_time": _time(p, "last_phase_transition_time")} for p in n.peerings],
        "peered_networks": [{"namespace": x.namespace, "name": x.name, "uid": x.uid, "site": x.site,
                             "prefixes": list(x.prefixes)} for x in n.peered_networks],
        "create_time": _time(n, "create_time"), "update_time": _time(n, "update_time"), "etag": n.etag,
        "peering_count": n.peering_count,
    }


def _route_pb(route: str) -> pb.Route:
    parts = str(route).split()
    if len(parts) == 3 and parts[1] == "via":
        return pb.Route(prefix=parts[0], next_hop=parts[2])
    return pb.Route(prefix=str(route))


def endpoints(value: str) -> list[str]:
    """The endpoints of a comma-separated list (``NETPEER_ENDPOINT`` may
    name several replicas: ``unix:///a.sock,unix:///b.sock``, ``h1:7443,h2:7443``)."""
    items = [e.strip() for e in (value or "").split(",")]
    if not value or not all(items):
        raise InvalidArgument.for_field("endpoint", value, "is required: pass --endpoint or set NETPEER_ENDPOINT"
                                        if not value else "has an empty item: write ENDPOINT[,ENDPOINT...]")
    return items


#: Whatever netpeerd may answer (gRPC's default receive limit is 4 MiB).
_OPTIONS = [("grpc.max_receive_message_length", ANSWER_BYTES)]


def channel(endpoint: str, ca_cert: str | None = None, client_cert: str | None = None,
            client_key: str | None = None) -> grpc.Channel:
    """A channel to ``endpoint`` (``host:port`` or ``unix:///path``); TLS when
    a CA certificate is given (file path or PEM text). A DNS name with
    several addresses is one endpoint: gRPC tries its addresses in turn."""
    if not endpoint:
        raise InvalidArgument.for_field("endpoint", endpoint,
                                        "is required: pass --endpoint or set NETPEER_ENDPOINT")
    if ca_cert:
        def pem(value):
            if value is None:
                return None
            return value.encode() if "-----BEGIN" in value else open(os.path.expanduser(value), "rb").read()
        creds = grpc.ssl_channel_credentials(pem(ca_cert), pem(client_key), pem(client_cert))
        return grpc.secure_channel(endpoint, creds, options=_OPTIONS)
    return grpc.insecure_channel(endpoint, options=_OPTIONS)


#: Calls that change nothing: retried on the next endpoint after any UNAVAILABLE.
READS = frozenset({"GetCaller", "ListTokens", "GetStatus", "GetNetwork", "ListNetworks", "GetPeering",
                   "ListPeerings", "ListPeeringRequests"})
_STUBS = {"net": pb_grpc.NetworkServiceStub, "tok": pb_grpc.TokenServiceStub, "status": pb_grpc.StatusServiceStub}


class _Method:
    """A method of one of the services, on whichever endpoint the call goes to."""

    __slots__ = ("service", "name")

    def __init__(self, service: str, name: str):
        self.service, self.name = service, name


class _Service:
    def __init__(self, service: str):
        self._service = service

    def __getattr__(self, name: str) -> _Method:
        return _Method(self._service, name)


def never_reached(exc: grpc.RpcError) -> bool:
    """The call was not acted on by any server: safe to send elsewhere,
    whatever it does. Decided from what the call carries, never from
    gRPC's words: UNAVAILABLE made by gRPC (no details from netpeerd) and
    no initial metadata from a server. netpeerd sends a write's initial
    metadata before it does anything for it (``netpeer.api.server``), so a
    write that broke without them was not acted on: nothing listened, the
    connection was refused, or it broke before netpeerd took the call.
    (A read carries none until its answer; reads are sent again anyway.)
    The code alone does not tell: a connection reset by a server that was
    killed reads as UNAVAILABLE or UNKNOWN ("Stream removed") by timing."""
    return exc.code() in BROKEN and decode(exc) is None and not exc.initial_metadata()


#: The status codes of a call whose connection broke (as gRPC reports it,
#: without netpeerd's details): whatever the call was, it may have run.
BROKEN = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED})

#: How often a read whose connection broke is sent again, and the pause before each.
READ_RETRIES_S = (0.2, 1.0)


def broken(exc: grpc.RpcError) -> bool:
    """The call reached a server (perhaps) and its connection broke: a
    status gRPC made, not netpeerd (which always sends its details)."""
    return exc.code() in BROKEN and not never_reached(exc) and decode(exc) is None


def _read_back(method: str) -> str:
    """How to read back what ``method`` would have changed."""
    if "Token" in method:
        return "`netpeer token list` (ListTokens)"
    noun = "peering" if "Peering" in method else "network"
    return f"`netpeer {noun} show` (Get{noun.capitalize()})"


class Client:
    """netpeer.v1 over one or several endpoints (replicas of one netpeerd
    deployment). Calls go to one endpoint until it fails; then:

    - a call that never reached a server (nothing listens, connection
      refused) goes to the next endpoint, whatever it is;
    - a read (``READS``) that failed with UNAVAILABLE goes to the next one;
    - a read whose connection broke, or that reached no server, is sent
      again (``READ_RETRIES_S``);
    - a write whose connection broke after it was sent is *not* re-sent: it
      may have been applied, so the caller gets UNAVAILABLE with reason
      OUTCOME_UNKNOWN and decides (a re-sent create would answer
      ALREADY_EXISTS, a delete NOT_FOUND).

    Errors are the ``netpeer.errors`` classes that netpeerd's status details
    describe (``netpeer.api.errors.decode``): reason, field and value.
    """

    def __init__(self, endpoint: str, token: str | None, ca_cert: str | None = None,
                 client_cert: str | None = None, client_key: str | None = None, timeout: float = 60.0):
        self.endpoint = endpoint
        self.endpoints = endpoints(endpoint)
        self._tls = (ca_cert, client_cert, client_key)
        self._channels: dict[int, grpc.Channel] = {}
        self._stubs: dict[tuple[int, str], object] = {}
        self._current = 0
        self._channel = self._open(0)   # settings errors (a CA file) show at once
        self._net, self._tok, self._status = _Service("net"), _Service("tok"), _Service("status")
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout

    def _open(self, i: int) -> grpc.Channel:
        if i not in self._channels:
            self._channels[i] = channel(self.endpoints[i], *self._tls)
        return self._channels[i]

    def _stub(self, i: int, service: str):
        stub = self._stubs.get((i, service))
        if stub is None:
            stub = self._stubs[(i, service)] = _STUBS[service](self._open(i))
        return stub

    def close(self) -> None:
        for c in self._channels.values():
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method: _Method, request):
        """One call, with a request id of its own (``x-request-id``: netpeerd
        logs it and sends it back); an error carries it as ``request_id``.
        Goes to the next endpoint where that is safe (see the class)."""
        rid = secrets.token_hex(8)
        count = len(self.endpoints)
        retries = list(READ_RETRIES_S) if method.name in READS else []
        attempt = 0
        while True:
            i = (self._current + attempt) % count
            fn = getattr(self._stub(i, method.service), method.name)
            try:
                answer = fn(request, metadata=self._metadata + (("x-request-id", rid),), timeout=self.timeout)
                self._current = i
                return answer
            except grpc.RpcError as exc:
                attempt += 1
                reached = not never_reached(exc)
                safe = not reached or (method.name in READS and exc.code() == grpc.StatusCode.UNAVAILABLE)
                if safe and attempt < count:
                    continue
                if method.name in READS and retries and exc.code() in BROKEN and decode(exc) is None:
                    # A read changes nothing: sent again, here or elsewhere, whether its connection
                    # broke before or after netpeerd took it (netpeerd may be restarting).
                    time.sleep(retries.pop(0))
                    continue
                error = self._error(exc, self.endpoints[i], method.name)
                error.request_id = rid
                raise error from None

    def _error(self, exc: grpc.RpcError, endpoint: str, method: str):
        if never_reached(exc):
            where = endpoint if len(self.endpoints) == 1 else f"any of {', '.join(self.endpoints)}"
            return Unavailable(f"cannot reach netpeerd at {where} (is it running? try "
                               f"'netpeer dev status'): {exc.details().split(';')[-1].strip()}",
                               reason=Reason.SERVICE_UNREACHABLE)
        if broken(exc) and method not in READS:
            return Unavailable(f"{method}: the connection to netpeerd at {endpoint} broke during the call "
                               f"({(exc.details() or exc.code().name).splitlines()[0]}): the write may or may not "
                               f"have been applied; read it back with {_read_back(method)} before trying again",
                               reason=Reason.OUTCOME_UNKNOWN)
        return from_rpc_error(exc)

    # tokens
    def caller(self) -> dict[str, Any]:
        c = self._call(self._tok.GetCaller, pb.GetCallerRequest())
        return {"token_id": c.token_id, "namespaces": list(c.namespaces), "admin": c.admin}

    def create_token(self, namespaces: list[str], description: str = "",
                     ttl: timedelta | None = None) -> dict[str, Any]:
        req = pb.CreateTokenRequest(namespaces=namespaces, description=description)
        if ttl is not None:
            req.ttl.FromTimedelta(ttl)
        r = self._call(self._tok.CreateToken, req)
        return {"token": r.token, "token_id": r.token_id, "namespaces": list(r.namespaces),
                "expires_at": _time(r, "expires_at")}

    def list_tokens(self) -> list[dict[str, Any]]:
        r = self._call(self._tok.ListTokens, pb.ListTokensRequest())
        return [{"token_id": t.token_id, "namespaces": list(t.namespaces), "admin": t.admin,
                 "description": t.description, "create_time": _time(t, "create_time"),
                 "expires_at": _time(t, "expires_at")} for t in r.tokens]

    def revoke_token(self, token_or_id: str) -> None:
        self._call(self._tok.RevokeToken, pb.RevokeTokenRequest(token=token_or_id))

    # status
    def status(self) -> dict[str, Any]:
        """The server's status (admin): dataplane connection and sweeps."""
        s = self._call(self._status.GetStatus, pb.GetStatusRequest())

        def report(r):
            return {"expired": r.expired, "repaired_rows": r.repaired_rows, "errors": r.errors}
        return {"version": s.version, "dataplane": s.dataplane, "dataplane_connected": s.dataplane_connected,
                "sweeps": s.sweeps,
                "last_sweep": report(s.last_sweep) if s.HasField("last_sweep") else None,
                "last_sweep_start_time": _time(s, "last_sweep_start_time"),
                "last_sweep_end_time": _time(s, "last_sweep_end_time"),
                "sweep_totals": report(s.sweep_totals), "replica": s.replica, "leader": s.leader,
                "leading": bool(s.replica) and s.replica == s.leader, "site": s.site,
                "gateways": [{"chassis": g.chassis, "priority": g.priority, "state": g.state} for g in s.gateways],
                "sites": [{"site": x.site, "reachable": x.reachable, "last_ok_time": _time(x, "last_ok_time"),
                           "last_error": x.last_error, "exchanges": x.exchanges, "failures": x.failures,
                           "capacity": x.capacity, "slots_used": x.slots_used,
                           "top_namespaces": [{"namespace": t.namespace, "slots": t.slots}
                                              for t in x.top_namespaces],
                           "bytes_sent": x.bytes_sent, "bytes_received": x.bytes_received,
                           "resyncs_sent": x.resyncs_sent, "resyncs_received": x.resyncs_received,
                           "pending_changes": x.pending_changes, "diverged": x.diverged,
                           "items_told": x.items_told, "items_held": x.items_held}
                          for x in s.sites]}

    # networks
    def create_network(self, namespace: str, name: str, subnets: list[str], routes: list[str] = (),
                       description: str = "", validate_only: bool = False) -> dict[str, Any]:
        req = pb.CreateNetworkRequest(parent=f"namespaces/{namespace}", network_id=name, network=pb.Network(
            subnets=list(subnets), routes=[_route_pb(r) for r in routes], description=description or ""),
            validate_only=validate_only)
        return network_json(self._call(self._net.CreateNetwork, req))

    def get_network(self, namespace: str, name: str) -> dict[str, Any]:
        return network_json(self._call(self._net.GetNetwork, pb.GetNetworkRequest(
            name=convert.network_name(namespace, name))))

    def list_networks(self, namespace: str) -> list[dict[str, Any]]:
        out, token = [], ""
        while True:
            r = self._call(self._net.ListNetworks, pb.ListNetworksRequest(
                parent=f"namespaces/{namespace}", page_size=500, page_token=token))
            out += [network_json(n) for n in r.networks]
            token = r.next_page_token
            if not token:
                return out

    def update_network(self, namespace: str, name: str, *, subnets=None, routes=None, description=None,
                       etag: str = "", validate_only: bool = False) -> dict[str, Any]:
        paths, n = [], pb.Network(name=convert.network_name(namespace, name), etag=etag)
        if subnets is not None:
            paths.append("subnets")
            n.subnets.extend(subnets)
        if routes is not None:
            paths.append("routes")
            n.routes.extend(_route_pb(r) for r in routes)
        if description is not None:
            paths.append("description")
            n.description = description
        if not paths:
            return self.get_network(namespace, name)
        return network_json(self._call(self._net.UpdateNetwork, pb.UpdateNetworkRequest(
            network=n, update_mask=field_mask_pb2.FieldMask(paths=paths), validate_only=validate_only)))

    def delete_network(self, namespace: str, name: str) -> None:
        self._call(self._net.DeleteNetwork, pb.DeleteNetworkRequest(name=convert.network_name(namespace, name)))

    # peerings
    def create_peering(self, namespace: str, network: str, name: str, remote_network: str,
                       remote_namespace: str | None = None, remote_uid: str | None = None,
                       ttl: timedelta | None = None, description: str = "",
                       validate_only: bool = False, remote_site: str = "") -> dict[str, Any]:
        """One side's consent; ``remote_site`` names another site's network."""
        p = pb.Peering(remote=pb.RemoteRef(namespace=remote_namespace or "", network=remote_network,
                                           uid=remote_uid or "", site=remote_site or ""),
                       description=description or "")
        if ttl is not None:
            p.ttl.FromTimedelta(ttl)
        return peering_json(self._call(self._net.CreatePeering, pb.CreatePeeringRequest(
            parent=convert.network_name(namespace, network), peering_id=name, peering=p,
            validate_only=validate_only)))

    def create_peerings(self, halves: Sequence[Mapping[str, Any]], validate_only: bool = False) -> list[dict[str, Any]]:
        """Many consents in one call, all or none (at most 1000). Each item
        has the arguments of ``create_peering`` by name (``namespace``,
        ``network``, ``name``, ``remote_network``, and optionally
        ``remote_namespace``, ``remote_uid``, ``ttl``, ``description``,
        ``remote_site``); the peerings come back in the same order."""
        requests = []
        for h in halves:
            p = pb.Peering(remote=pb.RemoteRef(namespace=h.get("remote_namespace") or "",
                                               network=h["remote_network"], uid=h.get("remote_uid") or "",
                                               site=h.get("remote_site") or ""),
                           description=h.get("description") or "")
            if h.get("ttl") is not None:
                p.ttl.FromTimedelta(h["ttl"])
            requests.append(pb.CreatePeeringRequest(parent=convert.network_name(h["namespace"], h["network"]),
                                                    peering_id=h["name"], peering=p))
        r = self._call(self._net.BatchCreatePeerings, pb.BatchCreatePeeringsRequest(
            requests=requests, validate_only=validate_only))
        return [peering_json(p) for p in r.peerings]

    def get_peering(self, namespace: str, network: str, name: str) -> dict[str, Any]:
        return peering_json(self._call(self._net.GetPeering, pb.GetPeeringRequest(
            name=convert.peering_name(namespace, network, name))))

    def list_peerings(self, namespace: str, network: str | None) -> list[dict[str, Any]]:
        """The halves of ``network``; with None, of every network of the
        namespace (one call a page, in network and name order)."""
        out, token = [], ""
        while True:
            r = self._call(self._net.ListPeerings, pb.ListPeeringsRequest(
                parent=convert.network_name(namespace, network or "-"), page_size=500, page_token=token))
            out += [peering_json(p) for p in r.peerings]
            token = r.next_page_token
            if not token:
                return out

    def update_peering(self, namespace: str, network: str, name: str, *, description=None,
                       ttl: timedelta | None = None, remote_uid: str | None = None,
                       validate_only: bool = False) -> dict[str, Any]:
        """``remote_uid``: re-pin the remote network ("" clears the pin)."""
        paths, p = [], pb.Peering(name=convert.peering_name(namespace, network, name))
        if description is not None:
            paths.append("description")
            p.description = description
        if remote_uid is not None:
            paths.append("remote.uid")
            p.remote.uid = remote_uid
        if ttl is not None:
            paths.append("ttl")
            p.ttl.FromTimedelta(ttl)
        if not paths:
            return self.get_peering(namespace, network, name)
        return peering_json(self._call(self._net.UpdatePeering, pb.UpdatePeeringRequest(
            peering=p, update_mask=field_mask_pb2.FieldMask(paths=paths), validate_only=validate_only)))

    # the request inbox (docs/inbox.md)
    def list_peering_requests(self, namespace: str, network: str | None = None) -> list[dict[str, Any]]:
        """The requests to networks of ``namespace`` (to ``network``), every page."""
        parent = convert.network_name(namespace, network) if network else f"namespaces/{namespace}"
        out, token = [], ""
        while True:
            r = self._call(self._net.ListPeeringRequests, pb.ListPeeringRequestsRequest(
                parent=parent, page_size=500, page_token=token))
            out += [request_json(x) for x in r.requests]
            token = r.next_page_token
            if not token:
                return out

    def dismiss_peering_request(self, namespace: str, network: str, request: str) -> None:
        self._call(self._net.DismissPeeringRequest, pb.DismissPeeringRequestRequest(
            name=convert.request_name(namespace, network, request)))

    def accept_peering_request(self, namespace: str, network: str, request: str, name: str,
                               ttl: timedelta | None = None, description: str = "",
                               validate_only: bool = False) -> dict[str, Any]:
        """Creates half ``name`` of ``namespace/network`` matching the request."""
        p = pb.Peering(description=description or "")
        if ttl is not None:
            p.ttl.FromTimedelta(ttl)
        return peering_json(self._call(self._net.AcceptPeeringRequest, pb.AcceptPeeringRequestRequest(
            name=convert.request_name(namespace, network, request), peering_id=name, peering=p,
            validate_only=validate_only)))

    # watch
    def watch(self, namespace: str, network: str | None = None, since: int | None = None,
              resume: bool = True, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """The changes of a namespace (or one network) after revision
        ``since`` (None: from now, starting with a Bookmark), as they happen.
        With ``resume``, a lost connection is re-made and the watch goes on
        from the last revision seen: nothing is missed or repeated. With
        ``timeout``, the watch ends quietly after that many seconds."""
        parent = convert.network_name(namespace, network) if network else f"namespaces/{namespace}"
        while True:
            try:
                request = pb.WatchRequest(parent=parent)
                if since is not None:
                    request.since_revision = since
                stream = self._stub(self._current, "net").Watch(request, metadata=self._metadata, timeout=timeout)
                for event in stream:
                    since = event.revision if since is None else max(since, event.revision)
                    yield event_json(event)
                return
            except grpc.RpcError as exc:
                if timeout is not None and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    return
                if not resume or exc.code() != grpc.StatusCode.UNAVAILABLE:
                    raise from_rpc_error(exc) from None
                self._current = (self._current + 1) % len(self.endpoints)   # another replica, if any
                time.sleep(0.5 if self._current == 0 else 0.05)

    def delete_peering(self, namespace: str, network: str, name: str) -> None:
        self._call(self._net.DeletePeering, pb.DeletePeeringRequest(
            name=convert.peering_name(namespace, network, name)))
