"""Operating netpeerd: Prometheus metrics that move with the work, JSON logs
with the request id a client passed, and health that means something (ready
after the first sweep, NOT_SERVING while OVN is gone, back by itself)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from netpeer import errors
from netpeer.api.client import Client
from netpeer.config import Config
from netpeer.daemon import Daemon
from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc
from netpeer_dev.daemons import OvnDaemons
from tests.support import ADMIN_TOKEN, netpeerd_config, netpeerd_process, wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(url: str) -> dict[str, float]:
    """Every sample of the endpoint: 'name{labels}' -> value."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def health_of(endpoint: str) -> int:
    with grpc.insecure_channel(endpoint) as ch:
        return health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service="netpeer.v1.NetworkService"), timeout=5).status


def wait_health(endpoint: str, status: int, timeout: float = 30) -> float:
    t0 = time.monotonic()
    wait_until(lambda: health_of(endpoint) == status, timeout, f"health did not become {status}", step=0.1)
    return time.monotonic() - t0


SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


def test_metrics_move_with_the_work(ovn, state_dir):
    port = free_port()
    config = netpeerd_config(state_dir, ovn.nb_remote, metrics_listen=f"127.0.0.1:{port}")
    daemon = Daemon(config).start()
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_health(config.listen, SERVING)
        before = scrape(url)
        with Client(config.listen, ADMIN_TOKEN) as c:
            c.create_network("a", "net-a", ["10.1.0.0/24"])
            c.create_network("b", "net-b", ["10.2.0.0/24"])
            c.create_peering("a", "net-a", "to-b", "net-b", "b")
            c.create_peering("b", "net-b", "to-a", "net-a", "a")
            with pytest.raises(errors.AlreadyExists):
                c.create_network("a", "net-a", ["10.9.0.0/24"])
            watch = c.watch("a")
            next(watch)                       # an open watch
            daemon.service.sweep()
            after = scrape(url)
            watch.close()
    finally:
        daemon.stop()

    def delta(key):
        return after.get(key, 0) - before.get(key, 0)
    assert delta('netpeer_rpc_requests_total{code="OK",method="CreateNetwork"}') == 2
    assert delta('netpeer_rpc_requests_total{code="ALREADY_EXISTS",method="CreateNetwork"}') == 1
    assert delta('netpeer_rpc_requests_total{code="OK",method="CreatePeering"}') == 2
    assert delta('netpeer_rpc_duration_seconds_count{method="CreatePeering"}') == 2
    assert delta("netpeer_write_group_size_count") >= 4
    assert delta('netpeer_ovn_transaction_seconds_count{kind="sync"}') >= 3
    assert delta("netpeer_sweep_duration_seconds_count") >= 1
    assert after['netpeer_peerings{phase="Bound"}'] == 2 and after['netpeer_peerings{phase="Pending"}'] == 0
    assert after["netpeer_ovn_connected"] == 1 and after["netpeer_ready"] == 1
    assert after["netpeer_watchers"] == 1
    assert all(k.startswith("netpeer_") for k in after), [k for k in after if not k.startswith("netpeer_")]


def test_json_logs_carry_the_request_id_the_client_passed(ovn, state_dir):
    daemon = netpeerd_process(state_dir, ovn.nb_remote, ovn_timeout="1s", log_format="json")
    try:
        daemon.start(sweep=True)
        nb = ovn.pids()["ovsdb-server-nb"]
        os.kill(nb, signal.SIGSTOP)                  # the write below times out: netpeerd logs a warning
        try:
            with grpc.insecure_channel(daemon.endpoint) as ch:
                call = pb_grpc.NetworkServiceStub(ch).CreateNetwork.with_call
                with pytest.raises(grpc.RpcError) as err:
                    call(pb.CreateNetworkRequest(parent="namespaces/a", network_id="n",
                                                 network=pb.Network(subnets=["10.1.0.0/24"])),
                         metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"), ("x-request-id", "my-call-42")),
                         timeout=30)
        finally:
            os.kill(nb, signal.SIGCONT)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert dict(err.value.trailing_metadata())["x-request-id"] == "my-call-42"
        def mine() -> list[dict]:
            lines = [json.loads(line) for line in daemon.log.read_text().splitlines() if line.strip()]
            assert lines and all({"time", "level", "logger", "message"} <= set(entry) for entry in lines)
            return [entry for entry in lines if entry.get("request_id") == "my-call-42"]
        wait_until(mine, 10, lambda found: f"no line of the call says it timed out: {found[-5:]}",
                   until=lambda found: any("timed out" in entry["message"] for entry in found))
        # A malformed id is replaced by one of netpeerd's own, still sent back.
        with grpc.insecure_channel(daemon.endpoint) as ch:
            _, call = pb_grpc.TokenServiceStub(ch).GetCaller.with_call(
                pb.GetCallerRequest(), metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),
                                                 ("x-request-id", "bad id with spaces")), timeout=10)
            rid = dict(call.trailing_metadata())["x-request-id"]
            assert re.fullmatch(r"[0-9a-f]{16}", rid)
    finally:
        daemon.stop()


def test_health_is_ready_after_the_first_sweep_and_follows_ovn(state_dir):
    ovn = OvnDaemons(state_dir / "ovn")            # not started yet: netpeerd starts without OVN
    (state_dir / "admin.token").write_text(ADMIN_TOKEN + "\n")
    config = Config(listen=f"unix://{state_dir / 'np.sock'}", store=state_dir / "netpeer.db", ovn_nb=ovn.nb_remote,
                    admin_token_file=state_dir / "admin.token")
    daemon = Daemon(config).start(connect_timeout=0)
    try:
        assert health_of(config.listen) == NOT_SERVING      # no OVN, no sweep yet
        ovn.start()
        took = wait_health(config.listen, SERVING)
        assert daemon.service.reconciler.status.sweeps >= 1
        # The NB goes away: NOT_SERVING; it comes back: SERVING again, by itself.
        os.kill(ovn.pids()["ovsdb-server-nb"], signal.SIGKILL)
        down = wait_health(config.listen, NOT_SERVING)
        ovn.start()
        up = wait_health(config.listen, SERVING)
        print(f"serving {took:.1f}s after OVN came up; NOT_SERVING {down:.1f}s after the NB died; "
              f"SERVING again {up:.1f}s after it was back")
    finally:
        daemon.stop()
        ovn.stop()
