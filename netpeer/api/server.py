"""The gRPC server: NetworkService, TokenService and StatusService, plus the
standard health and reflection services so grpcurl and load balancers work.

An asyncio server (``grpc.aio``) in a thread of its own: a stream that sits
idle (reflection, health, watches) costs a coroutine, never a thread,
so no number of idle or slow streams, authenticated or not, can take the
capacity the tenants' calls need. The blocking work of a call (the store,
OVN) runs on worker pools, reads and writes apart: writers blocked on a
frozen OVN database fill only the write pool, and reads (authentication
included) go on at their usual speed (tests/trust/test_exposure.py). HTTP/2
limits bound what one connection may hold (streams, idle time, age).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
import threading
import time
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from netpeer import errors
from netpeer.api import convert, intake
from netpeer.api.errors import internal, status_of
from netpeer.api.servicers import READ, WRITE, NetworkHandlers, StatusHandlers, TokenHandlers
from netpeer.api.watch import EncodedWatch, Watches
from netpeer.core.models import WatchLimits
from netpeer.listen import check_listen, is_local_address
from netpeer.observe import logs
from netpeer.observe.metrics import NONE
from netpeer.reasons import Reason
from netpeer.service import Service
from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc

LOG = logging.getLogger(__name__)

#: A refusal that says when to retry (``ResourceExhausted.retry_after``) is
#: answered after that long, at most this long (s), or just before the
#: caller's deadline.
REFUSAL_DELAY_S = 1.0

SERVICES = ("netpeer.v1.NetworkService", "netpeer.v1.TokenService", "netpeer.v1.StatusService")


@dataclasses.dataclass(frozen=True)
class Limits:
    """Capacity and HTTP/2 limits of the server."""

    read_workers: int = 16            # threads for reads and authentication
    # Threads for writes. They serialize in the write queue anyway, and the writes waiting there are what
    # one group commit is made of: as many as a group may hold (WriteQueue.max_group). 16 kept groups at
    # about 8 under 32 concurrent writers (measured: 1,000 binds 10.0 -> 8.9 s with 64, docs/performance-log.md).
    write_workers: int = 64
    streams_per_connection: int = 128  # concurrent calls one connection may hold
    connection_idle_s: int = 300      # a connection without calls is closed after this
    connection_age_s: int = 3600      # every connection is closed (GOAWAY) after this ...
    connection_age_grace_s: int = 60  # ... leaving its calls this long to finish
    keepalive_s: int = 60             # the server pings idle connections this often
    # The most a request may weigh (bytes): request_bytes, or what larger_requests names for its method;
    # each above the largest request the method can legitimately be sent (names of 63 characters,
    # descriptions of 1,024 characters of 4 bytes, 16 subnets and 256 routes, 1,000 requests in a batch:
    # tests/unit/test_intake.py builds them). A larger request is refused unparsed (netpeer.api.intake).
    request_bytes: int = 4 << 10                                         # the others: at most 253 bytes
    larger_requests: tuple[tuple[str, int], ...] = (
        ("/netpeer.v1.NetworkService/CreateNetwork", 64 << 10),          # at most 27.7 KB
        ("/netpeer.v1.NetworkService/UpdateNetwork", 64 << 10),          # 27.6 KB
        ("/netpeer.v1.NetworkService/CreatePeering", 12 << 10),          # 4.5 KB
        ("/netpeer.v1.NetworkService/UpdatePeering", 12 << 10),          # 5.1 KB (a Peering as read)
        ("/netpeer.v1.NetworkService/BatchCreatePeerings", 6 << 20),     # 4.5 MB
        ("/netpeer.v1.NetworkService/AcceptPeeringRequest", 12 << 10),   # 4.4 KB (a description and a ttl)
        ("/netpeer.v1.TokenService/CreateToken", 128 << 10))             # 69 KB with 1,000 namespaces
    # The most one answer may weigh (a batch of 1,000 peerings: 5.1 MB; a network with 500 Bound peers
    # of 272 prefixes each: 6.3 MB); a larger one is an error of one line (RESOURCE_EXHAUSTED), never sent.
    answer_bytes: int = intake.ANSWER_BYTES

    def request_limit(self, method: str) -> int:
        """The most a request of ``method`` (``/package.Service/Method``) may weigh."""
        return dict(self.larger_requests).get(method, self.request_bytes)

    def options(self) -> list[tuple[str, int]]:
        # gRPC's own limits are the last resort: above the largest request any method takes, gRPC
        # refuses it without reading it (RESOURCE_EXHAUSTED, not counted in the metrics).
        largest = max([self.request_bytes] + [limit for _, limit in self.larger_requests])
        return [("grpc.max_concurrent_streams", self.streams_per_connection),
                ("grpc.max_connection_idle_ms", self.connection_idle_s * 1000),
                ("grpc.max_connection_age_ms", self.connection_age_s * 1000),
                ("grpc.max_connection_age_grace_ms", self.connection_age_grace_s * 1000),
                ("grpc.keepalive_time_ms", self.keepalive_s * 1000),
                ("grpc.keepalive_timeout_ms", 20_000),
                ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
                ("grpc.max_receive_message_length", largest),
                ("grpc.max_send_message_length", self.answer_bytes)]


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


async def abort(context, status: tuple[grpc.StatusCode, str, tuple], trailer) -> None:
    """Ends the call with ``status`` (``netpeer.api.errors.status_of``;
    raises ``AbortError``, as ``context.abort`` does). A caller that already gave up (its deadline passed while the call
    waited) leaves no one to send the status to: gRPC then fails the send,
    which is no error of netpeerd's, and the call ends as cancelled."""
    try:
        code, message, details = status
        await context.abort(code, message, trailing_metadata=tuple(trailer) + details)
    except grpc.aio.AbortError:
        raise
    except Exception:
        raise asyncio.CancelledError() from None


def _unary(service: Service, pools: _Pools, kind: str, fn, metrics, limits: Limits, oversize: intake.Sparse):
    """An async gRPC method: authenticates on the read pool, runs ``fn`` on
    the pool of its kind, and maps every netpeer error to its status code;
    anything else is logged and answered INTERNAL. An answer larger than
    ``limits.answer_bytes`` is not sent: RESOURCE_EXHAUSTED. Every answer
    carries the call's request id in its trailing metadata; its logs carry
    it too. Errors end the call without raising (``intake.fail``)."""

    def answer(request, caller):   # sized where it was made, off the event loop
        out = fn(request, caller)
        return out, out.ByteSize()

    async def method(self, request, context):
        loop = asyncio.get_running_loop()
        rid = logs.new_request_id(intake.metadata(context, logs.REQUEST_ID_KEY))
        logs.request_id.set(rid)
        trailer = ((logs.REQUEST_ID_KEY, rid),)
        started, code = time.perf_counter(), "OK"

        def run(pool, call, *args):   # the executor thread sees the request id too
            return loop.run_in_executor(pool, contextvars.copy_context().run, call, *args)
        try:
            try:
                caller = await run(pools.read, service.authenticate, _token(context))
                remaining = context.time_remaining()
                if remaining is not None and remaining <= 0:
                    # Queued behind others until the caller gave up: do not act on it any more.
                    status = status_of(errors.Unavailable("deadline exceeded before the call ran",
                                                          reason=Reason.DEADLINE_EXCEEDED),
                                       grpc.StatusCode.DEADLINE_EXCEEDED)
                else:
                    out, size = await run(pools.of(kind), answer, request, caller)
                    if size <= limits.answer_bytes:
                        context.set_trailing_metadata(trailer)
                        return out
                    message = (f"answer: {size:,} bytes is more than netpeerd sends in one answer "
                               f"({limits.answer_bytes:,} bytes at most)"
                               + ("; the call itself was carried out" if kind == WRITE else ""))
                    status = status_of(errors.ResourceExhausted(message, field="answer", value=size,
                                                                reason=Reason.ANSWER_TOO_LARGE))
                    oversize.note(f"{fn.__name__}: {message} [request {rid}]")
            except errors.NetpeerError as exc:
                status = status_of(exc)
                delay = getattr(exc, "retry_after", None)
                if delay:
                    # A budget's refusal (netpeer.service.budget) is answered after a while, on this loop: a
                    # client that calls again at once, whatever it is told, costs netpeerd a timer, not a core.
                    remaining = context.time_remaining()
                    await asyncio.sleep(max(0.0, min(delay, REFUSAL_DELAY_S,
                                                     remaining if remaining else delay) - 0.05))
            except asyncio.CancelledError:
                code = "CANCELLED"
                raise
            except Exception:
                LOG.exception("internal error in %s", fn.__name__)
                status = internal(f"internal error; see the netpeerd log (request id {rid})")
            code = status[0].name
            intake.fail(context, status, trailer)
        finally:
            metrics.rpc(fn.__name__, code, time.perf_counter() - started)

    method.__name__ = fn.__name__
    return method


def _watch(service: Service, pools: _Pools, watches: Watches, metrics):
    """The Watch stream. The call is authenticated, parsed and authorized
    before anything is kept for it (a refused call holds nothing); then
    ``watches`` admits it within its caps and hands it events already
    encoded (``netpeer.api.watch``). Counted in the RPC metrics when it ends."""

    async def serve(request, token: str | None):
        caller = await asyncio.get_running_loop().run_in_executor(
            pools.read, contextvars.copy_context().run, service.authenticate, token)
        ns, network = convert.parse_watch_parent(request.parent)
        since = request.since_revision if request.HasField("since_revision") else None
        if since is not None and since < 0:
            raise errors.InvalidArgument.for_field("since_revision", since, "must be a revision (0 or more)")
        service.check_watch(caller, ns, network)
        async with contextlib.aclosing(watches.stream(caller, token, ns, network, since)) as stream:
            async for message in stream:
                yield message

    async def Watch(request, context):
        rid = logs.new_request_id(intake.metadata(context, logs.REQUEST_ID_KEY))
        logs.request_id.set(rid)
        code, failure = "OK", None
        try:
            async with contextlib.aclosing(serve(request, _token(context))) as stream:
                async for message in stream:
                    yield message
        except errors.NetpeerError as exc:
            failure = status_of(exc)
        except (asyncio.CancelledError, GeneratorExit):
            code = "CANCELLED"
            raise
        except Exception:
            LOG.exception("internal error in Watch")
            failure = internal(f"internal error; see the netpeerd log (request id {rid})")
        finally:
            metrics.stream_ended("Watch", failure[0].name if failure else code)
        if failure is None:
            return
        # gRPC keeps an abort's exception, and with it this frame, in a cycle
        # of references until a full collection, which a busy netpeerd seldom
        # makes: the request (up to 4 MB) must not be in the frame then (a
        # flood of invalid watches grew netpeerd by 8 MB a call).
        del request
        await abort(context, failure, ((logs.REQUEST_ID_KEY, rid),))

    return Watch


def _servicer(base: type, handlers: object, service: Service, pools: _Pools, metrics, limits: Limits,
              oversize: intake.Sparse):
    """An instance of the generated servicer ``base`` whose methods are the
    handlers of ``handlers`` (Watch apart: ``EncodedWatch``)."""
    methods = {}
    for name in dir(handlers):
        fn = getattr(handlers, name)
        kind = getattr(fn, "netpeer_kind", None)
        if kind in (READ, WRITE):
            methods[name] = _unary(service, pools, kind, fn, metrics, limits, oversize)
    return type(base.__name__, (base,), methods)()


class Server:
    """netpeerd's gRPC server, serving from an event loop in its own thread.
    ``port`` is the bound TCP port (0 for unix sockets)."""

    def __init__(self, service: Service, address: str, *, tls_cert: bytes | None = None,
                 tls_key: bytes | None = None, client_ca: bytes | None = None, limits: Limits = Limits(),
                 metrics=NONE, watch: WatchLimits = WatchLimits(), private: str | None = None):
        check_listen(address, tls=tls_cert is not None)
        #: A unix socket (``unix:///PATH`` in a directory only this process
        #: may enter) served without TLS besides ``address``: the web
        #: console's way in, with its callers' tokens like any client.
        self.private = private
        self.service = service
        self.metrics = metrics
        self.address = address
        self.limits = limits
        self._pools = _Pools(limits)
        self.watches = Watches(service, self._pools.read, watch)
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
        # Every request of every service passes the intake first (sizes, malformed requests).
        self.intake = intake.Intake(self.limits.request_limit, self.metrics)
        oversize = intake.Sparse("answers larger than netpeerd sends")
        self._server = grpc.aio.server(options=self.limits.options(), interceptors=[self.intake])
        for base, adder, handlers in (
                (pb_grpc.NetworkServiceServicer, pb_grpc.add_NetworkServiceServicer_to_server, NetworkHandlers),
                (pb_grpc.TokenServiceServicer, pb_grpc.add_TokenServiceServicer_to_server, TokenHandlers),
                (pb_grpc.StatusServiceServicer, pb_grpc.add_StatusServiceServicer_to_server, StatusHandlers)):
            target = self._server
            if base is pb_grpc.NetworkServiceServicer:   # Watch's messages are encoded once, for every watcher
                target = EncodedWatch(target, _watch(self.service, self._pools, self.watches, self.metrics))
            adder(_servicer(base, handlers(self.service), self.service, self._pools, self.metrics, self.limits,
                            oversize), target)
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        for name in ("",) + SERVICES:   # until the first health check says otherwise
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        reflection.enable_server_reflection(
            SERVICES + (health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
            self._server)
        if self.private is not None:
            self._server.add_insecure_port(self.private)
        if tls_cert is not None:
            creds = grpc.ssl_server_credentials([(tls_key, tls_cert)], root_certificates=client_ca,
                                                require_client_auth=client_ca is not None)
            return self._server.add_secure_port(self.address, creds)
        return self._server.add_insecure_port(self.address)

    async def _check_health(self, serving: bool | None) -> bool:
        """Sets the health service's answer from ``Service.health``; the new state."""
        loop = asyncio.get_running_loop()
        try:
            now, why = await loop.run_in_executor(self._pools.read, self.service.health)
        except Exception as exc:
            now, why = False, str(exc)
        if now != serving:
            status = health_pb2.HealthCheckResponse.SERVING if now else health_pb2.HealthCheckResponse.NOT_SERVING
            for name in ("",) + SERVICES:
                await self.health.set(name, status)
            if serving is not None or not now:
                (LOG.info if now else LOG.warning)("health: %s", "SERVING" if now else f"NOT_SERVING ({why})")
        self.ready = bool(now)
        return now

    async def _watch_health(self, serving: bool) -> None:
        """Serves NOT_SERVING while the store or OVN does not answer or the
        start-up sweep has not completed; back to SERVING by itself."""
        while True:
            await asyncio.sleep(self.HEALTH_INTERVAL)
            serving = await self._check_health(serving)

    #: How often the health status is re-checked (s).
    HEALTH_INTERVAL = 0.5
    ready = False

    def start(self) -> "Server":
        self._call(self._server.start())
        serving = self._call(self._check_health(None))   # answered right from the start
        self._health_task = asyncio.run_coroutine_threadsafe(self._watch_health(serving), self._loop)
        notifier = self.watches.notifier
        self._poke = lambda: self._loop.call_soon_threadsafe(notifier.poke)
        self.service.writes.on_commit.append(self._poke)

        async def changed(after):
            return await asyncio.get_running_loop().run_in_executor(self._pools.read,
                                                                    self.service.namespaces_changed, after)
        self._notifier_task = asyncio.run_coroutine_threadsafe(notifier.run(changed), self._loop)
        self._reauth_task = asyncio.run_coroutine_threadsafe(self.watches.reauthenticate(), self._loop)
        self.service.tokens.on_revoke.append(lambda: self._loop.call_soon_threadsafe(self.watches.revoked))
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
        if getattr(self, "_poke", None) in self.service.writes.on_commit:
            self.service.writes.on_commit.remove(self._poke)
        for task in (getattr(self, "_health_task", None), getattr(self, "_notifier_task", None),
                     getattr(self, "_reauth_task", None)):
            if task is not None:
                task.cancel()
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
