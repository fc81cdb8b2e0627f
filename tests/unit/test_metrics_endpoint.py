"""The metrics endpoint's HTTP server (netpeer/observe/endpoint.py) on a
real loopback socket: what any client can make it spend is bounded, and
what it answers is fresh. (netpeerd with it: tests/trust/test_metrics_exposure.py.)"""

from __future__ import annotations

import socket
import threading
import time

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily

from netpeer.observe.endpoint import Limits, MetricsEndpoint

GET = b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"


class SlowCollector:
    """Takes 50 ms to collect; counts its collections and how many ran at once."""

    def __init__(self):
        self.calls = self.running = self.most = 0
        self.lock = threading.Lock()

    def collect(self):
        with self.lock:
            self.calls += 1
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.05)
        with self.lock:
            self.running -= 1
        yield GaugeMetricFamily("np_test_slow", "a slow gauge", value=1)


@pytest.fixture
def served():
    registry = CollectorRegistry()
    counter = Counter("np_test_scrapes", "bumped by the tests", registry=registry)
    slow = SlowCollector()
    registry.register(slow)
    endpoint = MetricsEndpoint(registry, "127.0.0.1:0", limits=Limits(connections=4, timeout=0.5))
    try:
        yield endpoint, counter, slow
    finally:
        endpoint.stop()


def connect(endpoint) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", endpoint.port), timeout=10)
    return s


def answer(s: socket.socket, head_only: bool = False) -> bytes:
    """One answer (headers and Content-Length bytes of body, none for a
    HEAD), b"" if the server closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length and not head_only:
        body += s.recv(65536)
    return head + b"\r\n\r\n" + body


def closed_by_server(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_idle_connections_are_closed_after_the_timeout_and_the_oldest_gives_way(served):
    endpoint, _, _ = served
    idle = [connect(endpoint) for _ in range(4)]
    try:
        time.sleep(0.1)
        with connect(endpoint) as fifth:          # one more than the bound: the oldest idle one goes
            fifth.sendall(GET)
            assert answer(fifth).startswith(b"HTTP/1.1 200 OK")
        assert closed_by_server(idle[0])
        assert closed_by_server(idle[1])          # the others after the timeout
        slow = connect(endpoint)                  # a request that never ends: closed too
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")
        assert closed_by_server(slow)
        slow.close()
    finally:
        for s in idle:
            s.close()


def test_scrapes_at_once_share_renderings_one_at_a_time_and_see_what_came_before(served):
    endpoint, counter, slow = served
    counter.inc(7)
    answers = []

    def scrape(times: int = 1):
        for _ in range(times):
            with connect(endpoint) as s:
                s.sendall(GET)
                answers.append(answer(s))

    threads = [threading.Thread(target=scrape, args=(3,)) for _ in range(4)]   # as many as it keeps open
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == 12 and all(a.startswith(b"HTTP/1.1 200 OK") for a in answers)
    assert all(b"np_test_scrapes_total 7.0" in a for a in answers)
    assert slow.most == 1 and slow.calls < 12, (slow.most, slow.calls)
    counter.inc()
    scrape()                                   # begun after the change: never an older rendering
    assert b"np_test_scrapes_total 8.0" in answers[-1]


def test_keep_alive_and_what_is_not_a_scrape(served):
    endpoint, _, _ = served
    with connect(endpoint) as s:
        s.sendall(GET + GET)                                # two requests at once, answered in order
        assert answer(s).startswith(b"HTTP/1.1 200 OK") and answer(s).startswith(b"HTTP/1.1 200 OK")
        s.sendall(b"HEAD /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        head = answer(s, head_only=True)
        assert head.startswith(b"HTTP/1.1 200 OK") and head.endswith(b"\r\n\r\n")
        s.sendall(b"GET /other HTTP/1.1\r\nHost: t\r\n\r\n")
        assert answer(s).startswith(b"HTTP/1.1 404 ")
        s.sendall(b"DELETE /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        assert answer(s).startswith(b"HTTP/1.1 405 ")
        s.sendall(b"POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc")
        assert answer(s).startswith(b"HTTP/1.1 400 ") and closed_by_server(s)
    with connect(endpoint) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"x" * 10_000)
        assert answer(s).startswith(b"HTTP/1.1 431 ") and closed_by_server(s)
