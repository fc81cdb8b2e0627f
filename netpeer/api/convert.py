"""Protobuf <-> domain conversion, and the resource names of the API."""

from __future__ import annotations

import base64
import re
from datetime import datetime, timedelta, timezone

from google.protobuf import duration_pb2, timestamp_pb2

from netpeer.core.models import Event, EventType, Network, Peering, Phase, Route, Token
from netpeer.core.requests import PeeringRequest
from netpeer.core.sides import Delta, Digest, ItemKey, Sync, ToldHalf, ToldNetwork
from netpeer.core.validate import NAME_MAX, TTL_MAX, TTL_MIN, format_duration
from netpeer.errors import InvalidArgument
from netpeer.service import NetworkView, ServerStatus
from netpeer.v1 import netpeer_pb2 as pb

_PHASES = {Phase.PENDING: pb.PENDING, Phase.BOUND: pb.BOUND, Phase.FAILED: pb.FAILED}
_NS = re.compile(r"^namespaces/([^/]+)$")
_NET = re.compile(r"^namespaces/([^/]+)/networks/([^/]+)$")
_PEER = re.compile(r"^namespaces/([^/]+)/networks/([^/]+)/peerings/([^/]+)$")
_REQUEST = re.compile(r"^namespaces/([^/]+)/networks/([^/]+)/peeringRequests/([^/]+)$")


def parse_namespace(field: str, value: str) -> str:
    m = _NS.match(value or "")
    if not m:
        raise InvalidArgument.for_field(field, value, "must look like namespaces/{namespace}")
    return m.group(1)


def parse_network_name(field: str, value: str) -> tuple[str, str]:
    m = _NET.match(value or "")
    if not m:
        raise InvalidArgument.for_field(field, value, "must look like namespaces/{namespace}/networks/{network}")
    return m.group(1), m.group(2)


def parse_peering_name(field: str, value: str) -> tuple[str, str, str]:
    m = _PEER.match(value or "")
    if not m:
        raise InvalidArgument.for_field(
            field, value, "must look like namespaces/{namespace}/networks/{network}/peerings/{peering}")
    return m.group(1), m.group(2), m.group(3)


def parse_request_name(field: str, value: str) -> tuple[str, str, str]:
    """(namespace, network, request id) of a peering request's name."""
    m = _REQUEST.match(value or "")
    if not m:
        raise InvalidArgument.for_field(
            field, value, "must look like namespaces/{namespace}/networks/{network}/peeringRequests/{id}")
    return m.group(1), m.group(2), m.group(3)


def request_name(namespace: str, network: str, request: str) -> str:
    return f"{network_name(namespace, network)}/peeringRequests/{request}"


def request_to_pb(r: PeeringRequest) -> pb.PeeringRequest:
    h = r.half
    msg = pb.PeeringRequest(
        name=request_name(h.remote_namespace, h.remote_network, r.id), id=r.id,
        requester=pb.RemoteRef(namespace=h.namespace, network=h.network, uid=h.network_uid),
        requester_peering=h.name, prefixes=list(r.prefixes), description=h.description,
        create_time=ts(h.create_time), ttl=duration(h.ttl), pinned_uid=h.remote_uid or "")
    if r.expires_at is not None:
        msg.expires_at.CopyFrom(ts(r.expires_at))
    return msg


def network_name(namespace: str, name: str) -> str:
    return f"namespaces/{namespace}/networks/{name}"


def peering_name(namespace: str, network: str, name: str) -> str:
    return f"{network_name(namespace, network)}/peerings/{name}"


def ts(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value.astimezone(timezone.utc).replace(tzinfo=None))
    return out


def duration(value: timedelta) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromTimedelta(value)
    return out


def ttl_from_pb(value: duration_pb2.Duration) -> timedelta:
    """A TTL from the wire. Negative and out-of-range durations are refused
    here, before ``timedelta`` (which overflows past 999999999 days) sees them,
    and so are nanos outside a second (protobuf's rule: ``ToTimedelta`` would
    add 2e9 of them as two seconds)."""
    seconds, nanos = value.seconds, value.nanos
    if not 0 <= nanos <= 999_999_999:   # negative, or more than a second of them: no TTL, refused as sent
        raise InvalidArgument.for_field("ttl", f"{seconds}s and {nanos} ns",
                                        "must be positive, with nanos from 0 to 999999999")
    shown = f"{seconds}s" if not nanos else f"{seconds}.{nanos:09d}s"
    if seconds < 0:
        raise InvalidArgument.for_field("ttl", shown, "must be positive")
    if not TTL_MIN.total_seconds() <= value.seconds <= TTL_MAX.total_seconds():
        # 1 ns is not "unset" (it silently became the 7-day default) and is
        # refused like 0.5 s; fractions above a second are cut, as the store
        # keeps whole seconds (validate.ttl).
        raise InvalidArgument.for_field(
            "ttl", shown, f"must be between {format_duration(TTL_MIN)} and {format_duration(TTL_MAX)}")
    return value.ToTimedelta()


def route_text(r: Route) -> str:
    return f"{r.prefix} via {r.next_hop}" if r.next_hop else r.prefix


def routes_from_pb(routes) -> list[Route | str]:
    return [Route(r.prefix, r.next_hop or None) if r.next_hop else r.prefix for r in routes]


def peering_to_pb(p: Peering) -> pb.Peering:
    msg = pb.Peering(
        name=peering_name(p.namespace, p.network, p.name),
        remote=pb.RemoteRef(namespace=p.remote_namespace, network=p.remote_network, uid=p.remote_uid or "",
                            site=p.remote_site),
        description=p.description, ttl=duration(p.ttl), phase=_PHASES[p.phase], reason=p.reason,
        message=p.message, last_phase_transition_time=ts(p.last_phase_transition_time),
        remote_uid=p.remote_uid or "", network_uid=p.network_uid, create_time=ts(p.create_time), etag=p.etag,
        dataplane=pb.PROGRAMMING if p.dataplane == "Programming" else pb.PROGRAMMED)
    if p.expires_at is not None:
        msg.expires_at.CopyFrom(ts(p.expires_at))
    if p.programmed_at is not None:
        msg.programmed_at.CopyFrom(ts(p.programmed_at))
    return msg


_EVENT_TYPES = {EventType.CREATED: pb.WatchEvent.CREATED, EventType.UPDATED: pb.WatchEvent.UPDATED,
                EventType.PHASE_CHANGED: pb.WatchEvent.PHASE_CHANGED, EventType.PROGRAMMED: pb.WatchEvent.PROGRAMMED,
                EventType.DELETED: pb.WatchEvent.DELETED}


def event_to_pb(e: Event) -> pb.WatchEvent:
    if e.kind == "peering":
        name = peering_name(e.namespace, e.network, e.name)
    elif e.kind == "peering_request":
        name = request_name(e.namespace, e.network, e.name)
    else:
        name = network_name(e.namespace, e.name)
    out = pb.WatchEvent(revision=e.revision, type=_EVENT_TYPES[e.type], time=ts(e.time), name=name)
    if isinstance(e.obj, Peering):
        out.peering.CopyFrom(peering_to_pb(e.obj))
    elif isinstance(e.obj, PeeringRequest):
        out.peering_request.CopyFrom(request_to_pb(e.obj))
    elif isinstance(e.obj, Network):
        out.network.CopyFrom(network_to_pb(NetworkView(e.obj, (), ())))
    return out


# namespaces/{namespace}/networks/{network}, names of at most NAME_MAX characters.
_WATCH_PARENT_MAX = len("namespaces//networks/") + 2 * NAME_MAX


def bookmark(revision: int) -> pb.WatchEvent:
    return pb.WatchEvent(revision=revision, type=pb.WatchEvent.BOOKMARK)


def parse_watch_parent(value: str) -> tuple[str, str | None]:
    """namespaces/NS or namespaces/NS/networks/NET."""
    if len(value) > _WATCH_PARENT_MAX:   # refused before any copy of it is made
        raise InvalidArgument.for_field("parent", value, f"is longer than {_WATCH_PARENT_MAX} characters")
    if value.count("/") >= 3:
        ns, net = parse_network_name("parent", value)
        return ns, net
    return parse_namespace("parent", value), None


def network_to_pb(view: NetworkView) -> pb.Network:
    n: Network = view.network
    return pb.Network(
        name=network_name(n.namespace, n.name), uid=n.uid, subnets=list(n.subnets),
        routes=[pb.Route(prefix=r.prefix, next_hop=r.next_hop or "") for r in n.routes],
        description=n.description,
        peerings=[pb.NetworkPeeringStatus(
            name=p.name, remote_namespace=p.remote_namespace, remote_network=p.remote_network,
            phase=_PHASES[p.phase], reason=p.reason, remote_site=p.remote_site,
            last_phase_transition_time=ts(p.last_phase_transition_time)) for p in view.peerings],
        peered_networks=[pb.PeeredNetwork(namespace=x.namespace, name=x.name, uid=x.uid, site=x.site,
                                          prefixes=list(x.prefixes)) for x in view.peered_networks],
        create_time=ts(n.create_time), update_time=ts(n.update_time), etag=n.etag,
        peering_count=view.peering_count)


def encode_page_token(last: str) -> str:
    return base64.urlsafe_b64encode(last.encode()).decode()


def decode_page_token(token: str) -> str:
    if not token:
        return ""
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except Exception:
        raise InvalidArgument.for_field("page_token", token, "is not a page token from a previous call") from None


def page_size(value: int) -> int:
    if value < 0:
        raise InvalidArgument.for_field("page_size", value, "must not be negative")
    return min(value or 100, 1000)


def status_to_pb(status: ServerStatus) -> pb.ServerStatus:
    def report(r) -> pb.SweepReport:
        return pb.SweepReport(expired=r.expired, repaired_rows=r.repaired_rows, errors=r.errors)
    sweeps = status.sweeps
    out = pb.ServerStatus(version=status.version, dataplane_connected=status.dataplane_connected,
                          sweeps=sweeps.sweeps, sweep_totals=report(sweeps.totals), replica=status.replica,
                          leader=status.leader, dataplane=status.dataplane)
    if sweeps.last is not None:
        out.last_sweep.CopyFrom(report(sweeps.last))
        out.last_sweep_start_time.CopyFrom(ts(sweeps.last_started))
        out.last_sweep_end_time.CopyFrom(ts(sweeps.last_finished))
    out.site = status.site
    for link in status.links:
        item = out.sites.add(site=link.site, reachable=link.reachable, last_error=link.last_error,
                             exchanges=link.exchanges, failures=link.failures, capacity=link.capacity,
                             slots_used=link.slots_used, bytes_sent=link.bytes_sent,
                             bytes_received=link.bytes_received, resyncs_sent=link.resyncs_sent,
                             resyncs_received=link.resyncs_received, pending_changes=link.pending,
                             diverged=link.diverged, items_told=link.told, items_held=link.mirrored)
        for namespace, slots in link.top_namespaces:
            item.top_namespaces.add(namespace=namespace, slots=slots)
        if link.last_ok is not None:
            item.last_ok_time.CopyFrom(ts(link.last_ok))
    return out


# ------------------------------------------------------------------ between sites
_PHASE_OF = {v: k for k, v in _PHASES.items()}


def sync_to_pb(msg: Sync) -> pb.SiteSync:
    d = msg.delta
    out = pb.SiteSync(site=msg.site, to_site=msg.to_site, ack_stream=msg.ack_stream, ack=msg.ack,
                      want_full=msg.want_full)
    delta = out.delta
    delta.stream, delta.since, delta.head, delta.full = d.stream, d.since, d.head, d.full
    delta.digest_count, delta.digest_xor = d.digest.count, d.digest.xor.to_bytes(16, "big")
    for key, item in d.items:
        if item is None:
            delta.removed.add(kind=key.kind, namespace=key.namespace, network=key.network, name=key.name)
        elif isinstance(item, ToldNetwork):
            n = delta.networks.add(namespace=item.namespace, name=item.name, uid=item.uid,
                                   prefixes=list(item.prefixes))
            if item.slot is not None:
                n.attachment = item.slot
        else:
            delta.halves.add(namespace=item.namespace, network=item.network, name=item.name,
                             remote_namespace=item.remote_namespace, remote_network=item.remote_network,
                             network_uid=item.network_uid, remote_uid=item.remote_uid,
                             create_time=ts(item.create_time), phase=_PHASES[item.phase],
                             conflicts=list(item.conflicts), ready=item.ready)
    return out


def sync_from_pb(msg: pb.SiteSync) -> Sync:
    """A ``Sync`` from the wire; its items are checked when taken in
    (``netpeer.service.sitelog``), only their shape here."""
    d = msg.delta
    if len(d.digest_xor) not in (0, 16):
        raise InvalidArgument.for_field("delta.digest_xor", len(d.digest_xor), "must be 16 bytes")
    items: list = []
    for r in d.removed:
        items.append((ItemKey(r.kind, r.namespace, r.network, r.name), None))
    for n in d.networks:
        item = ToldNetwork(n.namespace, n.name, n.uid, tuple(n.prefixes),
                           n.attachment if n.HasField("attachment") else None)
        items.append((item.key, item))
    for h in d.halves:
        if h.phase not in _PHASE_OF:
            raise InvalidArgument.for_field("delta.halves.phase", h.phase, "is not a phase")
        item = ToldHalf(h.namespace, h.network, h.name, h.remote_namespace, h.remote_network, h.network_uid,
                        h.remote_uid, h.create_time.ToDatetime(timezone.utc), _PHASE_OF[h.phase],
                        tuple(h.conflicts), h.ready)
        items.append((item.key, item))
    delta = Delta(d.stream, d.since, d.head, Digest(d.digest_count, int.from_bytes(d.digest_xor or b"", "big")),
                  tuple(items), d.full)
    return Sync(msg.site, msg.to_site, delta, msg.ack_stream, msg.ack, msg.want_full)


def token_to_pb(t: Token) -> pb.TokenInfo:
    out = pb.TokenInfo(token_id=t.token_id, namespaces=sorted(t.namespaces), admin=t.admin,
                       description=t.description, create_time=ts(t.create_time))
    if t.expires_at is not None:
        out.expires_at.CopyFrom(ts(t.expires_at))
    return out
