"""The link between the netpeerds of two sites: ``SiteService.Exchange``.

``SiteServer`` listens on ``[interconnect] listen`` and serves nothing but
SiteService (tenants never reach it, site secrets never reach the tenant
API). A caller proves its site with the secret the two sites share
(``[sites.NAME] secret_file``, compared in constant time) and, with mTLS,
a certificate whose common name is its site. ``SiteTransport`` is the
calling side: one channel per other site, TLS unless the endpoint is
loopback or a unix socket.
"""

from __future__ import annotations

import hmac
import logging
from concurrent import futures
from typing import Mapping

import grpc

from netpeer import errors
from netpeer.api import convert
from netpeer.api.errors import code_for, from_rpc_error
from netpeer.listen import check_listen, is_local_address
from netpeer.service.sites import SiteLinks, SiteView
from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc

LOG = logging.getLogger(__name__)

#: An exchange carries a whole side: allow large ones (MAX_HALVES halves).
#: Not yet bounded as the tenant API is (netpeer.api.intake): whoever reaches
#: [interconnect] listen may send messages this large before its secret is
#: checked, and one that does not parse answers INTERNAL and logs an ERROR
#: with a traceback (gRPC's own handling), once per call. Left to the
#: rework of the site link.
MAX_MESSAGE = 256 * 1024 * 1024
_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)]
# While a connection backs off, gRPC fails calls at once with the last error; its own backoff grows to 120 s,
# so a site back from a long outage would wait that long. Keep it in step with SiteLinks' retries (0.2 s to 5 s).
_CLIENT_OPTIONS = _OPTIONS + [("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
                              ("grpc.max_reconnect_backoff_ms", 5000)]


def _secret(context) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            scheme, _, secret = value.partition(" ")
            return secret.strip() if scheme.lower() == "bearer" else ""
    return ""


class _Servicer(pb_grpc.SiteServiceServicer):
    def __init__(self, links: SiteLinks, secrets: Mapping[str, str]):
        self.links = links
        self.secrets = dict(secrets)

    def _authenticate(self, request, context) -> None:
        expected = self.secrets.get(request.site, "")
        given = _secret(context)
        # Compared whether or not the site is known (a decoy): no timing oracle.
        ok = hmac.compare_digest(given.encode(), (expected or "\0" * 43).encode()) and bool(expected)
        if not ok:
            raise errors.Unauthenticated(f"site: {request.site!r} did not present this link's secret")
        names = (context.auth_context() or {}).get("x509_common_name")
        if names and request.site.encode() not in names:
            raise errors.PermissionDenied(f"site: the certificate names {names[0].decode(errors='replace')!r}, "
                                          f"not {request.site!r}", field="site", value=request.site)
        if request.to_site != self.links.here:
            raise errors.InvalidArgument.for_field("to_site", request.to_site, f"is not this site ({self.links.here})")

    def Exchange(self, request, context):
        try:
            self._authenticate(request, context)
            answer = self.links.receive(convert.site_view_from_pb(request))
            return convert.site_view_to_pb(answer, request.site)
        except errors.NetpeerError as exc:
            context.abort(code_for(exc), exc.message)
        except Exception:
            LOG.exception("site exchange from %r failed", request.site)
            context.abort(grpc.StatusCode.INTERNAL, "internal error; see the netpeerd log")


class SiteServer:
    """Serves SiteService on ``address`` (TLS unless loopback or unix)."""

    def __init__(self, links: SiteLinks, address: str, secrets: Mapping[str, str], *, cert: bytes | None = None,
                 key: bytes | None = None, ca: bytes | None = None, workers: int = 4):
        check_listen(address, tls=cert is not None, field="interconnect.listen",
                     remedy="configure [interconnect] cert and key")
        self.address = address
        self._server = grpc.server(futures.ThreadPoolExecutor(workers, thread_name_prefix="site-rpc"),
                                   options=_OPTIONS)
        pb_grpc.add_SiteServiceServicer_to_server(_Servicer(links, secrets), self._server)
        if cert is not None:
            creds = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)
            self.port = self._server.add_secure_port(address, creds)
        else:
            self.port = self._server.add_insecure_port(address)
        if not address.startswith("unix:") and self.port == 0:
            raise errors.InvalidArgument.for_field("interconnect.listen", address, "cannot be listened on")

    def start(self) -> "SiteServer":
        self._server.start()
        return self

    def stop(self, grace: float = 1.0) -> None:
        self._server.stop(grace).wait(grace + 5)


class SiteTransport:
    """Calls the other sites' SiteService: ``(site, our view) -> theirs``."""

    def __init__(self, here: str, endpoints: Mapping[str, str], secrets: Mapping[str, str], *,
                 cert: bytes | None = None, key: bytes | None = None, ca: Mapping[str, bytes | None] | None = None,
                 timeout: float = 10.0):
        self.here = here
        self.timeout = timeout
        self.secrets = dict(secrets)
        self._stubs = {}
        self._channels = []
        for site, endpoint in endpoints.items():
            target = endpoint if endpoint.startswith("unix:") else endpoint
            if is_local_address(endpoint):
                channel = grpc.insecure_channel(target, options=_CLIENT_OPTIONS)
            else:
                creds = grpc.ssl_channel_credentials(root_certificates=(ca or {}).get(site), private_key=key,
                                                     certificate_chain=cert)
                channel = grpc.secure_channel(target, creds, options=_CLIENT_OPTIONS)
            self._channels.append(channel)
            self._stubs[site] = pb_grpc.SiteServiceStub(channel)

    def __call__(self, site: str, view: SiteView) -> SiteView:
        try:
            answer = self._stubs[site].Exchange(convert.site_view_to_pb(view, site), timeout=self.timeout,
                                                metadata=(("authorization", f"Bearer {self.secrets[site]}"),))
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        return convert.site_view_from_pb(answer)

    def close(self) -> None:
        for channel in self._channels:
            channel.close()


__all__ = ["SiteServer", "SiteTransport", "pb"]
