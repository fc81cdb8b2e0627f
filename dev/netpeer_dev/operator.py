"""What an operator sets up once per site for cross-site peering, and the
names both the dev stack and netpeerd use for it.

Per pair of sites, in the IC NB: the transit switch ``np-ts-<a>-<b>``
(names sorted). Per site, in its NB: ``NB_Global`` name (the availability
zone ovn-ic announces) and options (no route exchange through OVN-IC:
netpeerd programs static routes for Bound pairs only; BFD tuned for
sub-second gateway failover), and the ``HA_Chassis_Group`` ``np-gw-<site>``
of its gateway chassis with their priorities. Gateway chassis also carry
``external_ids:ovn-is-interconn=true`` in their Open_vSwitch database.
:func:`operator_commands` lists the commands; the dev stack runs exactly those.
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["SITE_NAME", "MAX_SITES", "BFD", "validate_sites", "transit_switch", "gateway_group",
           "operator_commands"]

SITE_NAME = re.compile(r"^[a-z][a-z0-9]{0,9}$")
MAX_SITES = 8
BFD = (100, 100, 3)           # bfd-min-rx ms, bfd-min-tx ms, bfd-mult


def validate_sites(text: str | Iterable[str], field: str = "--sites") -> list[str]:
    """Site names from ``east,west``: two or more, distinct, each ``[a-z][a-z0-9]{0,9}``.
    ValueError with one line naming ``field`` and the value otherwise."""
    raw = text if isinstance(text, str) else ",".join(text)
    names = [n.strip() for n in raw.split(",")]
    bad = [n for n in names if not SITE_NAME.match(n)]
    if bad:
        raise ValueError(f"{field}: {raw!r}: site name {bad[0]!r} must be a lowercase letter followed by at most "
                         f"9 lowercase letters or digits")
    if len(set(names)) != len(names):
        raise ValueError(f"{field}: {raw!r}: site names must be distinct")
    if not 2 <= len(names) <= MAX_SITES:
        raise ValueError(f"{field}: {raw!r}: needs 2 to {MAX_SITES} sites")
    return names


def transit_switch(a: str, b: str) -> str:
    """The IC transit switch of a pair of sites: ``np-ts-<a>-<b>``, names sorted."""
    return "np-ts-{}-{}".format(*sorted((a, b)))


def gateway_group(site: str) -> str:
    """The site's ``HA_Chassis_Group`` of gateway chassis: ``np-gw-<site>``."""
    return f"np-gw-{site}"


def operator_commands(site: str, all_sites: Iterable[str], gateways: Iterable[tuple[str, int]],
                      bfd: tuple[int, int, int] = BFD) -> list[tuple[str, list[str]]]:
    """What an operator runs once for ``site`` (tool, arguments): the transit
    switches of its pairs in IC NB (``--may-exist``, either site may run it),
    NB_Global, and the gateway group. The stack runs exactly these."""
    rx, tx, mult = bfd
    out = [("ovn-ic-nbctl", ["--may-exist", "ts-add", transit_switch(site, other)])
           for other in sorted(all_sites) if other != site]
    out.append(("ovn-nbctl", ["set", "NB_Global", ".", f"name={site}", "options:ic-route-adv=false",
                              "options:ic-route-learn=false", f"options:bfd-min-rx={rx}",
                              f"options:bfd-min-tx={tx}", f"options:bfd-mult={mult}"]))
    group = ["ha-chassis-group-add", gateway_group(site)]
    for chassis, priority in gateways:
        group += ["--", "ha-chassis-group-add-chassis", gateway_group(site), chassis, str(priority)]
    out.append(("ovn-nbctl", group))
    return out
