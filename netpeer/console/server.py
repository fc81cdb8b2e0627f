"""The web console: an HTTP endpoint (``netpeer.observe.endpoint``'s server,
with its limits) whose pages show what the API shows the signed-in token.

The console holds no rights of its own. Its server side is an API client
(``netpeer.api.client.Client``) with the token the user signed in with,
over a unix socket that only this process reaches; whatever the API
refuses that token, the console cannot show or do.

Security (docs/console.md): the token travels once, in the sign-in form's
body, and is then held in the session store (``sessions``), never in a
URL, a page or a log line (the access log has the method, the path and the
status). The session cookie is HttpOnly, SameSite=Strict, and Secure
whenever the console is served over TLS. Every POST carries the session's
CSRF token. Every answer carries a Content-Security-Policy that allows the
console's own scripts only. A token that stops authenticating (revoked,
expired) ends its session and sends the browser back to sign-in.

Live updates are server-sent events fed by a Watch stream of the
session's token: at most ``STREAMS_PER_SESSION`` per session and
``STREAMS`` in all, each on a thread of a pool that size, and each closed
(with its Watch) when the browser goes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
import urllib.parse
from concurrent import futures
from datetime import timedelta
from pathlib import Path

from netpeer import errors
from netpeer.api.client import Client
from netpeer.console import pages
from netpeer.console.sessions import Session, Sessions
from netpeer.observe.endpoint import Answer, HttpEndpoint, Limits, Request

LOG = logging.getLogger("netpeer.console")

GRAPH_ASSET = "cytoscape.min.js"
STATIC = Path(__file__).parent / "static"
COOKIE = "netpeer_session"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = [("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff"),
           ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"), ("Cache-Control", "no-store")]
HTML = ("Content-Type", "text/html; charset=utf-8")
LIMITS = Limits(connections=64, timeout=10.0, request_bytes=8192, body_bytes=16384)
MESSAGES = {"expired": "Your token is no longer accepted (revoked or expired): sign in again.",
            "signedout": "Signed out: the session is deleted on the server."}


class Console(HttpEndpoint):
    """The console on ``address`` (HOST:PORT), calling the API at ``api``
    (netpeerd's private unix socket) with each session's token."""

    WORKERS = 4
    STREAMS = 32
    STREAMS_PER_SESSION = 4
    #: A comment line on every event stream this often (s): a browser that
    #: went away is noticed, and proxies keep the stream open.
    KEEPALIVE = 15.0

    def __init__(self, address: str, api: str, *, tls: ssl.SSLContext | None = None, assets: Path | None = None,
                 limits: Limits = LIMITS):
        super().__init__(address, tls=tls, limits=limits, field="console_listen", name="console-http")
        self.api = api
        self.secure = tls is not None
        self.sessions = Sessions()
        self._pool = futures.ThreadPoolExecutor(self.WORKERS, thread_name_prefix="console")
        self._watch_pool = futures.ThreadPoolExecutor(self.STREAMS, thread_name_prefix="console-watch")
        self._streams = 0
        self.graph_asset = self._read_asset(assets)
        self._static = {name: (STATIC / name).read_bytes() for name in ("console.js", "console.css")}
        self._serve()

    @staticmethod
    def _read_asset(assets: Path | None) -> bytes | None:
        path = (assets or Path("~/.cache/netpeer/console").expanduser()) / GRAPH_ASSET
        try:
            return path.read_bytes()
        except OSError as exc:
            LOG.warning("console: the graph library %s is missing (%s): the console's graph view says so; "
                        "scripts/setup.sh installs it", path, exc.strerror)
            return None

    def _stopped(self) -> None:
        self.sessions.clear()   # closes their clients, and with them their Watch streams
        self._watch_pool.shutdown(wait=True, cancel_futures=True)
        self._pool.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------ requests
    async def handle(self, request: Request) -> Answer:
        start = time.monotonic()
        if request.method == "GET" and request.path == "/events":
            answer = self._events(request)
        else:
            answer = await asyncio.get_running_loop().run_in_executor(self._pool, self._route, request)
        # The access log: never the query, the body or a header (a token travels only in a body).
        LOG.info("console %s %s %d %.1f ms", request.method, request.path, answer[0],
                 (time.monotonic() - start) * 1000)
        return answer

    def _route(self, request: Request) -> Answer:
        method, path = request.method, request.path
        if path.startswith("/static/"):
            return self._static_file(request, path[len("/static/"):])
        routes = {("GET", "/"): self._home, ("GET", "/signin"): self._signin_page, ("POST", "/signin"): self._signin,
                  ("POST", "/signout"): self._signout, ("GET", "/networks"): self._networks,
                  ("GET", "/peering"): self._peering, ("GET", "/admin"): self._admin,
                  ("POST", "/peerings"): self._consent, ("GET", "/inbox"): self._inbox,
                  ("POST", "/inbox/accept"): self._accept_request, ("POST", "/inbox/dismiss"): self._dismiss_request}
        handler = routes.get((method, path))
        if handler is None:
            if any(p == path for _, p in routes):
                return 405, HEADERS, b"method not allowed\n", request.keep
            return 404, HEADERS, b"no such page\n", request.keep
        session = self.sessions.get(_cookie(request))
        form = {}
        if method == "POST":
            form = _form(request)
            if session is None or not session.csrf_ok(form.get("csrf")):
                return 403, HEADERS, b"refused: this form's CSRF token is missing or stale; reload the page\n", False
        try:
            return handler(request, session, form)
        except errors.Unauthenticated:
            if session is not None:
                self.sessions.delete(session.sid)
            return _redirect("/signin?m=expired", clear=True, secure=self.secure)

    # ------------------------------------------------------------ pages
    def _static_file(self, request: Request, name: str) -> Answer:
        kinds = {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8"}
        body = self.graph_asset if name == GRAPH_ASSET else self._static.get(name)
        if body is None:
            return 404, HEADERS, b"not installed\n" if name == GRAPH_ASSET else b"no such file\n", request.keep
        headers = [h for h in HEADERS if h[0] != "Cache-Control"] + [("Cache-Control", "max-age=300")]
        return 200, headers + [("Content-Type", kinds[name.rsplit(".", 1)[-1]])], body, request.keep

    def _home(self, request, session, form) -> Answer:
        if session is None or session.token is None:
            return _redirect("/signin", secure=self.secure)
        return _redirect("/networks", secure=self.secure)

    def _signin_page(self, request, session, form, message: str = "", status: int = 200) -> Answer:
        if session is None or session.token is not None:
            session = self.sessions.new()
        code = _query(request).get("m", "")
        body = pages.signin(session.csrf, message or MESSAGES.get(code, ""), error=bool(message) or code == "expired")
        return status, HEADERS + [HTML, _set_cookie(session.sid, self.secure)], body, request.keep

    def _signin(self, request, session, form) -> Answer:
        token = form.get("token", "").strip()
        if not token:
            return self._signin_page(request, session, form, "token: enter the API token you were given", 400)
        client = Client(self.api, token, timeout=30)
        try:
            caller = client.caller()
        except errors.Unauthenticated:
            client.close()
            return self._signin_page(request, session, form, "token: not accepted (unknown, revoked or expired)",
                                     401)
        except errors.NetpeerError as exc:
            client.close()
            return self._signin_page(request, session, form, exc.message, 503)
        self.sessions.delete(session.sid)
        try:
            signed = self.sessions.new(token, caller, client)
        except OverflowError as exc:
            client.close()
            return self._signin_page(request, None, form, str(exc), 503)
        return 303, HEADERS + [("Location", "/networks"), _set_cookie(signed.sid, self.secure)], b"", False

    def _signout(self, request, session, form) -> Answer:
        self.sessions.delete(session.sid)
        return _redirect("/signin?m=signedout", clear=True, secure=self.secure)

    def _page(self, session: Session, page: str, title: str, body: str, namespace: str | None = None,
              message: str = "", status: int = 200, keep: bool = True, error: bool = True) -> Answer:
        html = pages.layout(page, title, body, nav=pages.nav(session.caller, session.csrf, namespace),
                            message=message, error=error,
                            graph=page == "networks" and self.graph_asset is not None)
        return status, HEADERS + [HTML], html, keep

    def _namespace(self, request, session) -> str | None:
        ns = _query(request).get("namespace") or None
        if ns is None and session.caller["namespaces"]:
            ns = session.caller["namespaces"][0]
        return ns

    def _networks(self, request, session, form, message: str = "", status: int = 200) -> Answer:
        if session is None or session.token is None:
            return _redirect("/signin", secure=self.secure)
        ns = self._namespace(request, session)
        if ns is None:
            return self._page(session, "pick", "Namespaces", pages.pick_namespace(), message=message)
        try:
            rows = session.client.list_networks(ns)
        except errors.Unauthenticated:
            raise
        except errors.NetpeerError as exc:
            return self._page(session, "networks", ns, "", ns, message=exc.message, status=_status(exc))
        peered = [n["name"] for n in rows if n["peering_count"]]
        lists = list(self._pool_map(lambda net: session.client.list_peerings(ns, net), peered))
        peerings = dict(zip(peered, lists))
        body = pages.networks(ns, rows, peerings, pages.graph(ns, rows, peerings), session.csrf,
                              self.graph_asset is not None)
        return self._page(session, "networks", ns, body, ns, message=message, status=status)

    @staticmethod
    def _pool_map(fn, items):
        # The peerings of many networks at once: a few calls in flight, not one after another.
        with futures.ThreadPoolExecutor(4, thread_name_prefix="console-read") as pool:
            return list(pool.map(fn, items))

    def _consent(self, request, session, form) -> Answer:
        if session.token is None:
            return _redirect("/signin", secure=self.secure)
        ns = form.get("namespace", "")
        try:
            session.client.create_peering(ns, form.get("network", ""), form.get("name", ""),
                                          form.get("remote_network", ""), form.get("remote_namespace") or None,
                                          remote_site=form.get("remote_site", ""), ttl=timedelta(hours=1))
        except errors.Unauthenticated:
            raise
        except errors.NetpeerError as exc:
            request = Request("GET", "/networks?" + urllib.parse.urlencode({"namespace": ns}), "HTTP/1.1", {})
            return self._networks(request, session, {}, message=exc.message, status=_status(exc))
        query = urllib.parse.urlencode({"namespace": ns})
        return _redirect(f"/networks?{query}", secure=self.secure)

    def _inbox(self, request, session, form, namespace: str | None = None, message: str = "",
               status: int = 200, error: bool = True) -> Answer:
        if session is None or session.token is None:
            return _redirect("/signin", secure=self.secure)
        ns = namespace or self._namespace(request, session)
        if ns is None:
            return self._page(session, "pick", "Namespaces", pages.pick_namespace())
        try:
            requests = session.client.list_peering_requests(ns)
        except errors.Unauthenticated:
            raise
        except errors.NetpeerError as exc:
            return self._page(session, "inbox", "Inbox", "", ns, message=exc.message, status=_status(exc))
        return self._page(session, "inbox", f"Inbox of {ns}", pages.inbox(ns, requests, session.csrf), ns,
                          message=message, status=status, error=error)

    def _accept_request(self, request, session, form) -> Answer:
        """Accepts a request: the matching half, named by the form. A request
        withdrawn meanwhile, a name refused, prefixes that now overlap: the
        API's answer, on the inbox page."""
        if session.token is None:
            return _redirect("/signin", secure=self.secure)
        ns, network, rid = form.get("namespace", ""), form.get("network", ""), form.get("request", "")
        try:
            half = session.client.accept_peering_request(ns, network, rid, form.get("name", ""))
        except errors.Unauthenticated:
            raise
        except errors.NetpeerError as exc:
            return self._inbox(request, session, form, ns, message=exc.message, status=_status(exc))
        note = (f"Accepted: {half['network']}/{half['name']} towards {pages.remote_label(half)} is {half['phase']}"
                + (f" ({half['reason']}: {half['message']})" if half["phase"] != "Bound" else "") + ".")
        return self._inbox(request, session, form, ns, message=note, error=half["phase"] == "Failed")

    def _dismiss_request(self, request, session, form) -> Answer:
        if session.token is None:
            return _redirect("/signin", secure=self.secure)
        ns = form.get("namespace", "")
        try:
            session.client.dismiss_peering_request(ns, form.get("network", ""), form.get("request", ""))
        except errors.Unauthenticated:
            raise
        except errors.NetpeerError as exc:
            return self._inbox(request, session, form, ns, message=exc.message, status=_status(exc))
        return self._inbox(request, session, form, ns, message="Dismissed: it is not listed again; its requester "
                           "sees no difference.", error=False)

    def _peering(self, request, session, form) -> Answer:
        if session is None or session.token is None:
            return _redirect("/signin", secure=self.secure)
        q = _query(request)
        ns = self._namespace(request, session) or ""
        try:
            p = session.client.get_peering(ns, q.get("network", ""), q.get("name", ""))
        except errors.Unauthenticated:
            raise
        except errors.NetpeerError as exc:
            return self._page(session, "peering", "Peering", "", ns, message=exc.message, status=_status(exc))
        return self._page(session, "peering", f"{p['network']}/{p['name']}", pages.peering(ns, p), ns)

    def _admin(self, request, session, form) -> Answer:
        if session is None or session.token is None:
            return _redirect("/signin", secure=self.secure)
        try:
            status = session.client.status()
        except errors.Unauthenticated:
            raise
        except errors.NetpeerError as exc:
            return self._page(session, "admin", "Region", "", message=exc.message, status=_status(exc))
        return self._page(session, "admin", "Region", pages.admin(status))

    # ------------------------------------------------------------ live
    def _events(self, request: Request) -> Answer:
        """Server-sent events: the Watch stream of the session's token, each
        change as one ``data:`` line of JSON (``Client.watch``'s dicts); an
        ``expired`` event when the token stops authenticating."""
        session = self.sessions.get(_cookie(request))
        if session is None or session.token is None:
            return 401, HEADERS, b"sign in first\n", False
        if self._streams >= self.STREAMS or session.streams >= self.STREAMS_PER_SESSION:
            return 429, HEADERS, b"too many live views open: close one\n", False
        q = _query(request)
        ns = q.get("namespace") or (session.caller["namespaces"] or [""])[0]
        since = int(q["since"]) if q.get("since", "").isdigit() else None
        headers = HEADERS + [("Content-Type", "text/event-stream; charset=utf-8")]
        return 200, headers, self._stream(session, ns, q.get("network") or None, since), False

    async def _stream(self, session: Session, namespace: str, network: str | None, since: int | None):
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue(maxsize=1000)
        # A client of its own: closing it ends its Watch at once when the browser goes.
        client = Client(self.api, session.token, timeout=30)
        self._streams += 1
        session.streams += 1

        def put(item) -> None:
            if queue.full():   # a browser that reads too slowly: it reloads the page
                item = ("error", {"message": "the page fell behind: reload it"})
            loop.call_soon_threadsafe(queue.put_nowait, item)

        def follow() -> None:
            try:
                try:
                    for event in client.watch(namespace, network, since=since):
                        put(("change", _slim(event)))
                except errors.OutOfRange:   # that history is compacted: from now on
                    put(("note", {"message": "earlier history was compacted; changes from now on"}))
                    for event in client.watch(namespace, network):
                        put(("change", _slim(event)))
            except errors.Unauthenticated:
                put(("expired", {"location": "/signin?m=expired"}))
            except errors.NetpeerError as exc:
                put(("error", {"message": exc.message}))
            except Exception as exc:   # the client closed under it: the browser went
                LOG.debug("console: event stream ended: %s", exc)
            put(None)

        work = loop.run_in_executor(self._watch_pool, follow)
        try:
            yield b"retry: 2000\n\n"
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), self.KEEPALIVE)
                except asyncio.TimeoutError:
                    yield b": keepalive\n\n"
                    continue
                if item is None:
                    return
                kind, data = item
                yield f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
                if kind == "expired":
                    self.sessions.delete(session.sid)
                    return
        finally:
            client.close()
            self._streams -= 1
            session.streams -= 1
            await asyncio.wait([work], timeout=5)


def _slim(event: dict) -> dict:
    return {k: v for k, v in event.items() if k not in ("network_object",)}


def _status(exc: errors.NetpeerError) -> int:
    return {"NotFound": 404, "PermissionDenied": 403, "InvalidArgument": 400, "AlreadyExists": 409,
            "FailedPrecondition": 409}.get(type(exc).__name__, 400) if type(exc).__name__ != "Unavailable" else 503


def _cookie(request: Request) -> str | None:
    for part in request.headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def _set_cookie(sid: str, secure: bool, max_age: int | None = None) -> tuple[str, str]:
    parts = [f"{COOKIE}={sid}", "Path=/", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    return "Set-Cookie", "; ".join(parts)


def _redirect(location: str, *, secure: bool, clear: bool = False) -> Answer:
    headers = HEADERS + [("Location", location)]
    if clear:
        headers.append(_set_cookie("", secure, max_age=0))
    return 303, headers, b"", False


def _query(request: Request) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(request.target.partition("?")[2]).items()}


def _form(request: Request) -> dict[str, str]:
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return {}
    try:
        text = request.body.decode()
    except UnicodeDecodeError:
        return {}
    return {k: v[0] for k, v in urllib.parse.parse_qs(text, keep_blank_values=True).items()}
