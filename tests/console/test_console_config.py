"""``console_listen``'s rules, and the console over TLS: its session
cookie is Secure there (a real netpeerd, its console on loopback with
[tls]'s certificate)."""

from __future__ import annotations

import http.client
import re
import ssl
import urllib.parse

import pytest

from netpeer.config import Config
from netpeer.errors import InvalidArgument
from tests.support import ADMIN_TOKEN, make_pki, start_netpeerd

BASE = 'listen = "unix:///tmp/np.sock"\nstore = "np.db"\novn_nb = "unix:/tmp/nb.sock"\n'


@pytest.mark.parametrize("extra, message", [
    ('console_listen = "0.0.0.0:8443"\n', "console_listen: '0.0.0.0:8443' is not loopback or a unix socket"),
    ('console_listen = "unix:///tmp/console.sock"\n', "console_listen: 'unix:///tmp/console.sock' must be "
                                                      "HOST:PORT (like 127.0.0.1:8443): browsers reach the console"),
    ('console_listen = "8443"\n', "console_listen: '8443' must be HOST:PORT"),
    ('console_listen = "127.0.0.1:8443"\n[tls]\ncert = "c"\nkey = "k"\nclient_ca = "ca"\n',
     "console_listen: '127.0.0.1:8443' cannot be used with [tls] client_ca"),
])
def test_console_listen_is_refused_in_one_line_naming_it(tmp_path, extra, message):
    path = tmp_path / "netpeerd.toml"
    path.write_text(BASE + extra)
    with pytest.raises(InvalidArgument) as exc:
        Config.load(path)
    assert exc.value.message.startswith(message) and "\n" not in exc.value.message


def test_console_settings_are_read_back(tmp_path):
    path = tmp_path / "netpeerd.toml"
    path.write_text(BASE + 'console_listen = "127.0.0.1:8443"\nconsole_assets = "assets"\n')
    config = Config.load(path)
    assert config.console_listen == "127.0.0.1:8443" and config.console_assets == tmp_path / "assets"
    assert Config.load(config.write(tmp_path / "again.toml")) == config


def test_over_tls_the_session_cookie_is_secure(ovn, state_dir):
    pki = make_pki(state_dir / "pki")
    netpeerd = start_netpeerd(ovn, state_dir, console_listen="127.0.0.1:0", tls_cert=pki / "server.crt",
                              tls_key=pki / "server.key")
    try:
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        port = netpeerd.daemon.console_server.port

        def call(method, path, cookie=None, body=None):
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
            headers = {"Cookie": cookie} if cookie else {}
            if body is not None:
                headers["Content-Type"] = "application/x-www-form-urlencoded"
            conn.request(method, path, body=urllib.parse.urlencode(body) if body else None, headers=headers)
            r = conn.getresponse()
            out = r.status, r.getheader("Set-Cookie"), r.read().decode()
            conn.close()
            return out

        status, cookie, page = call("GET", "/signin")
        assert status == 200 and "Secure" in cookie.split("; ") and "HttpOnly" in cookie.split("; ")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        status, signed, _ = call("POST", "/signin", cookie.split(";")[0], {"csrf": csrf, "token": ADMIN_TOKEN})
        assert status == 303
        assert {"Secure", "HttpOnly", "SameSite=Strict"} <= set(signed.split("; "))
    finally:
        netpeerd.stop()
