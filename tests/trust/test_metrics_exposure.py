"""Safe to expose: netpeerd's Prometheus endpoint (``metrics_listen``).

- 10,000 scrapes, each on a new connection, and 1,000 idle connections held
  open cost netpeerd no lasting file or thread: its open files and threads
  stay within a small constant of what it had before, /metrics still
  answers, and another tenant's reads stay within 1.5x of their latency
  measured just before (median).
- ``metrics_listen`` follows ``listen``'s rule (plaintext on loopback or a
  unix socket only, TLS otherwise), refused in one line at load; with a
  bearer token or basic authentication, a scrape without the right
  credentials is answered 401 and nothing else.
"""

from __future__ import annotations

import base64
import json
import os
import re
import selectors
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.config import Config
from netpeer.daemon import Daemon
from tests.support import ADMIN_TOKEN, ROOT, make_pki, netpeerd_config, netpeerd_process
from tests.trust import report
from tests.trust.test_exposure import percentile, timed_reads

SCRAPES = 10_000
SCRAPERS = 6
IDLE = 1_000
READS = 300
#: netpeerd's open files and threads may exceed their baseline by at most
#: this much, whatever the number of scrapes and connections (its bound on
#: open metrics connections is below it).
FD_SLACK, THREAD_SLACK = 64, 8
#: The scrapes take 15-30 s on 2 busy cores.
SCRAPE_LIMIT_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def usage(pid: int) -> dict[str, int]:
    """netpeerd's open files and threads."""
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": len(os.listdir(f"/proc/{pid}/task"))}


class Scrapers:
    """``count`` scrapes from a process of its own (tests/trust/scraper.py);
    ``last`` is its latest report."""

    def __init__(self, port: int, count: int, threads: int = SCRAPERS):
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.trust.scraper", "127.0.0.1", str(port),
                                      str(count), str(threads)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.last: dict = {"outcomes": {}}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.last = json.loads(line)

    def running(self) -> bool:
        return self.proc.poll() is None

    def finish(self, timeout: float = 120) -> dict:
        try:
            self.proc.wait(timeout)
        finally:
            self.stop()
        self._reader.join(10)
        return self.last

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def status(url: str) -> int | str:
    """The HTTP status of a GET of ``url``, or why there was none."""
    try:
        return urllib.request.urlopen(url, timeout=10).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        return type(exc).__name__


def idle_connections(port: int, count: int, timeout: float = 60) -> list[socket.socket]:
    """``count`` connections to the endpoint that never send a byte, opened
    all at once (a server that accepts slowly would make one-by-one opening
    wait on its listen backlog); those not connected within ``timeout``
    are left trying."""
    out = []
    try:
        with selectors.DefaultSelector() as sel:
            for _ in range(count):
                s = socket.socket()
                out.append(s)
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                sel.register(s, selectors.EVENT_WRITE)
            deadline = time.monotonic() + timeout
            pending = count
            while pending and time.monotonic() < deadline:
                for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
                    sel.unregister(key.fileobj)
                    pending -= 1
    except BaseException:
        for s in out:
            s.close()
        raise
    return out


def test_scrapes_and_idle_connections_leak_nothing_and_slow_no_tenant(ovn, state_dir):
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    daemon = netpeerd_process(state_dir, ovn.nb_remote, metrics_listen=f"127.0.0.1:{port}")
    idle: list[socket.socket] = []
    failed_reads: list[str] = []
    try:
        daemon.start(sweep=True)
        pid = daemon.pid
        with Client(daemon.endpoint, ADMIN_TOKEN) as admin:
            reader = Client(daemon.endpoint, admin.create_token(["reader"])["token"])
        reader.create_network("reader", "net-r", ["10.1.0.0/24"])
        warm = Scrapers(port, 200)                  # every thread and pool netpeerd keeps is there
        timed_reads(reader, 30)
        assert warm.finish()["outcomes"] == {"200": 200}
        base = usage(pid)
        before = timed_reads(reader)

        idle = idle_connections(port, IDLE)
        time.sleep(0.5)   # not polling: the idle connections settle before the usage is read
        with_idle = peak = usage(pid)
        load = Scrapers(port, SCRAPES)
        during: list[float] = []
        sampled, deadline = 0.0, time.monotonic() + SCRAPE_LIMIT_S
        try:
            while load.running():
                if time.monotonic() - sampled > 0.25:
                    sampled = time.monotonic()
                    now = usage(pid)
                    peak = {k: max(v, now[k]) for k, v in peak.items()}
                    if now["fds"] > base["fds"] + 20 * FD_SLACK or sampled > deadline:
                        break   # failed already: no need to exhaust netpeerd
                t0 = time.perf_counter()
                try:
                    reader.get_network("reader", "net-r")
                    during.append((time.perf_counter() - t0) * 1000)
                except errors.NetpeerError as exc:
                    failed_reads.append(type(exc).__name__)
        finally:
            load.stop()
        scraped = load.finish()
        after = usage(pid)
        for s in idle:
            s.close()
        idle = []
        answered = status(url)
        reader.close()
    finally:
        for s in idle:
            s.close()
        daemon.stop()
    p50b, p99b = percentile(before, .5), percentile(before, .99)
    p50d, p99d = (percentile(during, .5), percentile(during, .99)) if during else (float("nan"),) * 2
    figures = {"fds": [base["fds"], with_idle["fds"], peak["fds"], after["fds"]],
               "threads": [base["threads"], with_idle["threads"], peak["threads"], after["threads"]],
               "scrapes": scraped, "reads_before_p50_p99_ms": [round(p50b, 2), round(p99b, 2)],
               "reads_during_p50_p99_ms": [round(p50d, 2), round(p99d, 2)], "reads_during": len(during),
               "failed_reads": len(failed_reads), "answered_after": answered, "p50_ratio": round(p50d / p50b, 2),
               "load": round(os.getloadavg()[0], 2)}
    print(f"[metrics-exposure] {json.dumps(figures)}")
    report.record("metrics exposure", f"netpeerd fds / threads: before, with {IDLE:,} idle metrics connections, "
                  f"most during {SCRAPES:,} scrapes, after", f"{figures['fds']} / {figures['threads']}")
    report.record("metrics exposure", "another tenant's reads p50/p99 ms: before -> during (ratio of p50), load",
                  f"{p50b:.1f}/{p99b:.1f} -> {p50d:.1f}/{p99d:.1f} ({p50d / p50b:.2f}x), load {figures['load']}")
    assert with_idle["fds"] <= base["fds"] + FD_SLACK, figures
    assert with_idle["threads"] <= base["threads"] + THREAD_SLACK, figures
    assert peak["fds"] <= base["fds"] + FD_SLACK, figures
    assert peak["threads"] <= base["threads"] + THREAD_SLACK, figures
    assert after["fds"] <= base["fds"] + FD_SLACK, figures
    assert scraped["outcomes"] == {"200": SCRAPES}, figures
    assert answered == 200
    assert not failed_reads, figures
    assert p50d <= 1.5 * p50b, figures


# ---------------------------------------------------------------- who may reach it
BASE = 'listen = "unix:///tmp/np.sock"\nstore = "x.db"\novn_nb = "unix:/nonexistent"\n'


def load(state_dir, text: str) -> Config:
    (state_dir / "c.toml").write_text(BASE + text)
    return Config.load(state_dir / "c.toml")


@pytest.mark.parametrize("text, field, value, why", [
    ('metrics_listen = "0.0.0.0:9464"\n', "metrics_listen", "0.0.0.0:9464",
     r"is not loopback or a unix socket: configure \[metrics\] cert and key, or \[tls\] cert and key"),
    ('metrics_listen = "127.0.0.1.evil.example:9464"\n', "metrics_listen", "127.0.0.1.evil.example:9464",
     r"is not loopback or a unix socket: .*"),
    ('metrics_listen = "9464"\n', "metrics_listen", "9464", r"must be HOST:PORT \(like 127.0.0.1:9464\) or unix:///PATH"),
    ('metrics_listen = "127.0.0.1:9464"\n[metrics]\ncert = "m.crt"\n', "metrics", "cert/key",
     r"needs both \[metrics\] cert and \[metrics\] key"),
    ('metrics_listen = "127.0.0.1:9464"\n[metrics]\nbearer_token_file = "t"\nbasic_auth_username = "p"\n'
     'basic_auth_password_file = "p"\n', "metrics.bearer_token_file", ".*/t",
     r"cannot be combined with basic_auth_\*: choose one way to authenticate"),
    ('metrics_listen = "127.0.0.1:9464"\n[metrics]\nbasic_auth_username = "prometheus"\n', "metrics",
     "basic_auth_username/basic_auth_password_file",
     r"needs both \[metrics\] basic_auth_username and basic_auth_password_file"),
    ('metrics_listen = "127.0.0.1:9464"\n[metrics]\nbasic_auth_username = "a:b"\nbasic_auth_password_file = "p"\n',
     "metrics.basic_auth_username", "a:b", r"must be a printable name without ':'"),
    ('[metrics]\nbearer_token_file = "t"\n', "metrics.bearer_token_file", ".*/t", r"needs metrics_listen"),
    ('metrics_listen = "127.0.0.1:9464"\n[metrics]\ntoken = "t"\n', "metrics.token", "t", r"is not a known setting .*"),
])
def test_a_metrics_setting_that_does_not_hold_is_refused_in_one_line(state_dir, text, field, value, why):
    with pytest.raises(errors.InvalidArgument) as err:
        load(state_dir, text)
    assert re.fullmatch(rf"{re.escape(field)}: '{value}' {why}", err.value.message), err.value.message


def test_metrics_off_loopback_need_tls_and_get_it_from_tls_by_default(state_dir):
    both = '[tls]\ncert = "t.crt"\nkey = "t.key"\n'
    config = load(state_dir, 'metrics_listen = "0.0.0.0:9464"\n' + both)
    assert config.metrics_tls == ("tls.cert", state_dir / "t.crt", state_dir / "t.key")
    config = load(state_dir, 'metrics_listen = "0.0.0.0:9464"\n[metrics]\ncert = "m.crt"\nkey = "m.key"\n' + both)
    assert config.metrics_tls == ("metrics.cert", state_dir / "m.crt", state_dir / "m.key")
    assert Config.load(config.write(state_dir / "again.toml")) == config
    assert load(state_dir, 'metrics_listen = "unix:///tmp/np-metrics.sock"\n').metrics_tls is None
    # A Config made in code is held to the same rule, before anything is opened.
    made = netpeerd_config(state_dir / "d", "unix:/nonexistent", metrics_listen="0.0.0.0:9464")
    with pytest.raises(errors.InvalidArgument, match=r"^metrics_listen: '0.0.0.0:9464' is not loopback"):
        Daemon(made)
    assert not (state_dir / "d" / "netpeer.db").exists()


def secret(path, text: str, mode: int = 0o600):
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


def test_a_metrics_secret_others_may_read_is_refused_before_anything_starts(state_dir):
    made = netpeerd_config(state_dir / "d", "unix:/nonexistent", metrics_listen="127.0.0.1:9464",
                           metrics_bearer_token_file=secret(state_dir / "token", "t" * 32, 0o644))
    with pytest.raises(errors.InvalidArgument, match=r"^metrics.bearer_token_file: '.*/token' is readable by others "
                                                     r"\(mode 644\): chmod 600 it$"):
        Daemon(made)
    assert not (state_dir / "d" / "netpeer.db").exists()


def get(url: str, authorization: str | None = None, ca=None) -> tuple[int, dict, bytes]:
    """(status, headers, body) of a GET."""
    request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    context = ssl.create_default_context(cafile=str(ca)) if ca else None
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_tls_and_a_bearer_token(ovn, state_dir):
    pki = make_pki(state_dir / "pki")
    port = free_port()
    token = "metrics-" + "s" * 32
    daemon = netpeerd_process(state_dir, ovn.nb_remote, metrics_listen=f"127.0.0.1:{port}",
                              metrics_cert=pki / "server.crt", metrics_key=pki / "server.key",
                              metrics_bearer_token_file=secret(state_dir / "metrics.token", token))
    url = f"https://localhost:{port}/metrics"
    try:
        daemon.start()
        code, headers, _ = get(url, ca=pki / "ca.crt")
        assert code == 401 and headers["WWW-Authenticate"].startswith("Bearer ")
        assert get(url, f"Bearer {token}x", ca=pki / "ca.crt")[0] == 401
        assert get(url, f"Basic {token}", ca=pki / "ca.crt")[0] == 401
        code, _, body = get(url, f"Bearer {token}", ca=pki / "ca.crt")
        assert code == 200 and b"netpeer_rpc_requests_total" in body
        assert status(f"http://127.0.0.1:{port}/metrics") != 200   # no plaintext on a TLS endpoint
    finally:
        daemon.stop()


def test_basic_auth(ovn, state_dir):
    port = free_port()
    password = "p" * 20
    daemon = netpeerd_process(state_dir, ovn.nb_remote, metrics_listen=f"127.0.0.1:{port}",
                              metrics_basic_auth_username="prometheus",
                              metrics_basic_auth_password_file=secret(state_dir / "metrics.password", password))
    url = f"http://127.0.0.1:{port}/metrics"

    def basic(user: str, word: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{word}".encode()).decode()
    try:
        daemon.start()
        code, headers, _ = get(url)
        assert code == 401 and headers["WWW-Authenticate"].startswith("Basic realm=")
        for wrong in (basic("prometheus", password + "x"), basic("grafana", password), basic("prometheus", ""),
                      "Basic !!!", f"Bearer {password}"):
            assert get(url, wrong)[0] == 401, wrong
        code, _, body = get(url, basic("prometheus", password))
        assert code == 200 and b"netpeer_ready" in body
    finally:
        daemon.stop()


def test_a_unix_socket_serves_plaintext(ovn, state_dir):
    path = state_dir / "metrics.sock"
    daemon = netpeerd_process(state_dir, ovn.nb_remote, metrics_listen=f"unix://{path}")
    try:
        daemon.start()
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(str(path))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: netpeerd\r\nConnection: close\r\n\r\n")
            answer = b"".join(iter(lambda: s.recv(65536), b""))
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"netpeer_ready" in answer
    finally:
        daemon.stop()
    assert not path.exists()
