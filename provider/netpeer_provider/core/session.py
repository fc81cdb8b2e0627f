"""Provider settings, and the API client the operations share.

A provider process (one per deployment) talks to one netpeerd with one
token: it keeps one client, and so one gRPC channel, per distinct
``Settings`` instead of dialling for every call. Clients live in this
module only, never on provider objects (Pulumi pickles those into the state),
and are closed when the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import threading
import time
from typing import Any, Callable, Iterator, Mapping, TypeVar

from netpeer import errors as service_errors
from netpeer.api.client import Client

from netpeer_provider.core import schema
from netpeer_provider.core.errors import MissingSetting, ProviderError, ServiceError, Terms

T = TypeVar("T")
#: Seconds a validate-only call (a preview, a plan) is retried for when the
#: service asks to retry later: one token's validate-only calls run one at a
#: time and few may queue, while engines plan many resources at once.
VALIDATE_RETRY_FOR = 60.0


@dataclasses.dataclass(frozen=True)
class Settings:
    """Where netpeerd is and how to authenticate (``schema.PROVIDER``). Hashable:
    it keys the shared clients. Secrets stay out of ``repr``."""

    endpoint: str | None = None
    token: str | None = dataclasses.field(default=None, repr=False)
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = dataclasses.field(default=None, repr=False)
    error_on_not_bound: bool = False

    @classmethod
    def resolve(cls, config: Mapping[str, Any], environ: Mapping[str, str] | None = None,
                terms: Terms | None = None) -> "Settings":
        """Each setting from ``config`` (snake_case keys), else its environment
        variable, else unset. Empty values count as unset. A boolean setting
        is true for ``true``/``1``/``yes`` (any case); anything else given is
        refused with one line naming the setting and the value."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in schema.PROVIDER.fields:
            value = config.get(f.name)
            text = ("true" if value else "false") if isinstance(value, bool) else (str(value) if value else None)
            text = text or environ.get(f.env) or None
            if f.type is schema.BOOL:
                values[f.name] = _boolean(f, text, terms or Terms())
            else:
                values[f.name] = text
        return cls(**values)


def _boolean(f: schema.Field, text: str | None, terms: Terms) -> bool:
    if text is None:
        return bool(f.default)
    if text.strip().lower() in ("true", "1", "yes"):
        return True
    if text.strip().lower() in ("false", "0", "no"):
        return False
    raise ProviderError(f"{terms.setting(f)}: {text!r} is not a boolean (true or false; {f.env} likewise)",
                        path=f.name)


class _Clients:
    """One client per ``Settings``, shared by every operation of the process.

    A client that lost its connection is dropped, so that the next operation
    dials afresh, and closed once no operation uses it: gRPC shares
    connections between channels to the same address, and a broken one left
    open would keep failing the new channel's calls until its backoff ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[Settings, Client] = {}
        self._users: dict[Client, int] = {}

    def _shared(self, settings: Settings) -> Client:
        # Called with the lock held.
        client = self._clients.get(settings)
        if client is None:
            client = Client(settings.endpoint, settings.token, settings.ca_cert, settings.client_cert,
                            settings.client_key)
            self._clients[settings] = client
        return client

    def get(self, settings: Settings) -> Client:
        with self._lock:
            return self._shared(settings)

    @contextlib.contextmanager
    def lease(self, settings: Settings) -> Iterator[Client]:
        """``get``, holding the client open until the block ends."""
        with self._lock:
            client = self._shared(settings)
            self._users[client] = self._users.get(client, 0) + 1
        try:
            yield client
        finally:
            with self._lock:
                self._users[client] -= 1
                idle = self._users[client] == 0
                if idle:
                    del self._users[client]
                close = idle and self._clients.get(settings) is not client
            if close:
                client.close()

    def drop(self, settings: Settings, client: Client) -> None:
        """Forgets ``client`` if it is still the shared one; closes it unless an operation uses it."""
        with self._lock:
            if self._clients.get(settings) is client:
                del self._clients[settings]
            close = client not in self._users
        if close:
            client.close()

    def close_all(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()


CLIENTS = _Clients()
atexit.register(CLIENTS.close_all)


@dataclasses.dataclass(frozen=True)
class Session:
    """What an operation needs besides its inputs: the settings, the face's
    words for messages, and an optional sink for progress lines."""

    settings: Settings
    terms: Terms = dataclasses.field(default_factory=Terms)
    progress: Callable[[str], None] | None = None

    def client(self) -> Client:
        """The shared client, for a call or two made right away (operations
        use ``call``); ``MissingSetting`` if endpoint or token is not set."""
        self._require()
        return CLIENTS.get(self.settings)

    def _require(self) -> None:
        for name in ("endpoint", "token"):
            if not getattr(self.settings, name):
                f = schema.PROVIDER.field(name)
                raise MissingSetting(f"{self.terms.setting(f)} is not set: {self.terms.how_to_set(f)} "
                                     f"or export {f.env}", f)

    def call(self, what: str, fn: Callable[[Client], T]) -> T:
        """Runs ``fn`` with the shared client; a service error becomes one
        line, ``what: why``. A client that could not reach netpeerd is
        dropped: the next operation dials afresh. A validate-only call the
        service asks to retry later is retried (``VALIDATE_RETRY_FOR``)."""
        self._require()
        give_up = time.monotonic() + VALIDATE_RETRY_FOR
        with CLIENTS.lease(self.settings) as client:
            while True:
                try:
                    return fn(client)
                except service_errors.ResourceExhausted as exc:
                    wait = exc.retry_after
                    if exc.field != "validate_only" or wait is None or time.monotonic() + wait > give_up:
                        raise ServiceError(f"{what}: {exc.line()}", exc) from None
                    time.sleep(wait)   # a validate-only call kept nothing: asking again is safe
                except service_errors.NetpeerError as exc:
                    if isinstance(exc, service_errors.Unavailable):
                        CLIENTS.drop(self.settings, client)
                    raise ServiceError(f"{what}: {exc.line()}", exc) from None

    def report(self, line: str) -> None:
        """Hands a progress line to the face, if it wants them."""
        if self.progress is not None:
            self.progress(line)


def default_namespace(client: Client) -> str:
    """The namespace to use when an input leaves it out: the token's, if it grants exactly one."""
    who = client.caller()
    if len(who["namespaces"]) != 1:
        raise ProviderError("namespace is required: the token grants "
                            + (", ".join(who["namespaces"]) or "every namespace"), path="namespace")
    return who["namespaces"][0]


__all__ = ["CLIENTS", "Session", "Settings", "default_namespace"]
