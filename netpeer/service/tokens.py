"""Credentials: bearer tokens ``np_<id>_<secret>``, stored hashed.

The store keeps the SHA-256 of the secret (secrets are 256-bit random, so a
slow hash adds nothing); verification compares hashes in constant time and
does the same work for unknown ids, so look-ups reveal nothing by timing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from typing import Callable, Iterable

from netpeer.core import validate
from netpeer.core.models import Caller, Token
from netpeer.errors import InvalidArgument, PermissionDenied, Unauthenticated
from netpeer.store.base import Store

TOKEN_PREFIX = "np"


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# What an unknown id is compared against: the same work as a known one.
_NO_SUCH_TOKEN = hash_secret("x" * 43)


class Tokens:
    """Authenticates callers and mints tokens."""

    def __init__(self, store: Store, clock: Callable[[], datetime]):
        self.store = store
        self.clock = clock

    def authenticate(self, token: str | None) -> Caller:
        """The caller a bearer token stands for."""
        if not token:
            raise Unauthenticated("missing credentials: pass a token (--token or NETPEER_TOKEN)")
        parts = token.strip().split("_")
        if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
            raise Unauthenticated("invalid token")
        with self.store.read() as tx:
            stored = tx.get_token(parts[1])
        expected = stored.secret_hash if stored else _NO_SUCH_TOKEN
        if not hmac.compare_digest(expected, hash_secret(parts[2])) or stored is None:
            raise Unauthenticated("invalid token")
        return Caller(stored.token_id, stored.namespaces, stored.admin)

    def bootstrap_admin(self, token: str) -> None:
        """Store (or refresh) the admin token given in the configuration."""
        parts = token.strip().split("_")
        if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or len(parts[2]) < 16:
            raise InvalidArgument.for_field("admin_token", "<hidden>", "must look like np_<id>_<secret>")
        with self.store.write() as tx:
            tx.put_token(Token(parts[1], hash_secret(parts[2]), frozenset(), True, "admin (configuration)"))

    def create(self, caller: Caller, namespaces: Iterable[str], description: str = "") -> tuple[str, Token]:
        if not caller.admin:
            raise PermissionDenied("only an admin token may create tokens")
        nss = list(namespaces)
        if not nss:
            raise InvalidArgument.for_field("namespaces", "[]", "must list at least one namespace")
        clean = frozenset(validate.name(f"namespaces[{i}]", ns) for i, ns in enumerate(nss))
        description = validate.description("description", description)
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32).replace("_", "-")
        token = Token(token_id, hash_secret(secret), clean, False, description, self.clock())
        with self.store.write() as tx:
            tx.put_token(token)
        return f"{TOKEN_PREFIX}_{token_id}_{secret}", token
