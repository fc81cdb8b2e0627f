"""What netpeerd takes off the wire, before any of its own code sees a request.

Each method takes requests up to a size of its own (``Limits.request_limit``,
above the largest request it can legitimately be sent). A request
over its method's limit is never parsed: it answers RESOURCE_EXHAUSTED with
one line naming the limit. A request that does not parse (a string that is
not UTF-8, a truncated message, groups nested too deep, an invalid wire
type) answers INVALID_ARGUMENT with one line. Both are answered before
authentication, for every service the server has (health and reflection
too), counted in ``netpeer_rpc_requests_total`` and logged at DEBUG, and
at WARNING at most once a minute with how many there were (``Sparse``):
whoever can reach the port can not flood the log.

gRPC Python lets no request deserializer choose the status: one that raises
answers UNKNOWN ("Unexpected <class '...DecodeError'>") and logs an ERROR
with a traceback, per call. So the parser here never raises: it returns a
``Refused``, and the method handler that ``Intake`` (a server interceptor)
puts around the service's own answers it without calling the service.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import inspect
import logging
import time
from typing import Callable

import grpc
from google.protobuf import descriptor_pool
from google.protobuf.message import DecodeError

from netpeer import errors
from netpeer.api.errors import status_of
from netpeer.observe import logs
from netpeer.reasons import Reason

LOG = logging.getLogger(__name__)

#: The most one answer of netpeerd may weigh (``Limits.answer_bytes``), and
#: so what netpeer's clients take (gRPC's default is 4 MiB): the answer to a
#: batch of 1,000 peerings is at most 5.1 MB.
ANSWER_BYTES = 16 << 20

#: The services whose methods ``netpeer_rpc_requests_total`` names by method alone.
NETPEER_PACKAGE = "netpeer.v1."


def metadata(context, key: str) -> str | None:
    """The first value of ``key`` in the call's metadata."""
    for k, v in context.invocation_metadata() or ():
        if k == key:
            return v
    return None


def method_label(path: str) -> str:
    """How ``netpeer_rpc_requests_total`` names the method of ``path``
    (``/netpeer.v1.NetworkService/GetNetwork``): netpeer's by the method
    alone, as the service's answers are, others by service and method
    (``grpc.health.v1.Health/Watch`` is not NetworkService's Watch)."""
    service, _, method = path.lstrip("/").rpartition("/")
    return method if service.startswith(NETPEER_PACKAGE) else f"{service}/{method}"


def _message_name(path: str) -> str:
    """The request type of ``path``, as the descriptor pool knows it."""
    service, _, method = path.lstrip("/").rpartition("/")
    try:
        return descriptor_pool.Default().FindServiceByName(service).FindMethodByName(method).input_type.full_name
    except (KeyError, AttributeError):
        return f"{method_label(path)} request"


def fail(context, status: tuple[grpc.StatusCode, str, tuple], trailer) -> None:
    """Makes the call end with ``code`` once its method returns, with nothing
    raised. ``context.abort`` raises an exception that gRPC keeps with the
    call, and whose traceback holds the method's frames, the request with
    them: a reference cycle, which netpeerd collects rarely
    (daemon.GC_THRESHOLDS), so big invalid requests piled up. A caller that
    already gave up gets nothing, and nothing is logged. ``status``: what
    ``netpeer.api.errors.status_of`` makes of the error."""
    code, message, details = status
    context.set_code(code)
    context.set_details(message)
    context.set_trailing_metadata(tuple(trailer) + details)


@dataclasses.dataclass(frozen=True)
class Refused:
    """A request that was not parsed: the error it answers, and when it came."""

    error: errors.NetpeerError
    started: float


def parser(path: str, parse: Callable[[bytes], object], limit: int) -> Callable[[bytes], object]:
    """``parse`` (the method's own deserializer) behind a size limit; a
    request it can not take is a ``Refused``, never an exception."""
    label, name = method_label(path), _message_name(path)

    def take(data: bytes) -> object:
        started = time.perf_counter()
        if len(data) > limit:
            return Refused(errors.ResourceExhausted(
                f"request: {len(data):,} bytes is more than {label} takes ({limit:,} bytes at most)",
                field="request", value=len(data), reason=Reason.REQUEST_TOO_LARGE), started)
        try:
            return parse(data)
        except (DecodeError, RecursionError):
            # The parser says no more than that it failed: the usual reasons are named instead.
            return Refused(errors.InvalidArgument(
                f"request: {len(data):,} bytes are not a valid {name} message (truncated or corrupt, a string "
                "that is not UTF-8, or nested too deep)", field="request", value=len(data),
                reason=Reason.REQUEST_MALFORMED), started)
    return take


class Sparse:
    """Logs many events of one kind as a few WARNING lines: the first at
    once, then at most one per ``interval`` seconds with how many there were
    since the last line and the latest's detail. Each event is logged at
    DEBUG. Used from one thread (the server's event loop)."""

    def __init__(self, what: str, interval: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.what, self.interval, self._clock = what, interval, clock
        self._unlogged = 0
        self._logged_at: float | None = None

    def note(self, detail: str) -> None:
        LOG.debug("%s: %s", self.what, detail)
        self._unlogged += 1
        now = self._clock()
        if self._logged_at is not None and now - self._logged_at < self.interval:
            return
        if self._logged_at is None:
            LOG.warning("%s: %s (more are counted, not logged, for %.0f s)", self.what, detail, self.interval)
        else:
            LOG.warning("%s: %d in the last %.0f s; the latest: %s", self.what, self._unlogged,
                        now - self._logged_at, detail)
        self._unlogged, self._logged_at = 0, now


class Intake(grpc.aio.ServerInterceptor):
    """Puts ``parser`` in front of every method of the server and answers
    what it refuses (see the module). ``limit(path)`` is the most a request
    of that method may weigh. A method's wrapped handler is made on its
    first call and kept (the server's handlers never change; unknown
    methods are not kept)."""

    #: The youngest objects are collected after this many calls. gRPC leaves
    #: a reference cycle behind every call (its method look-up's closure),
    #: holding the call's metadata (up to 8 KiB), and netpeerd collects
    #: cycles rarely (daemon.GC_THRESHOLDS): calls with 7 kB of metadata held
    #: 28-90 MiB until a collection came. A collection of the youngest
    #: objects alone is quick (0.5 ms for 50,000).
    COLLECT_EVERY = 1000

    def __init__(self, limit: Callable[[str], int], metrics):
        self._limit = limit
        self._metrics = metrics
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}
        self._calls = 0
        self.refusals = Sparse("refused requests that were too large or did not parse")

    async def intercept_service(self, continuation, details):
        self._calls += 1
        if self._calls % self.COLLECT_EVERY == 0:
            gc.collect(0)
        handler = self._handlers.get(details.method)
        if handler is None:
            inner = await continuation(details)
            if inner is None:
                return None
            handler = self._handlers[details.method] = self._guard(details.method, inner)
        return handler

    def _refuse(self, path: str, refused: Refused, context) -> None:
        rid = logs.new_request_id(metadata(context, logs.REQUEST_ID_KEY))
        status = status_of(refused.error)
        code = status[0]
        fail(context, status, ((logs.REQUEST_ID_KEY, rid),))
        label = method_label(path)
        self._metrics.rpc(label, code.name, time.perf_counter() - refused.started)
        self.refusals.note(f"{label} from {context.peer()}: {refused.error.message} [request {rid}]")

    def _guard(self, path: str, inner: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        take = parser(path, inner.request_deserializer or (lambda data: data), self._limit(path))
        refuse = self._refuse
        if not inner.request_streaming and not inner.response_streaming \
                and inspect.iscoroutinefunction(inner.unary_unary):
            behavior = inner.unary_unary

            async def unary_unary(request, context):
                if isinstance(request, Refused):
                    return refuse(path, request, context)
                return await behavior(request, context)
            return grpc.unary_unary_rpc_method_handler(unary_unary, take, inner.response_serializer)

        if not inner.request_streaming and inspect.iscoroutinefunction(inner.unary_stream):
            behavior = inner.unary_stream   # writes its answers itself (health's Watch)

            async def unary_stream_writer(request, context):
                if isinstance(request, Refused):
                    return refuse(path, request, context)
                return await behavior(request, context)
            return grpc.unary_stream_rpc_method_handler(unary_stream_writer, take, inner.response_serializer)

        if not inner.request_streaming and inspect.isasyncgenfunction(inner.unary_stream):
            behavior = inner.unary_stream

            async def unary_stream(request, context):
                if isinstance(request, Refused):
                    refuse(path, request, context)
                    return
                async with contextlib.aclosing(behavior(request, context)) as answers:
                    async for answer in answers:
                        yield answer
            return grpc.unary_stream_rpc_method_handler(unary_stream, take, inner.response_serializer)

        if inner.response_streaming and inspect.isasyncgenfunction(inner.stream_stream):
            behavior = inner.stream_stream   # reflection

            async def stream_stream(requests, context):
                refused: list[Refused] = []

                async def parsed():   # ends the service's stream of requests at the first refused one
                    async for request in requests:
                        if isinstance(request, Refused):
                            refused.append(request)
                            return
                        yield request
                async with contextlib.aclosing(behavior(parsed(), context)) as answers:
                    async for answer in answers:
                        yield answer
                if refused:
                    refuse(path, refused[0], context)
            return grpc.stream_stream_rpc_method_handler(stream_stream, take, inner.response_serializer)

        # No service of netpeerd has another kind of method (a stream of
        # requests into one answer, or requests read with context.read());
        # one would be served as it is, under gRPC's own limit only.
        return inner
