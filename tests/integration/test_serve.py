"""`netpeer serve`: TLS (required off loopback), mutual TLS, health and reflection."""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import timedelta

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from netpeer import errors
from netpeer.api.client import Client
from netpeer.config import Config
from netpeer.core.models import WatchLimits
from netpeer.daemon import Daemon
from tests.support import ADMIN_TOKEN, make_pki, wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def pki(state_dir):
    """A CA, a server certificate for localhost/127.0.0.1, a client certificate."""
    return make_pki(state_dir / "pki")


def run_serve(ovn, state_dir, listen, tls: str = "") -> Daemon:
    """netpeerd in this process, from a configuration file as `netpeer serve` reads it."""
    (state_dir / "admin.token").write_text(ADMIN_TOKEN)
    cfg = state_dir / "netpeerd.toml"
    cfg.write_text(f'listen = "{listen}"\nstore = "netpeer.db"\novn_nb = "{ovn.nb_remote}"\n'
                   f'admin_token_file = "admin.token"\n{tls}')
    return Daemon(Config.load(cfg)).start()


def test_tls_required_off_loopback(ovn, state_dir):
    (state_dir / "c.toml").write_text(f'listen = "0.0.0.0:{free_port()}"\nstore = "x.db"\novn_nb = "{ovn.nb_remote}"\n')
    with pytest.raises(errors.InvalidArgument, match="listen: '0.0.0.0:.*' is not loopback or a unix socket"):
        Daemon(Config.load(state_dir / "c.toml"))


def test_tls_and_mutual_tls(ovn, state_dir, pki):
    port = free_port()
    tls = (f'[tls]\ncert = "{pki}/server.crt"\nkey = "{pki}/server.key"\nclient_ca = "{pki}/ca.crt"\n')
    daemon = run_serve(ovn, state_dir, f"127.0.0.1:{port}", tls)
    try:
        endpoint = f"localhost:{port}"
        with Client(endpoint, ADMIN_TOKEN, ca_cert=str(pki / "ca.crt"), client_cert=str(pki / "client.crt"),
                    client_key=str(pki / "client.key"), timeout=10) as c:
            assert c.caller()["admin"] is True
        with Client(endpoint, ADMIN_TOKEN, ca_cert=str(pki / "ca.crt"), timeout=5) as c:
            with pytest.raises(errors.NetpeerError):
                c.caller()  # no client certificate: refused by the TLS handshake
        with Client(endpoint, ADMIN_TOKEN, timeout=5) as c:
            with pytest.raises(errors.NetpeerError):
                c.caller()  # plaintext against a TLS listener
        # The CLI speaks TLS too.
        out = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "token", "whoami", "-o", "json",
                              "--endpoint", endpoint, "--token", ADMIN_TOKEN, "--ca-cert", str(pki / "ca.crt"),
                              "--client-cert", str(pki / "client.crt"), "--client-key", str(pki / "client.key")],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and '"admin": true' in out.stdout, out.stderr
    finally:
        daemon.stop()


def test_health_and_reflection(ovn, state_dir):
    sock = state_dir / "np.sock"
    daemon = run_serve(ovn, state_dir, f"unix://{sock}")
    try:
        with grpc.insecure_channel(f"unix://{sock}") as ch:
            health = health_pb2_grpc.HealthStub(ch)
            for service in ("", "netpeer.v1.NetworkService"):
                # ready once the start-up sweep completed
                wait_until(lambda: health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status
                           == health_pb2.HealthCheckResponse.SERVING, 20, f"health of {service!r} never SERVING",
                           step=0.1)
            refl = reflection_pb2_grpc.ServerReflectionStub(ch)
            responses = refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                                  timeout=5)
            names = {s.name for r in responses for s in r.list_services_response.service}
            assert {"netpeer.v1.NetworkService", "netpeer.v1.TokenService", "grpc.health.v1.Health"} <= names
    finally:
        daemon.stop()


def test_replacing_the_admin_token_file_rotates_the_admin_token(ovn, state_dir):
    daemon = run_serve(ovn, state_dir, f"unix://{state_dir / 'np.sock'}")
    daemon.stop()
    new_admin = "np_rotated_" + "r" * 40
    (state_dir / "admin.token").write_text(new_admin + "\n")
    daemon = Daemon(Config.load(state_dir / "netpeerd.toml")).start()
    try:
        with Client(f"unix://{state_dir / 'np.sock'}", ADMIN_TOKEN, timeout=10) as old:
            with pytest.raises(errors.Unauthenticated):
                old.create_token(["team-a"])
        with Client(f"unix://{state_dir / 'np.sock'}", new_admin, timeout=10) as new:
            assert new.caller()["admin"] is True
            assert [t["token_id"] for t in new.list_tokens() if t["admin"]] == ["rotated"]
    finally:
        daemon.stop()


def test_tls_key_without_cert_names_the_real_keys(state_dir):
    (state_dir / "c.toml").write_text('listen = "127.0.0.1:1"\nstore = "x.db"\novn_nb = "unix:/nonexistent"\n'
                                      '[tls]\nkey = "k.pem"\n')
    with pytest.raises(errors.InvalidArgument, match=r"^tls: 'cert/key' needs both \[tls\] cert and \[tls\] key$"):
        Config.load(state_dir / "c.toml")
    (state_dir / "d.toml").write_text('listen = "127.0.0.1.evil.example:7443"\nstore = "x.db"\n'
                                      'ovn_nb = "unix:/nonexistent"\n')
    with pytest.raises(errors.InvalidArgument, match=r"is not loopback or a unix socket: configure \[tls\] cert"):
        Daemon(Config.load(state_dir / "d.toml"))


def test_a_full_sweep_interval_shorter_than_the_sweep_interval_is_refused_in_one_line(state_dir):
    base = 'listen = "127.0.0.1:1"\nstore = "x.db"\novn_nb = "unix:/nonexistent"\n'
    (state_dir / "c.toml").write_text(base + 'sweep_interval = "2m"\nfull_sweep_interval = "90s"\n')
    with pytest.raises(errors.InvalidArgument,
                       match=r"^full_sweep_interval: '90s' must be at least sweep_interval \(2m\)$"):
        Config.load(state_dir / "c.toml")
    (state_dir / "d.toml").write_text(base + 'full_sweep_interval = "6h"\n')
    config = Config.load(state_dir / "d.toml")
    assert config.full_sweep_interval == timedelta(hours=6)
    assert Config.load(state_dir / "d.toml").to_toml() == config.to_toml()


def test_limits_grace_and_the_slot_quota_are_read_written_and_checked_in_one_line(state_dir):
    from netpeer.core.models import TokenLimits
    base = 'listen = "127.0.0.1:1"\nstore = "x.db"\novn_nb = "unix:/nonexistent"\n'
    (state_dir / "c.toml").write_text(base + 'attachment_grace = "2m"\n[quotas]\nsite_attachments_per_namespace = 9\n'
                                      '[limits]\nvalidate_only_lock_share = 0.25\nvalidate_only_burst = "5s"\n'
                                      'conflict_disclosures_per_minute = 3\n')
    config = Config.load(state_dir / "c.toml")
    assert (config.attachment_grace, config.quotas.site_attachments_per_namespace) == (timedelta(minutes=2), 9)
    assert config.limits == TokenLimits(0.25, timedelta(seconds=5), 3)
    config.write(state_dir / "d.toml")
    assert Config.load(state_dir / "d.toml") == config
    plain = Config(listen="unix:///x", store="x.db", ovn_nb="unix:/x").to_toml()
    assert "[limits]" not in plain and "site_attachments" not in plain and "grace" not in plain   # defaults: left out
    for table, line, words in (
            ("limits", "validate_only_lock_share = 2", r"^limits.validate_only_lock_share: 2 must be a number above 0"),
            ("limits", 'validate_only_burst = "2h"', r"^limits.validate_only_burst: '2h' must be from 1s to 1h$"),
            ("limits", "conflict_disclosures_per_minute = 0", r"^limits.conflict_disclosures_per_minute: 0 must be"),
            ("limits", "tokens = 3", r"^limits.tokens: 3 is not a known setting"),
            ("quotas", "site_attachments_per_namespace = 0", r"^quotas.site_attachments_per_namespace: 0 must be")):
        (state_dir / "e.toml").write_text(base + f"[{table}]\n{line}\n")
        with pytest.raises(errors.InvalidArgument, match=words):
            Config.load(state_dir / "e.toml")


def test_watch_limits_are_read_written_and_checked_in_one_line(state_dir):
    base = 'listen = "127.0.0.1:1"\nstore = "x.db"\novn_nb = "unix:/nonexistent"\n'
    (state_dir / "c.toml").write_text(base + '[watch]\nstreams_per_token = 0\n')
    with pytest.raises(errors.InvalidArgument, match=r"^watch.streams_per_token: 0 must be a whole number from 1 to "
                                                     r"1000000$"):
        Config.load(state_dir / "c.toml")
    (state_dir / "d.toml").write_text(base + '[watch]\nstreams_per_tokens = 5\n')
    with pytest.raises(errors.InvalidArgument, match=r"^watch.streams_per_tokens: 5 is not a known setting"):
        Config.load(state_dir / "d.toml")
    (state_dir / "e.toml").write_text(base + '[watch]\nstreams_per_token = 5\nstreams_total = 50\n')
    config = Config.load(state_dir / "e.toml")
    assert config.watch == WatchLimits(streams_per_token=5, streams_total=50)
    (state_dir / "f.toml").write_text(config.to_toml())
    assert Config.load(state_dir / "f.toml") == config


@pytest.mark.parametrize("remote", ["ssl:10.0.0.5:6641", "tcp:10.0.0.5", "tcp:10.0.0.5:6641,10.0.0.6:6641", "nb.sock"])
def test_an_ovn_nb_netpeer_cannot_reach_is_refused_in_one_line(state_dir, remote):
    (state_dir / "c.toml").write_text(f'listen = "127.0.0.1:1"\nstore = "x.db"\novn_nb = "{remote}"\n')
    one_line = r"^ovn_nb: '.*' has member '.*': each must be unix:PATH or tcp:HOST:PORT \(comma-separated\)$"
    with pytest.raises(errors.InvalidArgument, match=one_line):
        Config.load(state_dir / "c.toml")
