"""The gRPC server: NetworkService, TokenService and StatusService, plus the
standard health and reflection services so grpcurl and load balancers work.

An asyncio server (``grpc.aio``) in a thread of its own: a stream that sits
idle (reflection, health, later watches) costs a coroutine, never a thread,
so no number of idle or slow streams, authenticated or not, can take the
capacity the tenants' calls need. The blocking work of a call (the store,
OVN) runs on worker pools, reads and writes apart: writers blocked on a
frozen OVN database fill only the write pool, and reads (authentication
included) go on at their usual speed (tests/trust/test_exposure.py). HTTP/2
limits bound what one connection may hold (streams, idle time, age).
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import socket
import threading
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from netpeer import errors
from netpeer.api.errors import code_for
from netpeer.api.servicers import READ, WRITE, NetworkHandlers, StatusHandlers, TokenHandlers
from netpeer.service import Service
from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc

LOG = logging.getLogger(__name__)

SERVICES = ("netpeer.v1.NetworkService", "netpeer.v1.TokenService", "netpeer.v1.StatusService")


@dataclasses.dataclass(frozen=True)
class Limits:
    """Capacity and HTTP/2 limits of the server."""

    read_workers: int = 16            # threads for reads and authentication
    write_workers: int = 16           # threads for writes (they serialize in the write queue anyway)
    streams_per_connection: int = 128  # concurrent calls one connection may hold
    connection_idle_s: int = 300      # a connection without calls is closed after this
    connection_age_s: int = 3600      # every connection is closed (GOAWAY) after this ...
    connection_age_grace_s: int = 60  # ... leaving its calls this long to finish
    keepalive_s: int = 60             # the server pings idle connections this often
    max_message_bytes: int = 4 << 20

    def options(self) -> list[tuple[str, int]]:
        return [("grpc.max_concurrent_streams", self.streams_per_connection),
                ("grpc.max_connection_idle_ms", self.connection_idle_s * 1000),
                ("grpc.max_connection_age_ms", self.connection_age_s * 1000),
                ("grpc.max_connection_age_grace_ms", self.connection_age_grace_s * 1000),
                ("grpc.keepalive_time_ms", self.keepalive_s * 1000),
                ("grpc.keepalive_timeout_ms", 20_000),
                ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
                ("grpc.max_receive_message_length", self.max_message_bytes),
                ("grpc.max_send_message_length", self.max_message_bytes)]


def _token(context) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


class _Pools:
    def __init__(self, limits: Limits):
        self.read = futures.ThreadPoolExecutor(limits.read_workers, thread_name_prefix="rpc-read")
        self.write = futures.ThreadPoolExecutor(limits.write_workers, thread_name_prefix="rpc-write")

    def of(self, kind: str) -> futures.ThreadPoolExecutor:
        return self.write if kind == WRITE else self.read

    def shutdown(self) -> None:
        self.read.shutdown(wait=False, cancel_futures=True)
        self.write.shutdown(wait=False, cancel_futures=True)


def _unary(service: Service, pools: _Pools, kind: str, fn):
    """An async gRPC method: authenticates on the read pool, runs ``fn`` on
    the pool of its kind, and maps every netpeer error to its status code;
    anything else is logged and answered INTERNAL."""

    async def method(self, request, context):
        loop = asyncio.get_running_loop()
        try:
            caller = await loop.run_in_executor(pools.read, service.authenticate, _token(context))
            remaining = context.time_remaining()
            if remaining is not None and remaining <= 0:
                # Queued behind others until the caller gave up: do not act on it any more.
                await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded before the call ran")
            return await loop.run_in_executor(pools.of(kind), fn, request, caller)
        except errors.NetpeerError as exc:
            await context.abort(code_for(exc), exc.message)
        except Exception:
            LOG.exception("internal error in %s", fn.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the netpeerd log")

    method.__name__ = fn.__name__
    return method


def _servicer(base: type, handlers: object, service: Service, pools: _Pools):
    """An instance of the generated servicer ``base`` whose methods are the
    handlers of ``handlers``."""
    methods = {}
    for name in dir(handlers):
        fn = getattr(handlers, name)
        kind = getattr(fn, "netpeer_kind", None)
        if kind in (READ, WRITE):
            methods[name] = _unary(service, pools, kind, fn)
    return type(base.__name__, (base,), methods)()


def is_local_address(address: str) -> bool:
    """Unix sockets, and addresses whose host resolves to loopback only, may
    run without TLS. The check is on the resolved addresses, never on the
    spelling: ``127.0.0.1.evil.example`` resolving elsewhere is not loopback."""
    if address.startswith("unix:"):
        return True
    host = address.rsplit(":", 1)[0].strip("[]")
    if not host:
        return False
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return False
    resolved = {info[4][0] for info in infos}
    return bool(resolved) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in resolved)


def check_listen(address: str, tls: bool) -> None:
    """Refuses a plaintext listener anywhere but loopback or a unix socket."""
    if not tls and not is_local_address(address):
        raise errors.InvalidArgument.for_field(
            "listen", address, "is not loopback or a unix socket: configure [tls] cert and key")


class Server:
    """netpeerd's gRPC server, serving from an event loop in its own thread.
    ``port`` is the bound TCP port (0 for unix sockets)."""

    def __init__(self, service: Service, address: str, *, tls_cert: bytes | None = None,
                 tls_key: bytes | None = None, client_ca: bytes | None = None, limits: Limits = Limits()):
        check_listen(address, tls=tls_cert is not None)
        self.service = service
        self.address = address
        self.limits = limits
        self._pools = _Pools(limits)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="grpc-aio", daemon=True)
        self._thread.start()
        try:
            self.port = self._call(self._build(tls_cert, tls_key, client_ca))
        except BaseException:
            self._close_loop()
            raise

    def _call(self, coro, timeout: float | None = 30):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _build(self, tls_cert, tls_key, client_ca) -> int:
        self._server = grpc.aio.server(options=self.limits.options())
        for base, adder, handlers in (
                (pb_grpc.NetworkServiceServicer, pb_grpc.add_NetworkServiceServicer_to_server, NetworkHandlers),
                (pb_grpc.TokenServiceServicer, pb_grpc.add_TokenServiceServicer_to_server, TokenHandlers),
                (pb_grpc.StatusServiceServicer, pb_grpc.add_StatusServiceServicer_to_server, StatusHandlers)):
            adder(_servicer(base, handlers(self.service), self.service, self._pools), self._server)
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        for name in ("",) + SERVICES:
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        reflection.enable_server_reflection(
            SERVICES + (health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
            self._server)
        if tls_cert is not None:
            creds = grpc.ssl_server_credentials([(tls_key, tls_cert)], root_certificates=client_ca,
                                                require_client_auth=client_ca is not None)
            return self._server.add_secure_port(self.address, creds)
        return self._server.add_insecure_port(self.address)

    def start(self) -> "Server":
        self._call(self._server.start())
        return self

    def set_serving(self, serving: bool) -> None:
        """What the standard health service answers for netpeer's services."""
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING

        async def update():
            for name in ("",) + SERVICES:
                await self.health.set(name, status)
        self._call(update())

    def stop(self, grace: float = 2.0) -> threading.Event:
        """Stops serving (calls in flight get ``grace`` seconds); returns a set Event."""
        try:
            self._call(self._server.stop(grace), timeout=grace + 30)
        finally:
            self._pools.shutdown()
            self._close_loop()
        done = threading.Event()
        done.set()
        return done

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._loop.is_running():
            self._loop.close()


def build_server(service: Service, address: str, *, tls_cert: bytes | None = None, tls_key: bytes | None = None,
                 client_ca: bytes | None = None, limits: Limits = Limits()) -> tuple[Server, int]:
    """A bound (not yet started) server on ``address`` and its port (0 for unix sockets)."""
    server = Server(service, address, tls_cert=tls_cert, tls_key=tls_key, client_ca=client_ca, limits=limits)
    return server, server.port


__all__ = ["Server", "Limits", "build_server", "check_listen", "is_local_address", "pb"]
