"""Credentials: bearer tokens ``np_<id>_<secret>``, stored hashed.

The store keeps the SHA-256 of the secret (secrets are 256-bit random, so a
slow hash adds nothing); verification compares hashes in constant time and
the store does the same work for unknown ids (it reads a decoy row), so a
look-up reveals nothing by timing (tests/trust/test_enumeration.py).
Tokens may expire; an admin lists and revokes them; nothing is cached, so a
revocation takes effect on the very next call, on every replica.

The admin token comes from the configuration. Replacing its file and
restarting rotates it: the previous admin token is revoked.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta
from typing import Callable, Iterable

from netpeer.core import validate
from netpeer.core.models import Caller, Token
from netpeer.errors import InvalidArgument, NotFound, PermissionDenied, Unauthenticated
from netpeer.reasons import Reason
from netpeer.store.base import Store

TOKEN_PREFIX = "np"


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# What an unknown id is compared against: the same work as a known one.
_NO_SUCH_TOKEN = hash_secret("x" * 43)
ADMIN_DESCRIPTION = "admin (configuration)"


def parse(token: str) -> tuple[str, str] | None:
    """(id, secret) of a well-formed token, else None."""
    parts = token.strip().split("_")
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


class Tokens:
    """Authenticates callers and mints tokens."""

    def __init__(self, store: Store, clock: Callable[[], datetime]):
        self.store = store
        self.clock = clock
        #: Called after a revocation (open watches re-authenticate at once).
        self.on_revoke: list[Callable[[], None]] = []

    def authenticate(self, token: str | None) -> Caller:
        """The caller a bearer token stands for."""
        if not token:
            raise Unauthenticated("missing credentials: pass a token (--token-file, --token or NETPEER_TOKEN)",
                                  reason=Reason.TOKEN_MISSING)
        parsed = parse(token)
        if parsed is None:
            raise Unauthenticated("invalid token", reason=Reason.TOKEN_INVALID)
        with self.store.read() as tx:
            stored = tx.get_token(parsed[0])
        expected = stored.secret_hash if stored else _NO_SUCH_TOKEN
        if not hmac.compare_digest(expected, hash_secret(parsed[1])) or stored is None:
            raise Unauthenticated("invalid token", reason=Reason.TOKEN_INVALID)
        if stored.expired(self.clock()):
            raise Unauthenticated(f"token {stored.token_id} expired at {_fmt(stored.expires_at)}; ask for a new one",
                                  reason=Reason.TOKEN_EXPIRED)
        return Caller(stored.token_id, stored.namespaces, stored.admin)

    def bootstrap_admin(self, token: str) -> None:
        """Stores the admin token given in the configuration and revokes any
        other admin token (a previous configuration's)."""
        parsed = parse(token)
        if parsed is None or len(parsed[1]) < 16:
            raise InvalidArgument.for_field("admin_token", "<hidden>", "must look like np_<id>_<secret>")
        with self.store.write() as tx:
            for old in tx.list_tokens():
                if old.admin and old.token_id != parsed[0]:
                    tx.delete_token(old.token_id)
            tx.put_token(Token(parsed[0], hash_secret(parsed[1]), frozenset(), True, ADMIN_DESCRIPTION,
                               self.clock()))

    def create(self, caller: Caller, namespaces: Iterable[str], description: str = "",
               ttl: timedelta | None = None) -> tuple[str, Token]:
        if not caller.admin:
            raise PermissionDenied("only an admin token may create tokens", reason=Reason.ADMIN_REQUIRED)
        nss = list(namespaces)
        if not nss:
            raise InvalidArgument.for_field("namespaces", "[]", "must list at least one namespace")
        clean = frozenset(validate.name(f"namespaces[{i}]", ns) for i, ns in enumerate(nss))
        description = validate.description("description", description)
        expires = None
        if ttl is not None:
            expires = self.clock() + validate.ttl("ttl", ttl)
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32).replace("_", "-")
        token = Token(token_id, hash_secret(secret), clean, False, description, self.clock(), expires)
        with self.store.write() as tx:
            tx.put_token(token)
        return f"{TOKEN_PREFIX}_{token_id}_{secret}", token

    def list(self, caller: Caller) -> list[Token]:
        if not caller.admin:
            raise PermissionDenied("only an admin token may list tokens", reason=Reason.ADMIN_REQUIRED)
        with self.store.read() as tx:
            return tx.list_tokens()

    def revoke(self, caller: Caller, token_or_id: str) -> Token:
        """Revokes a token given by its id or as a whole; the revoked token."""
        if not caller.admin:
            raise PermissionDenied("only an admin token may revoke tokens", reason=Reason.ADMIN_REQUIRED)
        value = (token_or_id or "").strip()
        parsed = parse(value)
        token_id = parsed[0] if parsed else value
        if not token_id or len(token_id) > 64 or not token_id.replace("-", "").isalnum():
            raise InvalidArgument.for_field("token", value if not parsed else f"np_{token_id}_...",
                                            "is not a token id (see `netpeer token list`) or a token")
        with self.store.write() as tx:
            stored = tx.get_token(token_id)
            if stored is None:
                raise NotFound(f"token: {token_id!r} not found (see `netpeer token list`)", field="token",
                               value=token_id, reason=Reason.TOKEN_NOT_FOUND)
            if stored.admin:
                raise InvalidArgument.for_field(
                    "token", token_id, "is the admin token of the configuration: rotate it by replacing "
                    "admin_token_file and restarting netpeerd")
            tx.delete_token(token_id)
        for notify in list(self.on_revoke):
            try:
                notify()
            except Exception:   # a listener gone away must not fail the revocation
                pass
        return stored


def _fmt(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ") if t else "never"
