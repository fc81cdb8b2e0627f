"""Input validation. Every check raises ``InvalidArgument`` with a one-line
message that names the field and the value; nothing here touches state."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import netaddr

from netpeer.core.models import Route
from netpeer.errors import InvalidArgument

NAME_MAX = 63
DESCRIPTION_MAX = 1024
MAX_SUBNETS = 16
MAX_ROUTES = 256
TTL_MIN = timedelta(seconds=1)
TTL_MAX = timedelta(days=365)
RESERVED_PEERING_NAMES = frozenset({"internal", "external"})

_NAME = re.compile(r"^[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_TTL = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$")
_TTL_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

# Prefixes no subnet or route may touch: they are not routable between
# networks, or (169.254.0.0/16 and TRANSIT_IPV6) they address the links
# between sites.
TRANSIT_IPV6 = "fd6e:7065::/32"
_SPECIAL = [netaddr.IPNetwork(p) for p in (
    "0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
    "::/128", "::1/128", "::ffff:0:0/96", "fe80::/10", "ff00::/8", TRANSIT_IPV6,
)]
# A site's name: short (it is part of OVN port names), lower case.
_SITE = re.compile(r"^[a-z][a-z0-9]{0,9}$")
_SUBNET_LEN = {4: (8, 30), 6: (16, 126)}
_ROUTE_LEN = {4: (1, 32), 6: (1, 128)}


def name(field: str, value: object, *, peering: bool = False) -> str:
    """LXD's rules: 1-63 ASCII letters, digits and dashes, starting with a
    letter, not ending with a dash; peerings may not be internal/external."""
    if not isinstance(value, str) or value == "":
        raise InvalidArgument.for_field(field, value, "is required")
    if len(value) > NAME_MAX:
        raise InvalidArgument.for_field(field, value, f"is longer than {NAME_MAX} characters")
    if not _NAME.fullmatch(value):
        raise InvalidArgument.for_field(
            field, value,
            "is not a valid name: use 1-63 ASCII letters, digits and dashes, "
            "starting with a letter and not ending with a dash")
    if peering and value.lower() in RESERVED_PEERING_NAMES:
        raise InvalidArgument.for_field(field, value, "is reserved")
    return value


def site(field: str, value: object) -> str:
    """A site name: 1-10 lower-case ASCII letters and digits, starting with a letter."""
    if not isinstance(value, str) or value == "":
        raise InvalidArgument.for_field(field, value, "is required")
    if not _SITE.fullmatch(value):
        raise InvalidArgument.for_field(field, value, "is not a valid site name: use 1-10 lower-case ASCII letters "
                                        "and digits, starting with a letter")
    return value


def uid(field: str, value: object) -> str:
    try:
        parsed = uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgument.for_field(field, value, "is not a UUID") from None
    if str(parsed) != value:
        raise InvalidArgument.for_field(field, value, f"is not in canonical form; use {parsed}")
    return value


def description(field: str, value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument.for_field(field, value, "must be a string")
    if len(value) > DESCRIPTION_MAX:
        raise InvalidArgument.for_field(field, value, f"is longer than {DESCRIPTION_MAX} characters")
    if any(ord(c) < 0x20 and c not in "\t" or ord(c) == 0x7F for c in value):
        raise InvalidArgument.for_field(field, value, "contains control characters")
    return value


def _network(field: str, value: object) -> netaddr.IPNetwork:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument.for_field(field, value, "is required")
    if "/" not in value:
        raise InvalidArgument.for_field(field, value, "is not a CIDR prefix (like 10.0.0.0/24)")
    address, _, length = value.strip().partition("/")
    try:
        ip = netaddr.IPAddress(address, flags=netaddr.INET_PTON)  # no legacy shorthands
        if not length.isdigit() or len(length) > 3 or (length.startswith("0") and length != "0"):
            raise ValueError  # "/024" is not a prefix length anyone means
        net = netaddr.IPNetwork(f"{ip}/{int(length)}")
    except (netaddr.AddrFormatError, ValueError, TypeError):
        raise InvalidArgument.for_field(field, value, "is not a CIDR prefix (like 10.0.0.0/24)") from None
    for special in _SPECIAL:
        if net.version == special.version and (net in special or special in net):
            raise InvalidArgument.for_field(
                field, value, f"overlaps the reserved range {special}" if net.prefixlen > 0
                else "covers every address")
    if net.ip != net.network:
        raise InvalidArgument.for_field(
            field, value, f"has host bits set; did you mean {net.cidr}?")
    return net


def subnet(field: str, value: object) -> str:
    net = _network(field, value)
    low, high = _SUBNET_LEN[net.version]
    if not low <= net.prefixlen <= high:
        raise InvalidArgument.for_field(
            field, value, f"must have a prefix length between /{low} and /{high} for IPv{net.version}")
    return str(net)


def route_prefix(field: str, value: object) -> str:
    net = _network(field, value)
    low, high = _ROUTE_LEN[net.version]
    if not low <= net.prefixlen <= high:
        raise InvalidArgument.for_field(field, value, f"must have a prefix length between /{low} and /{high}")
    return str(net)


def parse_route(field: str, value: object) -> Route:
    """``PREFIX`` or ``PREFIX via NEXTHOP`` (the CLI form)."""
    if isinstance(value, Route):
        return value
    if not isinstance(value, str):
        raise InvalidArgument.for_field(field, value, "is not a route (PREFIX or 'PREFIX via ADDRESS')")
    parts = value.split()
    if len(parts) == 1:
        return Route(parts[0])
    if len(parts) == 3 and parts[1] == "via":
        return Route(parts[0], parts[2])
    raise InvalidArgument.for_field(field, value, "is not a route (PREFIX or 'PREFIX via ADDRESS')")


def prefixes(subnets: object, routes: object) -> tuple[tuple[str, ...], tuple[Route, ...]]:
    """Validates a network's subnets and routes together: each alone, then no
    duplicate or overlap among them, and each next hop inside a subnet. Every
    problem found is reported at once (``InvalidArgument.several``): a check
    that needs a part found invalid is skipped, not reported again."""
    if not isinstance(subnets, (list, tuple)) or not subnets:
        raise InvalidArgument.for_field("subnets", subnets if subnets else "[]", "must list at least one subnet")
    if len(subnets) > MAX_SUBNETS:
        raise InvalidArgument.for_field("subnets", f"{len(subnets)} entries", f"has more than {MAX_SUBNETS} entries")
    if not isinstance(routes, (list, tuple)):
        raise InvalidArgument.for_field("routes", routes, "must be a list")
    if len(routes) > MAX_ROUTES:
        raise InvalidArgument.for_field("routes", f"{len(routes)} entries", f"has more than {MAX_ROUTES} entries")
    problems: list[InvalidArgument] = []

    def checked(fn, *args):
        try:
            return fn(*args)
        except InvalidArgument as exc:
            problems.append(exc)
            return None
    valid = [(f"subnets[{i}]", c) for i, s in enumerate(subnets) if (c := checked(subnet, f"subnets[{i}]", s))]
    clean_subnets = tuple(c for _, c in valid)
    labelled = [(f, netaddr.IPNetwork(c)) for f, c in valid]
    subnets_ok = len(clean_subnets) == len(subnets)  # a next hop is checked against every subnet, or not at all
    clean_routes: list[Route] = []
    for i, raw in enumerate(routes):
        r = checked(parse_route, f"routes[{i}]", raw)
        prefix = r and checked(route_prefix, f"routes[{i}].prefix", r.prefix)
        hop = None
        if r and r.next_hop:
            if subnets_ok:
                hop = checked(_next_hop, f"routes[{i}].next_hop", r.next_hop, clean_subnets)
            else:
                hop = checked(_address, f"routes[{i}].next_hop", r.next_hop)
            if prefix and hop and netaddr.IPAddress(hop).version != (family := netaddr.IPNetwork(prefix).version):
                problems.append(InvalidArgument.for_field(
                    f"routes[{i}].next_hop", r.next_hop, f"is an IPv{6 if family == 4 else 4} address for the "
                    f"IPv{family} prefix {prefix}: a route's next hop must be of its family"))
        if prefix:
            labelled.append((f"routes[{i}].prefix", netaddr.IPNetwork(prefix)))
            clean_routes.append(Route(prefix, hop))
    for i, (fa, a) in enumerate(labelled):
        for fb, b in labelled[:i]:
            if a.version == b.version and (a in b or b in a):
                what = "duplicates" if a == b else "overlaps"
                problems.append(InvalidArgument.for_field(fa, str(a), f"{what} {fb} ({b})"))
                break
    families = {netaddr.IPNetwork(c).version for c in clean_subnets}
    for fa, a in labelled:
        if subnets_ok and fa.startswith("routes[") and a.version not in families:
            problems.append(InvalidArgument.for_field(
                fa, str(a), f"needs an IPv{a.version} subnet on the network to be routed to peers"))
    if problems:
        raise InvalidArgument.several(problems)
    return clean_subnets, tuple(clean_routes)


def _address(field: str, value: str) -> str:
    try:
        return str(netaddr.IPAddress(value))
    except (netaddr.AddrFormatError, ValueError, TypeError):
        raise InvalidArgument.for_field(field, value, "is not an IP address") from None


def _next_hop(field: str, value: str, subnets: tuple[str, ...]) -> str:
    ip = netaddr.IPAddress(_address(field, value))
    for s in subnets:
        net = netaddr.IPNetwork(s)
        if ip.version == net.version and ip in net:
            if ip in (net.network, net.broadcast) or ip == gateway(net):
                raise InvalidArgument.for_field(field, value, f"is a reserved address of {net}")
            return str(ip)
    raise InvalidArgument.for_field(field, value, "is not inside any of the network's subnets")


def gateway(net: netaddr.IPNetwork) -> netaddr.IPAddress:
    """The router's address on a subnet: the first usable one."""
    return netaddr.IPAddress(net.first + 1, net.version)


def ttl(field: str, value: object) -> timedelta:
    """A TTL as a timedelta, from seconds or text like ``90s``, ``30m``, ``7d``."""
    if isinstance(value, timedelta):
        td = value
    elif isinstance(value, bool):
        raise InvalidArgument.for_field(field, value, "is not a duration (like 90s, 30m, 12h, 7d)")
    elif isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidArgument.for_field(field, value, "is not a duration")
        if abs(value) > TTL_MAX.total_seconds() * 10:
            raise InvalidArgument.for_field(field, value, f"must be between {_fmt(TTL_MIN)} and {_fmt(TTL_MAX)}")
        td = timedelta(seconds=value)
    elif isinstance(value, str):
        m = _TTL.fullmatch(value)
        if not m or len(m.group(1)) > 12:
            raise InvalidArgument.for_field(field, value, "is not a duration (like 90s, 30m, 12h, 7d)")
        td = timedelta(seconds=int(m.group(1)) * _TTL_UNITS[m.group(2)])
    else:
        raise InvalidArgument.for_field(field, value, "is not a duration (like 90s, 30m, 12h, 7d)")
    # Whole seconds, as the store keeps them: a fractional TTL made a peering
    # expire later than the ttl and expires_at the API reports.
    td = timedelta(seconds=int(td.total_seconds()))
    if not TTL_MIN <= td <= TTL_MAX:
        raise InvalidArgument.for_field(
            field, value if not isinstance(value, timedelta) else _fmt(value),
            f"must be between {_fmt(TTL_MIN)} and {_fmt(TTL_MAX)}")
    return td


def _fmt(td: timedelta) -> str:
    return format_duration(td)


def format_duration(td: timedelta) -> str:
    """The shortest exact form in days, hours, minutes or seconds: ``7d``, ``90s``."""
    seconds = int(td.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
