"""The console's sessions: a signed-in browser's token, kept here and only
here (never in a URL, a page, a cookie or a log line), under a random
session id that the browser holds in an HttpOnly cookie.

A session before sign-in holds only its CSRF token (the sign-in form's).
Signing in makes a new session (a new id: a session id planted before
sign-in is worth nothing after it); signing out deletes it. Sessions end
after ``IDLE`` seconds without a request, and ``LIFETIME`` after sign-in
whatever happens; at most ``MOST`` are held, the oldest anonymous ones
making room first.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
import threading
import time
from typing import Any


@dataclasses.dataclass
class Session:
    """One browser's session. ``token`` is None before sign-in."""

    sid: str
    csrf: str
    token: str | None = None
    caller: dict[str, Any] | None = None
    client: Any = None                     # netpeer.api.client.Client with ``token``
    created: float = dataclasses.field(default_factory=time.monotonic)
    seen: float = dataclasses.field(default_factory=time.monotonic)
    streams: int = 0                       # open event streams

    def csrf_ok(self, given: str | None) -> bool:
        """Whether a form's CSRF token is this session's (constant time)."""
        return bool(given) and hmac.compare_digest(given.encode(), self.csrf.encode())


class Sessions:
    """The sessions of one console, safe to use from several threads."""

    IDLE = 3600.0
    LIFETIME = 12 * 3600.0
    ANONYMOUS_IDLE = 900.0
    MOST = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def new(self, token: str | None = None, caller=None, client=None) -> Session:
        """A new session (anonymous without ``token``)."""
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), token, caller, client)
        with self._lock:
            self._expire()
            if len(self._by_id) >= self.MOST:
                anonymous = [s for s in self._by_id.values() if s.token is None]
                if not anonymous and token is not None:
                    raise OverflowError("the console holds as many sessions as it may; try again later")
                for old in sorted(anonymous, key=lambda s: s.seen)[:max(1, len(self._by_id) - self.MOST + 1)]:
                    del self._by_id[old.sid]
            self._by_id[session.sid] = session
        return session

    def get(self, sid: str | None) -> Session | None:
        """The live session of id ``sid``, or None."""
        if not sid:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._by_id.get(sid)
            if session is None or self._over(session, now):
                self._drop(sid)
                return None
            session.seen = now
            return session

    def delete(self, sid: str) -> None:
        """Ends a session now (sign-out, a token no longer accepted)."""
        with self._lock:
            self._drop(sid)

    def clear(self) -> None:
        with self._lock:
            for sid in list(self._by_id):
                self._drop(sid)

    def _over(self, s: Session, now: float) -> bool:
        if s.token is None:
            return now - s.seen > self.ANONYMOUS_IDLE
        return now - s.seen > self.IDLE or now - s.created > self.LIFETIME

    def _expire(self) -> None:
        now = time.monotonic()
        for sid in [sid for sid, s in self._by_id.items() if self._over(s, now)]:
            self._drop(sid)

    def _drop(self, sid: str) -> None:
        session = self._by_id.pop(sid, None)
        if session is not None and session.client is not None:
            session.client.close()
