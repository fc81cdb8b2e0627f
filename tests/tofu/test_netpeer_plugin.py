"""netpeer's plugin as OpenTofu starts it: the executable that scripts/install-tofu-provider.sh put in
the implied local mirror. Its handshake guards (magic cookie, the announced client certificate), where
it keeps its socket and key (a private directory, removed on exit; nothing anywhere else), and its
start-up time, which OpenTofu pays several times per command."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.tofu.harness import Home
from tests.tofu.test_protocol import COOKIE, _openssl_cert

pytestmark = pytest.mark.tofu


def plugin(home: Home) -> Path:
    path = home.plugin_dir / "terraform-provider-netpeer_v0.1.0"
    twin = Path(str(path).replace("registry.opentofu.org", "registry.terraform.io"))
    assert os.access(path, os.X_OK) and os.access(twin, os.X_OK), "the installer left no plugin for tofu/terraform"
    return path


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_without_the_magic_cookie_it_says_what_it_is_and_exits(tofu_home):
    proc = subprocess.run([str(plugin(tofu_home))], env=tofu_home.env(), capture_output=True, text=True,
                          timeout=60)
    assert (proc.returncode, proc.stdout) == (1, "")
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("This binary is a plugin"), proc.stderr


def test_handshake_with_mutual_tls_and_a_private_directory(tofu_home, tmp_path):
    import grpc

    from netpeer_provider.tofu import _stubs

    stubs = _stubs.load()
    key_a, cert_a = _openssl_cert(tmp_path, "tofu")
    key_b, cert_b = _openssl_cert(tmp_path, "other")
    sockets = tofu_home.root / "sockets-mtls"
    sockets.mkdir()
    before = files_under(tofu_home.root)
    env = {**tofu_home.env(), COOKIE[0]: COOKIE[1], "PLUGIN_CLIENT_CERT": cert_a.decode(),
           "PLUGIN_PROTOCOL_VERSIONS": "5,6", "PLUGIN_UNIX_SOCKET_DIR": str(sockets)}
    started = time.monotonic()
    proc = subprocess.Popen([str(plugin(tofu_home))], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        line = proc.stdout.readline().strip()
        startup = time.monotonic() - started
        print(f"netpeer plugin start-up to handshake, with mutual TLS: {startup:.2f}s")
        fields = line.split("|")
        assert fields[:3] == ["1", "6", "unix"] and fields[4] == "grpc" and len(fields) == 6, (line, proc.stderr)
        sock = Path(fields[3])
        assert sock.parent.parent == sockets and stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
        # The socket directory holds sockets only: the key stays in memory.
        assert {p.name: stat.S_ISSOCK(p.stat().st_mode) for p in sock.parent.iterdir()} \
            == {"plugin.sock": True, "grpc.sock": True}
        der = base64.b64decode(fields[5] + "=" * (-len(fields[5]) % 4))
        server_pem = ("-----BEGIN CERTIFICATE-----\n" + base64.encodebytes(der).decode()
                      + "-----END CERTIFICATE-----\n").encode()

        def channel(key: bytes, cert: bytes):
            creds = grpc.ssl_channel_credentials(root_certificates=server_pem, private_key=key,
                                                 certificate_chain=cert)
            return grpc.secure_channel(f"unix:{sock}", creds,
                                       options=[("grpc.ssl_target_name_override", "localhost")])

        with channel(key_b, cert_b) as ch, pytest.raises(grpc.RpcError) as refused:
            stubs.tf_grpc.ProviderStub(ch).GetProviderSchema(stubs.tf.GetProviderSchema.Request(), timeout=20)
        assert refused.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED)

        with channel(key_a, cert_a) as ch:
            schema = stubs.tf_grpc.ProviderStub(ch).GetProviderSchema(stubs.tf.GetProviderSchema.Request(),
                                                                      timeout=20)
            assert not schema.diagnostics
            assert set(schema.resource_schemas) == {"netpeer_network", "netpeer_peering"}
            assert set(schema.data_source_schemas) == {"netpeer_network", "netpeer_peering_requests"}
            token = [a for a in schema.provider.block.attributes if a.name == "token"]
            assert token and token[0].sensitive
            stubs.ctl_grpc.GRPCControllerStub(ch).Shutdown(stubs.ctl.Empty(), timeout=20)
        assert proc.wait(timeout=30) == 0
        assert list(sockets.iterdir()) == [], "the private directory must be removed on exit"
        assert files_under(tofu_home.root) == before, "the plugin wrote files outside its private directory"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
