"""The parts of netpeerd's configuration file that are read as a whole
(``netpeer.config.Config.load`` reads the top-level settings and calls
these): the tables (``[metrics]``, ``[quotas]``, ``[watch]``, ``[limits]``),
the cross-site settings (``site``, ``[interconnect]``, ``[sites.NAME]``,
checked together) and the store's URL. Each mistake is one line naming the
setting and its value; nothing here knows ``Config``."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

from netpeer.core import validate
from netpeer.core.models import Quotas, TokenLimits
from netpeer.errors import InvalidArgument
from netpeer.ovn.connection import parse_remotes


@dataclasses.dataclass(frozen=True)
class SiteLink:
    """Another site, as this netpeerd reaches it (``[sites.NAME]``)."""

    name: str
    endpoint: str
    secret_file: Path
    transit_ipv4: str = "169.254.0.0/16"
    ca_cert: Path | None = None   # overrides [interconnect] ca for this site



def metrics(raw: dict, p) -> dict:
    """``metrics_listen`` and ``[metrics]`` as Config fields (checked by
    ``Config.check_metrics`` once the Config is made)."""
    listen = raw.get("metrics_listen")
    if listen is not None and (not isinstance(listen, str) or not listen):
        raise InvalidArgument.for_field("metrics_listen", listen, "must be HOST:PORT (like 127.0.0.1:9464) "
                                        "or unix:///PATH")
    if isinstance(listen, str) and listen.startswith("unix:") and not listen.startswith("unix:///"):
        listen = "unix://" + str(p(listen[len("unix:"):], "metrics_listen"))
    table = read_table(raw, "metrics", {"cert", "key", "bearer_token_file", "basic_auth_username",
                                    "basic_auth_password_file"})
    user = table.get("basic_auth_username")
    if user is not None and not isinstance(user, str):
        raise InvalidArgument.for_field("metrics.basic_auth_username", user, "must be a string")
    return {"metrics_listen": listen, "metrics_basic_auth_username": user,
            **{f"metrics_{k}": p(table.get(k), f"metrics.{k}")
               for k in ("cert", "key", "bearer_token_file", "basic_auth_password_file")}}


def console_listen(value) -> str | None:
    if value is not None and (not isinstance(value, str) or not value or value.startswith("unix:")):
        raise InvalidArgument.for_field("console_listen", value, "must be HOST:PORT (like 127.0.0.1:8443): "
                                        "browsers reach the console over TCP")
    return value


def check_url(url: str) -> None:
    """A PostgreSQL URL names a database; a password belongs in ~/.pgpass or
    PGPASSWORD, not in a file that logs and status may quote."""
    from urllib.parse import urlsplit
    try:
        parts = urlsplit(url)
        parts.port
    except ValueError as exc:
        raise InvalidArgument.for_field("store", url, f"is not a valid PostgreSQL URL ({exc})") from None
    if not parts.path.strip("/") and "dbname=" not in parts.query:
        raise InvalidArgument.for_field("store", url, "names no database: postgresql://[user@]host[:port]/DATABASE")


def check_known(raw: dict, known: set[str], prefix: str) -> None:
    for key in raw:
        if key not in known:
            raise InvalidArgument.for_field(f"{prefix}{key}", raw[key],
                                            f"is not a known setting ({', '.join(sorted(known))})")


def read_table(raw: dict, name: str, known: set[str]) -> dict:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise InvalidArgument.for_field(name, value, f"must be a table ([{name}])")
    check_known(value, known, f"{name}.")
    return value


def sites(raw: dict, p) -> dict:
    """``site``, ``[interconnect]`` and ``[sites.NAME]``, checked together."""
    ic = read_table(raw, "interconnect", {"listen", "gateway_group", "ovn_sb", "cert", "key", "ca"})
    links = read_table(raw, "sites", set(raw.get("sites", {}) if isinstance(raw.get("sites"), dict) else ()))
    site = raw.get("site", "")
    if not site:
        if ic or links:
            raise InvalidArgument.for_field("site", "", "is required with [interconnect] or [sites.*]")
        return {}
    validate.site("site", site)
    if not links:
        raise InvalidArgument.for_field("sites", "", f"site {site!r} needs at least one other site ([sites.NAME])")
    if not ic.get("gateway_group"):
        raise InvalidArgument.for_field("interconnect.gateway_group", "", "is required with site")
    if not ic.get("listen"):
        raise InvalidArgument.for_field("interconnect.listen", "", "is required with site (where the other sites' "
                                        "netpeerds reach this one)")
    if ("cert" in ic) != ("key" in ic):
        raise InvalidArgument.for_field("interconnect", "cert/key", "needs both cert and key")
    if "ovn_sb" in ic:
        try:
            parse_remotes(ic["ovn_sb"] if isinstance(ic["ovn_sb"], str) else "")
        except ValueError as exc:
            raise InvalidArgument.for_field("interconnect.ovn_sb", ic["ovn_sb"], str(exc)) from None
    out = []
    blocks = {}
    for name, table in sorted(links.items()):
        validate.site(f"sites.{name}", name)
        if name == site:
            raise InvalidArgument.for_field(f"sites.{name}", name, "is this netpeerd's own site")
        if not isinstance(table, dict):
            raise InvalidArgument.for_field(f"sites.{name}", table, f"must be a table ([sites.{name}])")
        check_known(table, {"endpoint", "secret_file", "transit_ipv4", "ca_cert"}, f"sites.{name}.")
        for key in ("endpoint", "secret_file"):
            if not isinstance(table.get(key), str) or not table[key]:
                raise InvalidArgument.for_field(f"sites.{name}.{key}", table.get(key, ""), "is required")
        block = _transit_block(f"sites.{name}.transit_ipv4", table.get("transit_ipv4", "169.254.0.0/16"))
        for other, theirs in blocks.items():
            if block.overlaps(theirs):
                raise InvalidArgument.for_field(f"sites.{name}.transit_ipv4", str(block),
                                                f"overlaps that of sites.{other} ({theirs}): give each link its own "
                                                "block of 169.254.0.0/16, the same on both sides of the link")
        blocks[name] = block
        out.append(SiteLink(name, table["endpoint"], p(table["secret_file"], f"sites.{name}.secret_file"), str(block),
                            p(table.get("ca_cert"), f"sites.{name}.ca_cert")))
    return {"site": site, "site_listen": ic["listen"], "gateway_group": ic["gateway_group"],
            "ovn_sb": ic.get("ovn_sb", ""),
            "site_cert": p(ic.get("cert"), "interconnect.cert"), "site_key": p(ic.get("key"), "interconnect.key"),
            "site_ca": p(ic.get("ca"), "interconnect.ca"), "sites": tuple(out)}


def _transit_block(field: str, value) -> "ipaddress.IPv4Network":
    import ipaddress
    try:
        block = ipaddress.ip_network(str(value))
    except ValueError:
        raise InvalidArgument.for_field(field, value, "is not an IPv4 prefix (like 169.254.0.0/16)") from None
    if block.version != 4 or not block.subnet_of(ipaddress.ip_network("169.254.0.0/16")) or block.prefixlen > 24:
        raise InvalidArgument.for_field(field, value, "must be a block of 169.254.0.0/16, /16 to /24")
    return block


def quotas(raw: dict) -> Quotas:
    return counts(raw, "quotas", Quotas, 10_000_000)


def counts(raw: dict, name: str, kind, most: int):
    """A table of whole numbers from 1 to ``most`` (``[quotas]``, ``[watch]``) as ``kind``."""
    table = read_table(raw, name, {f.name for f in dataclasses.fields(kind)})
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise InvalidArgument.for_field(f"{name}.{key}", value, f"must be a whole number from 1 to {most}")
    return kind(**table)


def limits(raw: dict) -> TokenLimits:
    table = read_table(raw, "limits", {f.name for f in dataclasses.fields(TokenLimits)})
    share = table.get("validate_only_lock_share", TokenLimits.validate_only_lock_share)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise InvalidArgument.for_field("limits.validate_only_lock_share", share, "must be a number above 0 and "
                                        "at most 1 (seconds of validation per second)")
    burst = validate.ttl("limits.validate_only_burst", table.get("validate_only_burst", "2s"))
    if burst > timedelta(hours=1):
        raise InvalidArgument.for_field("limits.validate_only_burst", table["validate_only_burst"],
                                        "must be from 1s to 1h")
    per_minute = table.get("conflict_disclosures_per_minute", TokenLimits.conflict_disclosures_per_minute)
    if isinstance(per_minute, bool) or not isinstance(per_minute, int) or not 1 <= per_minute <= 10_000:
        raise InvalidArgument.for_field("limits.conflict_disclosures_per_minute", per_minute,
                                        "must be a whole number from 1 to 10000")
    return TokenLimits(float(share), burst, per_minute)
