"""The global flags, and what every command's handler is given: the
settings resolved from them, then the environment, and the client they make."""

from __future__ import annotations

import argparse
import os

from netpeer import errors
from netpeer.core import validate


def global_options() -> argparse.ArgumentParser:
    """A parent parser of the flags every command takes (a new one each call)."""
    g = argparse.ArgumentParser(add_help=False)
    s = argparse.SUPPRESS
    g.add_argument("--endpoint", default=s, help="netpeerd address (env NETPEER_ENDPOINT), e.g. unix:///path or host:port; "
                                                      "several replicas: comma-separated")
    g.add_argument("--token-file", default=s, metavar="PATH",
                   help="read the bearer token from this file (env NETPEER_TOKEN_FILE); preferred over --token")
    g.add_argument("--token", default=s, help="bearer token (env NETPEER_TOKEN); visible to other users in ps: "
                                              "prefer --token-file or the environment")
    g.add_argument("--ca-cert", default=s, help="CA certificate for TLS (env NETPEER_CA_CERT)")
    g.add_argument("--client-cert", default=s, help="client certificate for mutual TLS (env NETPEER_CLIENT_CERT)")
    g.add_argument("--client-key", default=s, help="client key for mutual TLS (env NETPEER_CLIENT_KEY)")
    g.add_argument("-n", "--namespace", default=s, help="namespace (default: the token's, when it grants one)")
    g.add_argument("-o", "--output", choices=("table", "json"), default=s, help="output format (default table)")
    return g


class Context:
    """Settings resolved from flags, then the environment."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        env = os.environ
        self.endpoint = getattr(args, "endpoint", None) or env.get("NETPEER_ENDPOINT", "")
        self.token = _token_from(getattr(args, "token_file", None) or env.get("NETPEER_TOKEN_FILE"),
                                 getattr(args, "token", None) or env.get("NETPEER_TOKEN", ""))
        self.ca_cert = getattr(args, "ca_cert", None) or env.get("NETPEER_CA_CERT")
        self.client_cert = getattr(args, "client_cert", None) or env.get("NETPEER_CLIENT_CERT")
        self.client_key = getattr(args, "client_key", None) or env.get("NETPEER_CLIENT_KEY")
        self.output = getattr(args, "output", None) or "table"
        self._client = None
        self._namespace = getattr(args, "namespace", None) or env.get("NETPEER_NAMESPACE")

    @property
    def client(self):
        if self._client is None:
            from netpeer.api.client import Client
            if not self.token:
                raise errors.Unauthenticated("no token: pass --token or set NETPEER_TOKEN")
            self._client = Client(self.endpoint, self.token, self.ca_cert, self.client_cert, self.client_key)
        return self._client

    @property
    def namespace(self) -> str:
        if self._namespace:
            return validate.name("--namespace", self._namespace)
        who = self.client.caller()
        if len(who["namespaces"]) == 1:
            self._namespace = who["namespaces"][0]
            return self._namespace
        raise errors.InvalidArgument.for_field(
            "--namespace", "", "is required: the token grants "
            + (", ".join(who["namespaces"]) if who["namespaces"] else "every namespace (admin)"))


def _token_from(path: str | None, token: str) -> str:
    """The token: from ``path`` when given (a file readable by its owner only
    is best), else ``token``."""
    if not path:
        return token
    try:
        text = open(os.path.expanduser(path), encoding="utf-8").read().strip()
    except OSError as exc:
        raise errors.InvalidArgument.for_field("--token-file", path, f"cannot be read ({exc.strerror})") from None
    if not text or len(text.split()) != 1:
        raise errors.InvalidArgument.for_field("--token-file", path, "must hold exactly one token")
    return text
