"""The link between two sites over mTLS, with certificates made by
``netpeer site cert``: two OVN deployments (NB, SB, ovn-northd each) and
two netpeerds in this process, linked over TCP on loopback. A renewed
certificate is taken by a reload (what SIGHUP does), without a restart; a
certificate that names another site is refused in one line."""

from __future__ import annotations

import dataclasses
import os
import secrets
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from netpeer import errors
from netpeer.config import SiteLink
from netpeer_dev.daemons import OvnDaemons
from tests.integration.test_serve import free_port
from tests.integration.test_sites_control import IcKeys, _site_setup, bind, wait_phase
from tests.support import require_ovn, short_tmpdir, start_netpeerd, wait_until

SITES = ("east", "west")


def cert(*args: str) -> str:
    """``netpeer site cert ARGS``, as an operator runs it; its output."""
    proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "site", "cert", *args], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(params=["tcp"])
def linked(request):
    """East and west linked with mTLS over TCP on loopback (or, with the
    parameter "unix", over unix sockets); the CA in <root>/ca, each site's
    files in <root>/<site>/pki (what the operator installs there)."""
    require_ovn()
    root = short_tmpdir("np-t-")
    keys = IcKeys()
    daemons, netpeerds = keys.daemons, {}
    ports = {s: free_port() for s in SITES}
    where = {s: f"unix://{root / s / 'site.sock'}" if request.param == "unix" else f"127.0.0.1:{ports[s]}"
             for s in SITES}
    address = ("--dns", "localhost") if request.param == "unix" else ("--ip", "127.0.0.1")
    try:
        cert("ca", "--out", str(root / "ca"))
        secret = root / "east-west.secret"
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, secrets.token_urlsafe(32).encode())
        os.close(fd)
        for here in SITES:
            other = next(s for s in SITES if s != here)
            cert("issue", here, "--ca", str(root / "ca"), "--out", str(root / here / "pki"), *address)
            ovn = daemons[here] = OvnDaemons(root / here / "ovn")
            ovn.start()
            _site_setup(ovn, here, other)
        keys.start()
        for here in SITES:
            other = next(s for s in SITES if s != here)
            pki = root / here / "pki"
            netpeerds[here] = start_netpeerd(
                daemons[here], root / here, site=here, gateway_group=f"np-gw-{here}", sweep_interval="1s",
                site_listen=where[here], site_cert=pki / f"site-{here}.crt",
                site_key=pki / f"site-{here}.key", site_ca=pki / "region-ca.crt",
                sites=(SiteLink(other, where[other], secret),))
        yield root, ports, netpeerds
    finally:
        keys.stop_all(netpeerds, root)


def presented(port: int, pki: Path, site: str) -> bytes:
    """The certificate (DER) the listener on ``port`` presents to ``site`` calling with its own."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=str(pki / "region-ca.crt"))
    context.load_cert_chain(pki / f"site-{site}.crt", pki / f"site-{site}.key")
    context.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True)


def der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def link(netpeerd, site: str) -> dict:
    return next(x for x in netpeerd.client().status()["sites"] if x["site"] == site)


def wait(fn, what: str, timeout: float = 15.0):
    return wait_until(fn, timeout, f"timed out waiting for {what}", step=0.05)


def reload(netpeerd, root: Path, here: str, **changes) -> str:
    """Writes ``here``'s configuration with ``changes`` and reloads it (what SIGHUP does)."""
    config = dataclasses.replace(netpeerd.daemon.config, **changes)
    return netpeerd.daemon.reload(config.write(root / here / "netpeerd.toml"))


def test_sites_link_with_the_commands_certificates_and_a_reload_renews_them(linked):
    root, ports, sites = linked
    east_pki, west_pki = root / "east" / "pki", root / "west" / "pki"
    east, west, a, b, _ = bind(sites)
    wait_phase(east, "team-a", "net-a", "to-b", "Bound")
    wait_phase(west, "team-b", "net-b", "to-a", "Bound")
    assert wait(lambda: link(sites["east"], "west")["reachable"], "east's link to west")
    assert presented(ports["east"], west_pki, "west") == der(east_pki / "site-east.crt")

    # Rotation: a new certificate and key over the old files, then a reload; no restart.
    old = der(east_pki / "site-east.crt")
    cert("issue", "east", "--ca", str(root / "ca"), "--out", str(east_pki), "--ip", "127.0.0.1")
    assert der(east_pki / "site-east.crt") != old
    assert presented(ports["east"], west_pki, "west") == old        # files alone change nothing
    what = reload(sites["east"], root, "east")
    assert presented(ports["east"], west_pki, "west") == der(east_pki / "site-east.crt")
    assert "new connections use the new certificate" in what and "restart" not in what, what
    # East's own calls carry it too: they keep succeeding, and pairs keep binding.
    done = link(sites["east"], "west")["exchanges"]
    wait(lambda: (x := link(sites["east"], "west"))["exchanges"] > done + 1 and x["reachable"], "exchanges")
    east.create_network("team-a", "net-c", ["10.3.0.0/24"])
    west.create_network("team-b", "net-d", ["10.4.0.0/24"])
    east.create_peering("team-a", "net-c", "to-d", "net-d", "team-b", remote_site="west")
    west.create_peering("team-b", "net-d", "to-c", "net-c", "team-a", remote_site="east")
    wait_phase(east, "team-a", "net-c", "to-d", "Bound")

    # A key that is not the certificate's: the reload is refused in one line and nothing changes.
    bad = dataclasses.replace(sites["east"].daemon.config, site_key=root / "ca" / "region-ca.key")
    with pytest.raises(errors.InvalidArgument) as exc:
        sites["east"].daemon.reload(bad.write(root / "east" / "bad.toml"))
    assert exc.value.message.startswith("interconnect.key: ") and "is not the key of the certificate" in \
        exc.value.message and "\n" not in exc.value.message
    assert presented(ports["east"], west_pki, "west") == der(east_pki / "site-east.crt")
    assert sites["east"].daemon.config.site_key == east_pki / "site-east.key"


@pytest.mark.parametrize("linked", ["unix"], indirect=True)
def test_over_unix_sockets_the_certificate_is_checked_for_localhost(linked):
    """A unix socket has no host name: the caller checks the certificate
    for "localhost" (the dev stack's links, through its WAN relays)."""
    root, ports, sites = linked
    east, west, a, b, _ = bind(sites)
    wait_phase(east, "team-a", "net-a", "to-b", "Bound")
    wait_phase(west, "team-b", "net-b", "to-a", "Bound")
    for here, other in (("east", "west"), ("west", "east")):
        assert wait(lambda: link(sites[here], other)["reachable"], f"{here}'s link to {other}")


def test_a_certificate_that_names_another_site_is_refused_in_one_line(linked):
    root, ports, sites = linked
    assert wait(lambda: link(sites["east"], "west")["reachable"], "east's link to west")
    # East presents a certificate of the region's CA that names north.
    wrong = root / "east" / "wrong"
    cert("issue", "north", "--ca", str(root / "ca"), "--out", str(wrong), "--ip", "127.0.0.1")
    reload(sites["east"], root, "east", site_cert=wrong / "site-north.crt", site_key=wrong / "site-north.key")
    error = wait(lambda: link(sites["east"], "west")["last_error"], "west to refuse east's calls")
    assert error == "site: the certificate names 'north', not 'east'", error
    assert not link(sites["east"], "west")["reachable"]
    # Its own certificate again: east's calls are taken.
    pki = root / "east" / "pki"
    reload(sites["east"], root, "east", site_cert=pki / "site-east.crt", site_key=pki / "site-east.key")
    assert wait(lambda: link(sites["east"], "west")["reachable"], "east's link to west again")
