"""The HTTP server of the metrics endpoint, bounded whoever connects.

prometheus_client's own server answers each connection on a thread of its
own for as long as the client keeps it open, so idle connections cost a
thread each, without limit. This one costs the same whatever clients do:

- one thread runs an event loop that accepts, reads requests and writes
  answers; one more renders the exposition (prometheus_client's encoders
  over the registry). Neither number grows with clients.
- At most ``Limits.connections`` connections are open. A new one beyond
  that takes the place of the one that has waited longest for its request
  with nothing on its way in, or is closed at once when there is none.
- A request must arrive within ``Limits.timeout`` seconds of the
  connection (or of the previous answer on a connection kept alive), and
  a TLS handshake must end within as long; otherwise the connection is
  closed.
- Renderings run one at a time, paced (``netpeer.observe.renderings``):
  scrapes get at most 1 / (1 + ``Limits.pause``) of one core, however
  many arrive.
- TLS (``tls_context``) and authentication (``Access``: a bearer token or
  a user name and password, compared in constant time; 401 with
  ``WWW-Authenticate`` otherwise), checked before anything is rendered.

The server itself (``HttpEndpoint``: connections, limits, TLS, parsing)
serves other pages too: the web console (``netpeer.console``) answers its
requests through ``HttpEndpoint.handle``, with request bodies up to
``Limits.body_bytes`` and answers streamed as they are made (server-sent
events). Its limits are the same whoever connects.

Longer than 400 lines by a little: the connection's life (accept, TLS,
timeouts, eviction, bodies, streaming) reads in one place, where a path
that leaks a connection or a thread is seen.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import dataclasses
import hmac
import logging
import os
import socket
import ssl
import stat
import threading
import time
from concurrent import futures
from pathlib import Path

from prometheus_client.exposition import choose_encoder, gzip_accepted

from netpeer.errors import InvalidArgument
from netpeer.listen import host_port
from netpeer.observe.renderings import Renderings

LOG = logging.getLogger(__name__)

_REASONS = {200: "OK", 303: "See Other", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 413: "Content Too Large", 429: "Too Many Requests",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}


@dataclasses.dataclass(frozen=True)
class Limits:
    """What the endpoint spends on its clients, at most."""

    connections: int = 32        # open at once; Prometheus keeps one per target
    timeout: float = 5.0         # for a request to arrive (and for a TLS handshake), seconds
    request_bytes: int = 8192    # a request's line and headers
    pause: float = 4.0           # between two renderings, this many times the last one's duration
    backlog: int = 128           # connections the kernel holds until they are accepted
    body_bytes: int = 0          # a request's body (0: requests have none)


@dataclasses.dataclass(frozen=True)
class Request:
    """One HTTP request, parsed: header names in lower case."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes = b""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def keep(self) -> bool:
        """Whether the client may send another request on the connection."""
        return self.version == "HTTP/1.1" and self.headers.get("connection", "").lower() != "close"


#: An answer: (status, headers, body, keep the connection). A body that is
#: an async iterator of bytes is streamed until it ends (or the client
#: goes), and the connection closes after it.
Answer = tuple


@dataclasses.dataclass(frozen=True)
class Access:
    """Who may scrape: anyone (nothing set), the holder of a bearer token,
    or a user name and password (HTTP basic authentication)."""

    bearer_token: str | None = None
    basic_auth: tuple[str, str] | None = None

    def allows(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header (None: absent) is enough.
        Secrets are compared in constant time."""
        if self.bearer_token is None and self.basic_auth is None:
            return True
        scheme, _, credentials = (authorization or "").strip().partition(" ")
        given = credentials.strip().encode("latin-1")   # headers are read as latin-1: these are their bytes
        if self.bearer_token is not None:
            return hmac.compare_digest(given, self.bearer_token.encode()) and scheme.lower() == "bearer"
        try:
            user, colon, password = base64.b64decode(given, validate=True).partition(b":")
        except ValueError:
            return False
        want_user, want_password = (part.encode() for part in self.basic_auth)
        user_ok = hmac.compare_digest(user, want_user)
        password_ok = hmac.compare_digest(password, want_password)
        return user_ok and password_ok and bool(colon) and scheme.lower() == "basic"

    @property
    def challenge(self) -> str:
        """The ``WWW-Authenticate`` header of a 401."""
        if self.bearer_token is not None:
            return 'Bearer realm="netpeer metrics"'
        return 'Basic realm="netpeer metrics", charset="UTF-8"'


def tls_context(cert: Path, key: Path, field: str) -> ssl.SSLContext:
    """A server's TLS context from a certificate and its key; a pair that
    cannot be used is refused in one line naming ``field``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidArgument.for_field(field, str(cert), f"cannot be served with the key {key} ({why})") from None
    return context


class HttpEndpoint:
    """An HTTP/1.1 server on ``address`` (``HOST:PORT`` or ``unix:///PATH``)
    whose answers ``handle`` makes. Binds at once (a taken address is
    refused in one line naming ``field``); serves from a thread of its own
    (``name``) until ``stop``."""

    def __init__(self, address: str, *, tls: ssl.SSLContext | None = None, limits: Limits = Limits(),
                 field: str, name: str):
        self.address, self.tls, self.limits = address, tls, limits
        self._unix = _unix_path(address)
        self._listener = _bind(address, self._unix, limits.backlog, field)
        self.port = 0 if self._unix else self._listener.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._open: set[_Connection] = set()
        #: Open connections waiting for a request, the longest waiting first.
        self._waiting: collections.OrderedDict[_Connection, None] = collections.OrderedDict()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._main(),),
                                        name=name, daemon=True)

    def _serve(self) -> None:
        """Starts the thread (once the subclass is ready to answer)."""
        self._thread.start()
        self._started.wait(10)

    # ------------------------------------------------------------ life
    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        accept = asyncio.ensure_future(self._accept())
        self._started.set()
        await self._stopping.wait()
        accept.cancel()
        for conn in list(self._open):
            conn.drop()
        await asyncio.sleep(0)   # their connection_lost callbacks
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        """Closes the listener and every connection; joins the threads."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(10)
        self._stopped()
        if not self._loop.is_running():
            self._loop.close()
        self._listener.close()
        if self._unix:
            with contextlib.suppress(OSError):
                os.unlink(self._unix)

    # ------------------------------------------------------------ connections
    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        warned = 0.0
        while True:
            try:
                sock, _ = await loop.sock_accept(self._listener)
            except OSError as exc:   # out of descriptors, say: try again in a moment
                if time.monotonic() - warned > 60:
                    LOG.warning("metrics endpoint: cannot accept connections: %s", exc)
                    warned = time.monotonic()
                await asyncio.sleep(0.1)
                continue
            if len(self._open) >= self.limits.connections:
                idle = next((c for c in self._waiting if not c.pending()), None)
                if idle is None:       # every one is being answered, or about to be: this one waits for nothing
                    sock.close()
                    continue
                idle.drop()
            conn = _Connection(self, sock)
            self._open.add(conn)
            self._waiting[conn] = None
            conn.start()

    def _forget(self, conn: "_Connection") -> None:
        self._open.discard(conn)
        self._waiting.pop(conn, None)

    def _stopped(self) -> None:
        """After the loop's thread ended: what the subclass must close."""

    # ------------------------------------------------------------ requests
    def parse(self, head: bytes) -> Request | Answer:
        """A request's line and headers as a Request (its body still to
        come), or the answer that refuses it."""
        try:
            request_line, *lines = head.decode("latin-1").split("\r\n")
            method, target, version = request_line.split(" ")
            headers = {}
            for line in lines:
                name, colon, value = line.partition(":")
                if not colon or not name or name != name.strip():
                    raise ValueError(line)
                headers[name.lower()] = value.strip()
        except ValueError:
            return 400, [], b"malformed request\n", False
        if version not in ("HTTP/1.0", "HTTP/1.1"):
            return 400, [], b"HTTP/1.0 or HTTP/1.1 only\n", False
        length = headers.get("content-length", "0")
        if "transfer-encoding" in headers or not length.isdigit():
            return 400, [], b"a request's body needs a Content-Length\n", False
        if int(length) > self.limits.body_bytes:
            if not self.limits.body_bytes:
                return 400, [], b"a request to this endpoint has no body\n", False
            return 413, [], f"a request's body is at most {self.limits.body_bytes} bytes\n".encode(), False
        return Request(method, target, version, headers)

    async def handle(self, request: Request) -> Answer:
        """The answer to a request (``Answer``)."""
        raise NotImplementedError


class MetricsEndpoint(HttpEndpoint):
    """Serves ``registry`` on ``address`` (``HOST:PORT`` or ``unix:///PATH``)
    at ``/metrics``. Binds at once (a taken address is refused in one line
    naming ``field``); serves from a thread of its own until ``stop``."""

    def __init__(self, registry, address: str, *, tls: ssl.SSLContext | None = None, access: Access = Access(),
                 limits: Limits = Limits(), field: str = "metrics_listen"):
        super().__init__(address, tls=tls, limits=limits, field=field, name="metrics-http")
        self.registry, self.access = registry, access
        self._render_pool = futures.ThreadPoolExecutor(1, thread_name_prefix="metrics-render")
        self._renderings = Renderings(registry, self._render_pool, limits.pause, self._loop)
        self._serve()

    def _stopped(self) -> None:
        # A rendering still running hands its result to the loop: close it after.
        self._render_pool.shutdown(wait=True, cancel_futures=True)

    async def handle(self, request: Request) -> Answer:
        method, target, headers, keep = request.method, request.target, request.headers, request.keep
        if not self.access.allows(headers.get("authorization")):
            return 401, [("WWW-Authenticate", self.access.challenge)], b"unauthorized\n", keep
        if method not in ("GET", "HEAD"):
            return 405, [("Allow", "GET, HEAD")], b"GET or HEAD only\n", keep
        if target.split("?", 1)[0] != "/metrics":
            return 404, [], b"the metrics are at /metrics\n", keep
        encoder, content_type = choose_encoder(headers.get("accept", ""))
        compress = gzip_accepted(headers.get("accept-encoding", ""))
        try:
            body = await asyncio.shield(self._renderings.next(content_type, encoder, compress))
        except Exception as exc:
            return 500, [], f"the metrics could not be rendered: {exc}\n".encode(), keep
        extra = [("Content-Encoding", "gzip")] if compress else []
        return 200, [("Content-Type", content_type)] + extra, body, keep


class _Connection(asyncio.Protocol):
    """One client connection: requests one at a time, each read within the
    timeout, answered in order."""

    def __init__(self, server: HttpEndpoint, sock: socket.socket):
        self.server, self.sock = server, sock
        self.loop = server._loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.answering = self.paused = self.closed = self.began = False
        self.timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = self.loop.create_task(self._connect())
        # Bounded from the moment it was accepted (a TLS handshake has its own timeout too).
        self.timer = self.loop.call_later(2 * self.server.limits.timeout, self.drop)

    async def _connect(self) -> None:
        self.began = True
        try:
            await self.loop.connect_accepted_socket(
                lambda: self, self.sock, ssl=self.server.tls,
                ssl_handshake_timeout=self.server.limits.timeout if self.server.tls else None)
        except (OSError, ssl.SSLError, asyncio.TimeoutError, asyncio.CancelledError):
            self._gone()

    def pending(self) -> bool:
        """Whether bytes arrived that the loop has not read yet (a request,
        or a TLS handshake, on its way in: not an idle connection)."""
        try:
            return bool(self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:       # reset, or closed already: nothing to wait for
            return False

    def drop(self) -> None:
        """Closes the connection now, whatever it was doing."""
        if self.closed:
            return
        if self.transport is not None:
            self.transport.abort()
        elif not self.began:          # the socket was never handed to the loop
            self.sock.close()
            if self.task is not None:
                self.task.cancel()
        elif self.task is not None:   # in its TLS handshake: cancelling it closes the socket
            self.task.cancel()
        self._gone()

    def _gone(self) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
        self.server._forget(self)

    # ------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.closed:      # dropped while it was being set up
            transport.abort()
            return
        self._wait_for_request()

    def connection_lost(self, exc) -> None:
        if self.answering and self.task is not None:
            self.task.cancel()
        self._gone()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._next()

    def eof_received(self) -> bool:
        return False

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._next()

    # ------------------------------------------------------------ requests
    def _wait_for_request(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.loop.call_later(self.server.limits.timeout, self.drop)
        self.server._waiting[self] = None
        self.server._waiting.move_to_end(self)

    def _next(self) -> None:
        if self.answering or self.paused or self.closed:
            return
        end = self.buffer.find(b"\r\n\r\n", 0, self.server.limits.request_bytes + 4)
        if end < 0:
            if len(self.buffer) > self.server.limits.request_bytes:
                self._start(self._reply(431, [], b"request too large\n", False))
            return
        request = self.server.parse(bytes(self.buffer[:end]))
        if isinstance(request, tuple):
            del self.buffer[:end + 4]
            self._start(self._reply(*request))
            return
        length = int(request.headers.get("content-length", "0"))
        if len(self.buffer) < end + 4 + length:
            return   # the body is on its way (within the request's timeout)
        request = dataclasses.replace(request, body=bytes(self.buffer[end + 4:end + 4 + length]))
        del self.buffer[:end + 4 + length]
        self._start(self._answer(request))

    def _start(self, work) -> None:
        self.answering = True
        self.timer.cancel()
        self.server._waiting.pop(self, None)
        self.transport.pause_reading()
        self.task = self.loop.create_task(work)

    async def _answer(self, request: Request) -> None:
        try:
            status, headers, body, keep = await self.server.handle(request)
        except Exception:
            LOG.exception("%s: internal error", self.server._thread.name)
            status, headers, body, keep = 500, [], b"internal error\n", False
        if not isinstance(body, bytes):
            await self._stream(status, headers, body)
            return
        await self._reply(status, headers, b"" if request.method == "HEAD" else body, keep, len(body))

    async def _stream(self, status: int, headers, chunks) -> None:
        """An answer sent as it is made, until it ends or the client goes
        (the task is then cancelled, and so is the iterator)."""
        try:
            if self.closed:
                return
            lines = [f"HTTP/1.1 {status} {_REASONS[status]}", "Connection: close"] + [f"{k}: {v}" for k, v in headers]
            self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            async for chunk in chunks:
                if self.closed:
                    break
                self.transport.write(chunk)
            if not self.closed:
                self.transport.close()
        finally:
            await chunks.aclose()

    async def _reply(self, status: int, headers, body: bytes, keep: bool, length: int | None = None) -> None:
        if self.closed:
            return
        lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Length: {len(body) if length is None else length}"]
        if (status != 200 or not headers) and not any(k.lower() == "content-type" for k, _ in headers):
            headers = [("Content-Type", "text/plain; charset=utf-8")] + list(headers)
        lines += [f"{k}: {v}" for k, v in headers]
        if not keep:
            lines.append("Connection: close")
        self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        if not keep:
            self.transport.close()
            return
        self.answering = False
        self.transport.resume_reading()
        self._wait_for_request()
        self._next()


def _unix_path(address: str) -> str | None:
    if not address.startswith("unix:"):
        return None
    return address[len("unix://"):] if address.startswith("unix://") else address[len("unix:"):]


def _bind(address: str, unix: str | None, backlog: int, field: str) -> socket.socket:
    sock = None
    try:
        if unix:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.stat(unix).st_mode):   # left by a netpeerd that is gone
                    os.unlink(unix)
            sock.bind(unix)
        else:
            host, port = host_port(field, address, any_port=True)
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
        return sock
    except (OSError, UnicodeError) as exc:
        if sock is not None:
            sock.close()
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidArgument.for_field(field, address, f"cannot be listened on ({why})") from None


