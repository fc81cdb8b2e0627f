"""A region that changes while it runs, on real control planes: three OVN
deployments (NB, SB, ovn-northd each) and three netpeerds over gRPC links.
North is configured with east and west before they know it (a link
configured on one side only says so in one line); east and west reload
their configuration and link it without a restart; then east retires it.
The packets over OVN-IC and WireGuard are in tests/sites."""

from __future__ import annotations

import dataclasses
import os
import secrets

import pytest

from netpeer.config import SiteLink
from netpeer.ovn import names
from netpeer_dev.daemons import OvnDaemons
from tests.integration.test_sites_control import IcKeys, rows, wait_phase
from tests.support import require_ovn, short_tmpdir, start_netpeerd, wait_until

NAMES = ("east", "west", "north")


def _secret(root, a: str, b: str):
    path = root / ("-".join(sorted((a, b))) + ".secret")
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, secrets.token_urlsafe(32).encode())
        os.close(fd)
    return path


def _links(root, here: str, others) -> tuple[SiteLink, ...]:
    blocks = {frozenset(p): f"169.254.{i}.0/24" for i, p in enumerate((("east", "west"), ("east", "north"),
                                                                        ("north", "west")))}
    return tuple(SiteLink(o, f"unix://{root / o / 'site.sock'}", _secret(root, here, o),
                          blocks[frozenset((here, o))]) for o in sorted(others))


@pytest.fixture
def region():
    require_ovn()
    root = short_tmpdir("np-r-")
    keys = IcKeys()
    daemons, netpeerds = keys.daemons, {}
    # East and west know each other only; north knows both.
    linked = {"east": ("west",), "west": ("east",), "north": ("east", "west")}
    try:
        for here in NAMES:
            ovn = daemons[here] = OvnDaemons(root / here / "ovn")
            ovn.start()
            for other in NAMES:
                if other != here:
                    ts = names.transit_switch(here, other)
                    ovn.nbctl("ls-add", ts, "--", "set", "Logical_Switch", ts, "other_config:interconn-ts=" + ts)
            ovn.nbctl("ha-chassis-group-add", f"np-gw-{here}")
        keys.start()
        for here in NAMES:
            netpeerds[here] = start_netpeerd(
                daemons[here], root / here, site=here, gateway_group=f"np-gw-{here}", sweep_interval="1s",
                site_listen=f"unix://{root / here / 'site.sock'}", sites=_links(root, here, linked[here]))
        yield root, netpeerds
    finally:
        keys.stop_all(netpeerds, root)


def link_status(netpeerd, site: str) -> dict:
    return next(x for x in netpeerd.client().status()["sites"] if x["site"] == site)


def reload_with(netpeerd, root, here: str, others) -> str:
    """Writes ``here``'s configuration with links to ``others`` and reloads it (what SIGHUP does)."""
    config = dataclasses.replace(netpeerd.daemon.config, sites=_links(root, here, others))
    path = config.write(root / here / "netpeerd.toml")
    return netpeerd.daemon.reload(path)


def test_a_site_joins_a_running_region_and_is_retired_again(region):
    root, sites = region
    east, north = sites["east"].client(), sites["north"].client()
    # North is configured with east, east not yet with north: north's link says why, in one line.
    error = wait_until(lambda: link_status(sites["north"], "east")["last_error"], 15, "north's link to east to fail")
    assert "'north' is not linked to site east" in error and "both sides" in error and "\n" not in error
    assert not link_status(sites["north"], "east")["reachable"]

    # East and west link north while they run (what SIGHUP does): no restart, their own pair goes on.
    a0 = east.create_network("team-a", "net-0", ["10.1.0.0/24"])
    sites["west"].client().create_network("team-b", "net-0", ["10.2.0.0/24"])
    east.create_peering("team-a", "net-0", "p", "net-0", "team-b", remote_site="west")
    sites["west"].client().create_peering("team-b", "net-0", "p", "net-0", "team-a", remote_site="east")
    wait_phase(east, "team-a", "net-0", "p", "Bound")
    pid_before = os.getpid()
    assert reload_with(sites["east"], root, "east", ("west", "north")).endswith("linked north; retired none")
    assert "linked north" in reload_with(sites["west"], root, "west", ("east", "north"))
    wait_until(lambda: link_status(sites["north"], "east")["reachable"], 15, "north's link to east to answer")

    a = east.create_network("team-a", "net-a", ["10.1.1.0/24"])
    c = north.create_network("team-c", "net-c", ["10.3.0.0/24"])
    east.create_peering("team-a", "net-a", "to-c", "net-c", "team-c", remote_site="north")
    north.create_peering("team-c", "net-c", "to-a", "net-a", "team-a", remote_site="east")
    wait_phase(east, "team-a", "net-a", "to-c", "Bound")
    wait_phase(north, "team-c", "net-c", "to-a", "Bound")
    port = names.transit_router_port(a["uid"], "north")
    wait_until(lambda: port in {r["name"] for r in rows(sites["east"], "Logical_Router_Port")}, 15,
               "east's port to north")
    assert east.get_peering("team-a", "net-0", "p")["phase"] == "Bound" and os.getpid() == pid_before

    # East retires north: its pair with north is withdrawn, saying so; its rows for that link go.
    assert reload_with(sites["east"], root, "east", ("west",)).endswith("linked no new site; retired north")
    p = east.get_peering("team-a", "net-a", "to-c")
    assert (p["phase"], p["reason"]) == ("Pending", "SiteRetired") and "north" in p["message"]
    wait_until(lambda: port not in {r["name"] for r in rows(sites["east"], "Logical_Router_Port")}
               and not any(names.transit_switch("east", "north") in str(r)
                           for r in rows(sites["east"], "Logical_Switch_Port") if "netpeer" in str(r["external_ids"])),
               15, "east's rows for the link to north to go")
    assert [x["site"] for x in east.status()["sites"]] == ["west"]
    assert east.get_peering("team-a", "net-0", "p")["phase"] == "Bound"     # the other link is untouched
    # A bad reload changes nothing and says why in one line.
    bad = dataclasses.replace(sites["east"].daemon.config,
                              sites=tuple(dataclasses.replace(x, transit_ipv4="169.254.9.0/24")
                                          for x in _links(root, "east", ("west",))))
    with pytest.raises(Exception, match="sites.west.transit_ipv4: '169.254.9.0/24' differs from the running"):
        sites["east"].daemon.reload(bad.write(root / "east" / "bad.toml"))
    assert [x["site"] for x in east.status()["sites"]] == ["west"]
