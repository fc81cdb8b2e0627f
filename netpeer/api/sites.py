"""The link between the netpeerds of two sites: ``SiteService.Sync``.

``SiteServer`` listens on ``[interconnect] listen`` and serves nothing but
SiteService (tenants never reach it, site secrets never reach the tenant
API). A caller names its site in the call's metadata and proves it with
the secret the two sites share (``[sites.NAME] secret_file``, compared in
constant time), checked before its request is read, and, with mTLS, a
certificate whose common name is its site. ``SiteTransport`` is the
calling side: channels per other site (one per replica it lists), TLS
whenever this site has a certificate, else unless the endpoint is loopback
or a unix socket.
"""

from __future__ import annotations

import hmac
import logging
import threading
from concurrent import futures
from typing import Callable, Mapping

import grpc

from netpeer import errors
from netpeer.api import convert, intake
from netpeer.api.errors import abort, decode, from_rpc_error
from netpeer.core.sides import Sync
from netpeer.listen import check_listen, is_local_address
from netpeer.reasons import Reason
from netpeer.service.sites import SiteLinks
from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc

LOG = logging.getLogger(__name__)

#: An exchange carries changes, a few items each; a full copy of a large side
#: (after a long absence, or a mismatch) carries every item (sitelog.MAX_ITEMS).
MAX_MESSAGE = 256 * 1024 * 1024
_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)]
# While a connection backs off, gRPC fails calls at once with the last error; its own backoff grows to 120 s,
# so a site back from a long outage would wait that long. Keep it in step with SiteLinks' retries (0.2 s to 5 s).
_CLIENT_OPTIONS = _OPTIONS + [("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
                              ("grpc.max_reconnect_backoff_ms", 5000)]


#: The caller's site, in the metadata: the secret is checked before the request is read.
SITE_KEY = "x-netpeer-site"
SYNC = "/netpeer.v1.SiteService/Sync"


def _metadata(pairs, key: str) -> str:
    for k, value in pairs or ():
        if k == key:
            return value
    return ""


def _bearer(pairs) -> str:
    scheme, _, secret = _metadata(pairs, "authorization").partition(" ")
    return secret.strip() if scheme.lower() == "bearer" else ""


class _Servicer:
    """SiteService. A call is judged on its metadata first (the calling site
    and its secret): a caller without the link's secret, or from a site this
    one is not linked to, is answered without its request being parsed; a
    request that does not parse answers INVALID_ARGUMENT in one line (logged
    at most once a minute), never INTERNAL with a traceback."""

    def __init__(self, links: SiteLinks, secrets: Mapping[str, str]):
        self.links = links
        self.secrets = dict(secrets)
        self.refusals = intake.Sparse("refused site link requests")

    def gate(self, pairs, auth_context) -> errors.NetpeerError | None:
        """Why a call may not go on, from its metadata alone (None: it may)."""
        site = _metadata(pairs, SITE_KEY)
        expected = self.secrets.get(site, "")
        # Compared whether or not the site is known (a decoy): no timing oracle.
        ok = hmac.compare_digest(_bearer(pairs).encode(), (expected or "\0" * 43).encode()) and bool(expected)
        if not expected:
            try:
                self.links.check_linked(site)   # a link configured on the other side only: say so
            except errors.NetpeerError as exc:
                return exc
        if not ok:
            return errors.Unauthenticated(f"site: {site!r} did not present this link's secret",
                                          reason=Reason.SITE_UNAUTHENTICATED)
        names = (auth_context or {}).get("x509_common_name")
        if names and site.encode() not in names:
            return errors.PermissionDenied(f"site: the certificate names {names[0].decode(errors='replace')!r}, "
                                           f"not {site!r}", field="site", value=site, reason=Reason.SITE_DENIED)
        return None

    def Sync(self, request, context):
        pairs = context.invocation_metadata()
        refused = self.gate(pairs, context.auth_context())
        if refused is None and isinstance(request, intake.Refused):
            refused = request.error
        if refused is not None:
            self.refusals.note(f"{context.peer()}: {refused.message}")
            abort(context, refused)
        try:
            if request.site != _metadata(pairs, SITE_KEY):
                raise errors.PermissionDenied(f"site: the request names {request.site!r}, its call "
                                              f"{_metadata(pairs, SITE_KEY)!r}", field="site", value=request.site,
                                              reason=Reason.SITE_DENIED)
            if request.to_site != self.links.here:
                raise errors.InvalidArgument.for_field("to_site", request.to_site,
                                                       f"is not this site ({self.links.here})")
            answer = convert.sync_to_pb(self.links.receive(convert.sync_from_pb(request)))
            self.links.count(request.site, answer.ByteSize(), request.ByteSize())
            return answer
        except errors.NetpeerError as exc:
            abort(context, exc)
        except Exception:
            LOG.exception("site exchange from %r failed", getattr(request, "site", "?"))
            abort(context, errors.NetpeerError("internal error; see the netpeerd log", reason=Reason.INTERNAL))


class _Gate(grpc.ServerInterceptor):
    """Answers a call that its metadata already refuses without reading its
    request (``_Servicer.gate``)."""

    def __init__(self, servicer: _Servicer):
        self.servicer = servicer

    def intercept_service(self, continuation, details):
        # No auth context here: the certificate check waits for the method (the request is read by then).
        refused = self.servicer.gate(details.invocation_metadata, None)
        if refused is None:
            return continuation(details)
        servicer = self.servicer

        def deny(request, context):
            servicer.refusals.note(f"{context.peer()}: {refused.message}")
            abort(context, refused)
        # (a deserializer that returns None counts as one that failed: it returns the refusal instead)
        return grpc.unary_unary_rpc_method_handler(deny, request_deserializer=lambda data: refused)


class SiteServer:
    """Serves SiteService on ``address`` (TLS unless loopback or unix).

    With TLS, each handshake takes the certificate, key and CA last given
    (``set_credentials``): a renewed certificate is presented from the next
    connection on, without a restart; connections already made keep theirs."""

    def __init__(self, links: SiteLinks, address: str, secrets: Mapping[str, str], *, cert: bytes | None = None,
                 key: bytes | None = None, ca: bytes | None = None, workers: int = 4):
        check_listen(address, tls=cert is not None, field="interconnect.listen",
                     remedy="configure [interconnect] cert and key")
        self.address = address
        self._servicer = _Servicer(links, secrets)
        self._server = grpc.server(futures.ThreadPoolExecutor(workers, thread_name_prefix="site-rpc"),
                                   options=_OPTIONS, interceptors=[_Gate(self._servicer)])
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("netpeer.v1.SiteService", {
            "Sync": grpc.unary_unary_rpc_method_handler(
                self._servicer.Sync, request_deserializer=intake.parser(SYNC, pb.SiteSync.FromString, MAX_MESSAGE),
                response_serializer=pb.SiteSync.SerializeToString)}),))
        self.tls = cert is not None
        self._lock = threading.Lock()
        self._credentials: tuple | None = None
        self._pending = None
        if cert is not None:
            self._credentials = (cert, key, ca)
            creds = grpc.dynamic_ssl_server_credentials(_server_config(cert, key, ca), self._fetch,
                                                        require_client_authentication=ca is not None)
            self.port = self._server.add_secure_port(address, creds)
        else:
            self.port = self._server.add_insecure_port(address)
        if not address.startswith("unix:") and self.port == 0:
            raise errors.InvalidArgument.for_field("interconnect.listen", address, "cannot be listened on")

    def _fetch(self):
        """gRPC asks at every handshake: a new configuration once, else None (keep)."""
        with self._lock:
            pending, self._pending = self._pending, None
            return pending

    def set_credentials(self, cert: bytes, key: bytes, ca: bytes | None) -> bool:
        """The certificate, key and CA of the handshakes from now on (TLS
        listeners only; whether a CA is required cannot change: that takes a
        restart). Whether they differ from those in use."""
        if not self.tls:
            raise errors.FailedPrecondition("interconnect: this listener has no TLS; a restart turns it on",
                                            reason=Reason.FAILED_PRECONDITION)
        with self._lock:
            if (cert, key, ca) == self._credentials:
                return False
            self._credentials = (cert, key, ca)
            self._pending = _server_config(cert, key, ca)
            return True

    def start(self) -> "SiteServer":
        self._server.start()
        return self

    def set_secrets(self, secrets: Mapping[str, str]) -> None:
        """The sites that may call, and their secrets (a running region's links change)."""
        self._servicer.secrets = dict(secrets)

    def stop(self, grace: float = 1.0) -> None:
        self._server.stop(grace).wait(grace + 5)


def _server_config(cert: bytes, key: bytes, ca: bytes | None):
    return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)


class SiteTransport:
    """Calls the other sites' SiteService: ``(site, our message) -> theirs``.

    TLS whenever this site has a certificate (mTLS: the other site checks
    it), else unless the endpoint is loopback or a unix socket. An endpoint
    may list a site's replicas, comma-separated: a call goes to the one that
    last answered and, if it cannot be reached, to the next."""

    def __init__(self, here: str, endpoints: Mapping[str, str], secrets: Mapping[str, str], *,
                 cert: bytes | None = None, key: bytes | None = None, ca: Mapping[str, bytes | None] | None = None,
                 timeout: float = 10.0, counter: Callable[[str, int, int], None] = lambda site, sent, received: None):
        """``counter``: told the bytes of each exchange (site, sent, received)."""
        self.here = here
        self.counter = counter
        self.timeout = timeout
        self._cert, self._key = cert, key
        self.secrets: dict[str, str] = {}
        self._stubs: dict[str, list] = {}
        self._channels: dict = {}     # site -> (endpoint, ca, channels: one per address)
        self._first: dict[str, int] = {}
        self.reconfigure(endpoints, secrets, ca)

    def _channel(self, target: str, site_ca: bytes | None):
        if self._cert is None and is_local_address(target):
            return grpc.insecure_channel(target, options=_CLIENT_OPTIONS)
        creds = grpc.ssl_channel_credentials(root_certificates=site_ca, private_key=self._key,
                                             certificate_chain=self._cert)
        # A unix socket has no host name to check the certificate against: "localhost" stands for it.
        local = [("grpc.ssl_target_name_override", "localhost")] if target.startswith("unix:") else []
        return grpc.secure_channel(target, creds, options=_CLIENT_OPTIONS + local)

    def reconfigure(self, endpoints: Mapping[str, str], secrets: Mapping[str, str],
                    ca: Mapping[str, bytes | None] | None = None, *, cert: bytes | None = None,
                    key: bytes | None = None) -> None:
        """Channels to exactly these sites: new ones opened, changed ones
        replaced (all of them for a new certificate and key of this site,
        when given), those no longer listed closed: once a call in flight
        on them has had its time (closing cancels it, and its link would
        count the site unreachable for a moment)."""
        renewed = cert is not None and (cert, key) != (self._cert, self._key)
        if renewed:
            self._cert, self._key = cert, key
        kept, closing = {}, []
        for site, (endpoint, site_ca, channels) in self._channels.items():
            if not renewed and endpoints.get(site) == endpoint and (ca or {}).get(site) == site_ca:
                kept[site] = (endpoint, site_ca, channels)
            else:
                closing += channels
        stubs = {site: self._stubs[site] for site in kept}
        for site, endpoint in endpoints.items():
            if site in kept:
                continue
            site_ca = (ca or {}).get(site)
            channels = [self._channel(t.strip(), site_ca) for t in endpoint.split(",") if t.strip()]
            kept[site] = (endpoint, site_ca, channels)
            stubs[site] = [pb_grpc.SiteServiceStub(c) for c in channels]
            self._first[site] = 0
        self.secrets = dict(secrets)
        self._stubs, self._channels = stubs, kept
        if closing:
            later = threading.Timer(self.timeout + 1, lambda: [channel.close() for channel in closing])
            later.daemon = True
            later.start()

    def __call__(self, site: str, msg: Sync) -> Sync:
        request = convert.sync_to_pb(msg)
        stubs = self._stubs[site]
        first = self._first.get(site, 0) % len(stubs)
        for i in range(len(stubs)):
            k = (first + i) % len(stubs)
            try:
                answer = stubs[k].Sync(request, timeout=self.timeout,
                                       metadata=(("authorization", f"Bearer {self.secrets[site]}"),
                                                 (SITE_KEY, self.here)))
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    raise errors.FailedPrecondition(f"site {site} runs a netpeer without SiteService.Sync: every "
                                                    "site of a region needs the same link protocol; upgrade it",
                                                    reason=Reason.SITE_UNSUPPORTED) \
                        from None
                if exc.code() == grpc.StatusCode.UNAVAILABLE and i + 1 < len(stubs):
                    continue   # that replica is down: the next one
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) \
                        and decode(exc) is None:   # gRPC's, not the other netpeerd's
                    raise errors.Unavailable(f"site {site} did not answer ({exc.code().name}: "
                                             f"{(exc.details() or '').splitlines()[0] if exc.details() else ''})",
                                             reason=Reason.REMOTE_SITE_UNREACHABLE) from None
                raise from_rpc_error(exc) from None
            self._first[site] = k
            self.counter(site, request.ByteSize(), answer.ByteSize())
            return convert.sync_from_pb(answer)
        raise AssertionError("unreachable")

    def close(self) -> None:
        for _, _, channels in self._channels.values():
            for channel in channels:
                channel.close()


__all__ = ["SiteServer", "SiteTransport", "pb"]
