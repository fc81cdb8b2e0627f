"""Where netpeerd listens, and when it may listen without TLS: the rule
every listener follows (the API's ``listen``, ``[interconnect] listen``,
``metrics_listen``). Free of grpc, so that the configuration and the
metrics endpoint check addresses as the API does."""

from __future__ import annotations

import ipaddress
import socket

from netpeer import errors


def is_local_address(address: str) -> bool:
    """Unix sockets, and addresses whose host resolves to loopback only, may
    run without TLS. The check is on the resolved addresses, never on the
    spelling: ``127.0.0.1.evil.example`` resolving elsewhere is not loopback."""
    if address.startswith("unix:"):
        return True
    host = address.rsplit(":", 1)[0].strip("[]")
    if not host:
        return False
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return False
    resolved = {info[4][0] for info in infos}
    return bool(resolved) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in resolved)


def check_listen(address: str, tls: bool, field: str = "listen",
                 remedy: str = "configure [tls] cert and key") -> None:
    """Refuses a plaintext listener anywhere but loopback or a unix socket,
    in one line naming ``field`` and the address."""
    if not tls and not is_local_address(address):
        raise errors.InvalidArgument.for_field(field, address, f"is not loopback or a unix socket: {remedy}")


def host_port(field: str, address: str, any_port: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as (host, port); port 0 (any
    free one) only with ``any_port``."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not (0 if any_port else 1) <= int(port) < 65536:
        raise errors.InvalidArgument.for_field(field, address, "must be HOST:PORT (like 127.0.0.1:9464) "
                                               "or unix:///PATH")
    return host.strip("[]"), int(port)
