"""What both providers share: settings, the client, unknown values, errors."""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

from pulumi.dynamic import ConfigureRequest
from pulumi.output import Unknown
from pulumi.runtime.rpc import UNKNOWN

from netpeer import errors
from netpeer.api.client import Client

# Filled by ``configure`` in the provider process. Module state, not provider
# state: nothing here is ever pickled into the stack.
_SETTINGS: dict[str, str] = {}
_LOCK = threading.Lock()
_KEYS = {"endpoint": "NETPEER_ENDPOINT", "token": "NETPEER_TOKEN", "caCert": "NETPEER_CA_CERT",
         "clientCert": "NETPEER_CLIENT_CERT", "clientKey": "NETPEER_CLIENT_KEY"}


class NetpeerProviderError(Exception):
    """One line for the user: what failed, the field and value, what to do."""


def configure(req: ConfigureRequest) -> None:
    with _LOCK:
        for key in _KEYS:
            value = req.config.get(f"netpeer:{key}")
            if value:
                _SETTINGS[key] = str(value)


def setting(key: str) -> str | None:
    return _SETTINGS.get(key) or os.environ.get(_KEYS[key]) or None


def client() -> Client:
    endpoint = setting("endpoint")
    if not endpoint:
        raise NetpeerProviderError(
            "netpeer:endpoint is not set: run `pulumi config set netpeer:endpoint <address>` "
            "or export NETPEER_ENDPOINT")
    token = setting("token")
    if not token:
        raise NetpeerProviderError(
            "netpeer:token is not set: run `pulumi config set --secret netpeer:token <token>` "
            "or export NETPEER_TOKEN")
    return Client(endpoint, token, setting("caCert"), setting("clientCert"), setting("clientKey"))


def call(what: str, fn: Callable[[Client], Any]) -> Any:
    """Runs ``fn`` with a fresh client; service errors become one clear line."""
    try:
        with client() as c:
            return fn(c)
    except errors.NetpeerError as exc:
        raise NetpeerProviderError(f"{what}: {exc.message}") from None


def known(value: Any) -> bool:
    """False for values Pulumi does not know yet (during preview): they arrive
    as ``pulumi.output.Unknown`` or as the placeholder string, whatever the
    field's type."""
    if isinstance(value, Unknown):
        return False
    if isinstance(value, str):
        return value != UNKNOWN
    if isinstance(value, (list, tuple)):
        return all(known(v) for v in value)
    if isinstance(value, dict):
        return all(known(v) for v in value.values())
    return True
