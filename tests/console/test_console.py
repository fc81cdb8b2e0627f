"""The web console in a real browser (Debian's Chromium, driven by
Playwright) against a real netpeerd on real OVN: sign-in, isolation
between tenants, a peering going from Pending to Bound live while the
other tenant consents on the CLI, the admin's view of two linked sites
with the link cut and healed, and the console's security: CSRF, cookie
flags, Content-Security-Policy, logout, a revoked token, and no token in
a URL or a log line."""

from __future__ import annotations

import dataclasses
import http.client
import logging
import os
import secrets
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from netpeer.config import SiteLink
from netpeer_dev.daemons import OvnDaemons
from tests.console.conftest import console_url, sign_in
from tests.integration.test_sites_control import IcKeys, _site_setup
from tests.support import require_ovn, short_tmpdir, start_netpeerd, wait_until

SHOTS = os.environ.get("NETPEER_CONSOLE_SCREENSHOTS")   # a directory: the tests save the docs' screenshots there


def shot(page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / f"console-{name}.png"), full_page=False)


def tenants(netpeerd):
    a, b = netpeerd.token("team-a"), netpeerd.token("team-b")
    ca, cb = netpeerd.client(a), netpeerd.client(b)
    ca.create_network("team-a", "net-a", ["10.1.0.0/24"])
    ca.create_network("team-a", "web", ["10.1.1.0/24"])
    cb.create_network("team-b", "net-b", ["10.2.0.0/24"])
    cb.create_network("team-b", "secret-b", ["10.2.1.0/24"])
    return a, b, ca, cb


def request(netpeerd, method: str, path: str, *, cookie: str | None = None, body: dict | None = None):
    """One HTTP request to the console, outside the browser (what another page or a script could send)."""
    conn = http.client.HTTPConnection("127.0.0.1", netpeerd.daemon.console_server.port, timeout=10)
    headers = {"Cookie": f"netpeer_session={cookie}"} if cookie else {}
    data = None
    if body is not None:
        data = urllib.parse.urlencode(body)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    out = (r.status, dict(r.getheaders()), r.read().decode())
    conn.close()
    return out


def session_cookie(page) -> dict:
    return next(c for c in page.context.cookies() if c["name"] == "netpeer_session")


def test_a_tenant_signs_in_and_sees_only_its_own_namespace(console, browser):
    a, b, ca, cb = tenants(console)
    ca.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    page = browser
    # A token that is not one: a clear message on the sign-in page.
    page.goto(console_url(console) + "/signin")
    page.fill("#token", "np_not_a_token")
    page.click("#signin")
    assert "token: not accepted (unknown, revoked or expired)" in page.inner_text("#message")
    sign_in(page, console, a)
    assert page.url.endswith("/networks")
    page.wait_for_function("() => window.netpeerGraph && window.netpeerGraph.ready")
    shot(page, "networks")
    text = page.inner_text("main")
    assert "net-a" in text and "web" in text
    assert "secret-b" not in text and "secret-b" not in page.content()
    # The graph: own networks, the remote one apart (in its namespace's group), the edge with its phase.
    nodes = page.evaluate("window.netpeerGraph.cy.nodes().map(n => [n.id(), n.classes().join(' ')])")
    assert ["n:net-a", "own"] in nodes and ["r:/team-b/net-b", "remote"] in nodes
    assert ["g:/team-b", "group"] in nodes
    assert page.evaluate("window.netpeerGraph.cy.getElementById('e:net-a/to-b').data('phase')") == "Pending"
    # Another tenant's namespace, asked for by URL: the API's refusal, on the page; nothing of it shown.
    page.goto(console_url(console) + "/networks?namespace=team-b")
    assert "team-b" in page.inner_text("#message") and "secret-b" not in page.content()
    # Bad input in the consent form: the API's one line on the page, nothing created.
    page.goto(console_url(console) + "/networks")
    page.fill("#consent-name", "Bad Name!")
    page.fill("#consent-remote-network", "net-b")
    page.click("#consent")
    assert "Bad Name!" in page.inner_text("#message") and page.url.endswith("/peerings")
    assert [p["name"] for p in ca.list_peerings("team-a", "net-a")] == ["to-b"]


def test_a_peering_goes_from_pending_to_bound_live_while_the_other_tenant_consents_on_the_cli(console, browser):
    a, b, ca, cb = tenants(console)
    page = browser
    sign_in(page, console, a)
    page.wait_for_function("() => window.netpeerGraph && window.netpeerGraph.ready")
    # Tenant A consents in the console; the row and the edge appear from the Watch stream.
    page.select_option("#consent-network", "net-a")
    page.fill("#consent-name", "to-b")
    page.fill("#consent-remote-namespace", "team-b")
    page.fill("#consent-remote-network", "net-b")
    page.click("#consent")
    page.wait_for_selector('tr[data-peering="net-a/to-b"] td.phase.pending')
    page.wait_for_function("() => window.netpeerGraph.ready")
    page.evaluate("window.notReloaded = true")   # gone if the page were loaded again
    env = {**os.environ, "NETPEER_ENDPOINT": console.endpoint, "NETPEER_TOKEN": b}
    out = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "peering", "create", "-n", "team-b", "net-b",
                          "to-a", "team-a/net-a"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    page.wait_for_selector('tr[data-peering="net-a/to-b"] td.phase.bound', timeout=15000)
    assert page.evaluate("window.notReloaded") is True
    assert page.evaluate("window.netpeerGraph.cy.getElementById('e:net-a/to-b').data('phase')") == "Bound"
    wait_until(lambda: page.evaluate("window.netpeerGraph.cy.getElementById('e:net-a/to-b').data('dataplane')")
               == "Programmed", 15, "the edge never showed the dataplane Programmed")
    shot(page, "bound")
    # The peering's history, from the Watch API.
    page.click('tr[data-peering="net-a/to-b"] a')
    page.wait_for_selector("#history li.phasechanged")
    history = page.inner_text("#history")
    assert "Created" in history and "Bound" in history
    shot(page, "history")


def test_csrf_cookies_csp_logout_and_no_token_in_urls_or_logs(console, browser, caplog):
    caplog.set_level(logging.INFO, logger="netpeer.console")
    a, b, ca, cb = tenants(console)
    page = browser
    urls = []
    page.on("request", lambda r: urls.append(r.url))
    first = page.goto(console_url(console) + "/signin")
    assert "script-src 'self'" in first.headers["content-security-policy"]
    sign_in(page, console, a)
    answer = page.goto(console_url(console) + "/networks")
    csp = answer.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
    cookie = session_cookie(page)
    # Loopback without TLS: no Secure (the browser would drop it on http); otherwise Secure (test_tls_console).
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]
    assert page.evaluate("document.cookie") == ""   # HttpOnly: out of the scripts' reach
    # A POST without the session's CSRF token is refused and changes nothing.
    form = {"namespace": "team-a", "network": "net-a", "name": "forged", "remote_network": "net-b",
            "remote_namespace": "team-b"}
    status, _, body = request(console, "POST", "/peerings", cookie=cookie["value"], body=form)
    assert status == 403 and "CSRF" in body
    status, _, _ = request(console, "POST", "/peerings", cookie=cookie["value"], body={**form, "csrf": "x" * 43})
    assert status == 403
    assert ca.list_peerings("team-a", "net-a") == []
    # Logout deletes the session on the server: the old cookie is worth nothing.
    page.click("#signout")
    assert "Signed out" in page.inner_text("#message")
    status, headers, _ = request(console, "GET", "/networks", cookie=cookie["value"])
    assert status == 303 and headers["Location"] == "/signin"
    assert len([s for s in console.daemon.console_server.sessions._by_id.values() if s.token]) == 0
    # The token was never in a URL, and never in a log line.
    assert urls and not [u for u in urls if a in u]
    assert caplog.records and not [r for r in caplog.records if a in r.getMessage()]


def test_a_revoked_token_is_sent_back_to_sign_in(console, browser):
    a, b, ca, cb = tenants(console)
    page = browser
    sign_in(page, console, a)
    page.wait_for_function("() => window.netpeerGraph && window.netpeerGraph.ready")
    token_id = ca.caller()["token_id"]
    with console.client() as admin:
        admin.revoke_token(token_id)
    # The open page's live stream ends with the token: the page goes to sign-in by itself.
    page.wait_for_url("**/signin?m=expired", timeout=20000)
    assert "no longer accepted" in page.inner_text("#message")
    page.goto(console_url(console) + "/networks")
    assert "/signin" in page.url


@pytest.fixture
def two_sites():
    """East and west, each with its OVN and netpeerd, linked; east serves the console."""
    require_ovn()
    root = short_tmpdir("np-c-")
    keys = IcKeys()
    secret = root / "east-west.secret"
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, secrets.token_urlsafe(32).encode())
    os.close(fd)
    netpeerds = {}
    try:
        for here, other in (("east", "west"), ("west", "east")):
            ovn = keys.daemons[here] = OvnDaemons(root / here / "ovn")
            ovn.start()
            _site_setup(ovn, here, other)
        keys.start()
        for here, other in (("east", "west"), ("west", "east")):
            extra = {"console_listen": "127.0.0.1:0", "ovn_sb": keys.daemons[here].sb_remote} if here == "east" else {}
            netpeerds[here] = start_netpeerd(
                keys.daemons[here], root / here, site=here, gateway_group=f"np-gw-{here}", sweep_interval="1s",
                site_listen=f"unix://{root / here / 'site.sock'}",
                sites=(SiteLink(other, f"unix://{root / other / 'site.sock'}", secret),), **extra)
        yield root, netpeerds
    finally:
        keys.stop_all(netpeerds, root)


def test_the_admin_sees_two_sites_and_a_link_cut_and_healed(two_sites, browser):
    root, sites = two_sites
    east = sites["east"]
    page = browser
    from tests.support import ADMIN_TOKEN
    sign_in(page, east, ADMIN_TOKEN)
    page.goto(console_url(east) + "/admin")

    def link_shows(state: str):
        page.reload()
        return page.inner_text('tr[data-site="west"] td.reachable') == state

    wait_until(lambda: link_shows("yes"), 20, "the admin view never showed west reachable")
    capacity = east.client().status()["sites"][0]["capacity"]
    assert page.inner_text("#site") == "east" and f"0 / {capacity}" in page.inner_text('tr[data-site="west"]')
    # The site's gateways, as GetStatus reads them in OVN (no chassis here binds a transit port: standby).
    for chassis, priority in (("east-gw1", "20"), ("east-gw2", "10")):
        east.ovn.nbctl("ha-chassis-group-add-chassis", "np-gw-east", chassis, priority)
    page.reload()
    assert [page.inner_text(f'tr[data-chassis="{c}"]').split() for c in ("east-gw1", "east-gw2")] == \
        [["east-gw1", "standby", "20"], ["east-gw2", "standby", "10"]]
    shot(page, "admin")
    # Cut: east's link now points where nothing listens (a reload, as SIGHUP does).
    config = east.daemon.config
    cut = dataclasses.replace(config, sites=(dataclasses.replace(config.sites[0],
                                                                 endpoint=f"unix://{root / 'nowhere.sock'}"),))
    east.daemon.reload(cut.write(root / "east" / "netpeerd.toml"))
    wait_until(lambda: link_shows("no"), 20, "the admin view never showed the cut link")
    assert page.inner_text('tr[data-site="west"] td.last-error')
    shot(page, "admin-cut")
    east.daemon.reload(config.write(root / "east" / "netpeerd.toml"))
    wait_until(lambda: link_shows("yes"), 20, "the admin view never showed the link healed")
    # A tenant token has no admin view: the API's refusal, on the page.
    tenant = east.token("team-a")
    page.context.clear_cookies()
    sign_in(page, east, tenant)
    page.goto(console_url(east) + "/admin")
    assert "admin" in page.inner_text("#message").lower()
    # A peering with a network of the other site: drawn apart, in a group of that site and namespace.
    with east.client(tenant) as c:
        c.create_network("team-a", "net-a", ["10.1.0.0/24"])
        c.create_peering("team-a", "net-a", "to-west", "net-w", "team-w", remote_site="west")
    page.goto(console_url(east) + "/networks")
    page.wait_for_function("() => window.netpeerGraph && window.netpeerGraph.ready")
    nodes = page.evaluate("window.netpeerGraph.cy.nodes().map(n => [n.id(), n.classes().join(' '), "
                          "n.data('parent') || ''])")
    assert ["g:west/team-w", "group remote-site", ""] in nodes
    assert ["r:west/team-w/net-w", "remote", "g:west/team-w"] in nodes
    assert "west:team-w/net-w" in page.inner_text('tr[data-peering="net-a/to-west"]')


def test_the_console_starts_without_the_graph_library_and_says_so(ovn, state_dir, browser, caplog):
    caplog.set_level(logging.WARNING, logger="netpeer.console")
    empty = state_dir / "no-assets"
    empty.mkdir()
    netpeerd = start_netpeerd(ovn, state_dir, console_listen="127.0.0.1:0", console_assets=empty)
    try:
        warnings = [r.getMessage() for r in caplog.records if "graph library" in r.getMessage()]
        assert len(warnings) == 1 and str(empty / "cytoscape.min.js") in warnings[0]
        a = netpeerd.token("team-a")
        sign_in(browser, netpeerd, a)
        assert "graph library is not installed" in browser.inner_text("#graph-missing")
    finally:
        netpeerd.stop()
