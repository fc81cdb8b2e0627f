"""The OpenTofu provider protocol layer against the real ``tofu`` built by scripts/install-opentofu.sh.

A toy provider (tests/tofu/toy_provider.py) is installed in a filesystem mirror, as a user would
install netpeer's, and driven through init (offline), apply, a no-change plan, drift seen by a
refresh-only plan, update, import and destroy. The plugin's own guards are tested directly: no magic
cookie, and a client without the certificate OpenTofu announced.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.tofu

REPO = Path(__file__).resolve().parents[2]
OPENTOFU_VERSION = "1.12.6"  # as scripts/install-opentofu.sh builds by default
PROVIDER_VERSION = "0.1.0"
FACTORY = "tests.tofu.toy_provider:ToyProvider"
COOKIE = ("TF_PLUGIN_MAGIC_COOKIE", "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2")


def tofu_binary() -> Path:
    if os.environ.get("NETPEER_TOFU"):
        path = Path(os.environ["NETPEER_TOFU"])
    else:
        cache = Path(os.environ.get("NETPEER_CACHE_DIR") or Path.home() / ".cache" / "netpeer")
        path = cache / "opentofu" / f"v{OPENTOFU_VERSION}" / "bin" / "tofu"
    if not os.access(path, os.X_OK):
        pytest.fail(f"no tofu at {path}: run scripts/install-opentofu.sh (or scripts/setup.sh)")
    return path


def plugin_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "PLUGIN_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


@pytest.fixture
def workdir():
    d = Path(tempfile.mkdtemp(prefix="np-tofu-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Tofu:
    """tofu in a private directory: its own CLI config, plugin mirror and data dir."""

    def __init__(self, root: Path, binary: Path):
        self.root = root
        self.binary = binary
        self.project = root / "project"
        self.store = root / "store"
        self.project.mkdir()
        self.store.mkdir()
        mirror = root / "mirror"
        plugin_dir = mirror / "registry.opentofu.org" / "netpeer" / "netpeer" / PROVIDER_VERSION / "linux_amd64"
        plugin_dir.mkdir(parents=True)
        wrapper = plugin_dir / f"terraform-provider-netpeer_v{PROVIDER_VERSION}"
        wrapper.write_text(textwrap.dedent(f"""\
            #!/bin/sh
            PYTHONPATH={REPO}${{PYTHONPATH:+:$PYTHONPATH}}
            export PYTHONPATH
            exec {sys.executable} -m netpeer_provider.tofu {FACTORY} "$@"
            """))
        wrapper.chmod(0o755)
        self.cli_config = root / "tofu.rc"
        self.cli_config.write_text(textwrap.dedent(f"""\
            provider_installation {{
              filesystem_mirror {{
                path    = "{mirror}"
                include = ["registry.opentofu.org/netpeer/*"]
              }}
            }}
            """))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "PLUGIN_"))}
        # The plugin makes its private socket directories here (go-plugin's variable): a test can see
        # that every start cleaned up after itself.
        self.sockets = root / "sockets"
        self.sockets.mkdir()
        # HOME is ours too (tofu creates ~/.terraform.d); the plugin is told where the stubs are cached.
        self.env.update(TF_CLI_CONFIG_FILE=str(self.cli_config), TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1",
                        TF_INPUT="0", PLUGIN_UNIX_SOCKET_DIR=str(self.sockets), HOME=str(root),
                        NETPEER_CACHE_DIR=os.environ.get("NETPEER_CACHE_DIR") or str(Path.home() / ".cache" / "netpeer"))

    def write_config(self, value: str = "one") -> None:
        (self.project / "main.tf").write_text(textwrap.dedent(f"""\
            terraform {{
              required_providers {{
                netpeer = {{ source = "netpeer/netpeer", version = "{PROVIDER_VERSION}" }}
              }}
            }}
            provider "netpeer" {{
              store = "{self.store}"
            }}
            resource "netpeer_toy" "a" {{
              name  = "alpha"
              value = "{value}"
              tags  = {{ env = "test" }}
            }}
            data "netpeer_toy" "a" {{
              name = netpeer_toy.a.name
            }}
            output "id" {{ value = netpeer_toy.a.id }}
            output "serial" {{ value = netpeer_toy.a.serial }}
            output "seen" {{ value = data.netpeer_toy.a.value }}
            """))

    def run(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.binary), *args, "-no-color"], cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=600)
        if proc.returncode not in ok:
            pytest.fail(f"tofu {' '.join(args)} exited {proc.returncode} (wanted {ok}):\n"
                        f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        return proc

    def objects(self) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted(self.store.glob("*.json"))]

    def resource(self, address: str) -> dict:
        shown = json.loads(self.run("show", "-json").stdout)
        [res] = [r for r in shown["values"]["root_module"]["resources"] if r["address"] == address]
        return res

    def outputs(self) -> dict:
        return {k: v["value"] for k, v in json.loads(self.run("output", "-json").stdout).items()}


def test_lifecycle_with_real_tofu(workdir):
    tofu = Tofu(workdir, tofu_binary())
    tofu.write_config("one")

    tofu.run("init", "-input=false")
    lock = (tofu.project / ".terraform.lock.hcl").read_text()
    assert 'provider "registry.opentofu.org/netpeer/netpeer"' in lock and "h1:" in lock

    tofu.run("apply", "-auto-approve", "-input=false")
    [obj] = tofu.objects()
    assert obj["name"] == "alpha" and obj["value"] == "one" and obj["tags"] == {"env": "test"}
    assert tofu.outputs() == {"id": obj["id"], "serial": 1, "seen": "one"}

    # Nothing changed: a plan must be empty (exit 0), or our plan/read round trip is not stable.
    tofu.run("plan", "-detailed-exitcode", "-input=false")

    # A change behind OpenTofu's back shows up in a refresh-only plan...
    path = tofu.store / f"{obj['id']}.json"
    path.write_text(json.dumps({**obj, "value": "changed"}))
    drift = tofu.run("plan", "-refresh-only", "-detailed-exitcode", "-input=false", ok=(2,))
    assert "changed outside of OpenTofu" in drift.stdout and '"one" -> "changed"' in drift.stdout, drift.stdout

    # `tofu refresh` takes the change into the state...
    tofu.run("refresh", "-input=false")
    assert tofu.resource("netpeer_toy.a")["values"]["value"] == "changed"

    # ...and apply puts the configured value back with an in-place update (serial bumped, same id).
    tofu.run("apply", "-auto-approve", "-input=false")
    [obj2] = tofu.objects()
    assert (obj2["id"], obj2["value"], obj2["serial"]) == (obj["id"], "one", 2)

    # A configuration change of a plain attribute is planned as an update in place.
    tofu.write_config("two")
    plan = tofu.run("plan", "-detailed-exitcode", "-input=false", ok=(2,))
    assert "1 to change" in plan.stdout and "must be replaced" not in plan.stdout, plan.stdout

    # Import: forget the object, then adopt it again by id: nothing to do afterwards.
    tofu.write_config("one")
    tofu.run("state", "rm", "netpeer_toy.a")
    assert "netpeer_toy.a" not in tofu.run("state", "list").stdout.split()
    tofu.run("import", "-input=false", "netpeer_toy.a", obj["id"])
    res = tofu.resource("netpeer_toy.a")
    assert res["values"]["id"] == obj["id"] and res["values"]["name"] == "alpha"
    tofu.run("plan", "-detailed-exitcode", "-input=false")

    tofu.run("destroy", "-auto-approve", "-input=false")
    assert tofu.objects() == []
    assert list(tofu.sockets.iterdir()) == [], "a plugin run left its socket directory behind"


def test_validation_errors_reach_the_user(workdir):
    tofu = Tofu(workdir, tofu_binary())
    (tofu.project / "main.tf").write_text(textwrap.dedent(f"""\
        terraform {{
          required_providers {{
            netpeer = {{ source = "netpeer/netpeer", version = "{PROVIDER_VERSION}" }}
          }}
        }}
        provider "netpeer" {{
          store = "{tofu.store}"
        }}
        resource "netpeer_toy" "bad" {{
          name  = "not an identifier"
          value = "deprecated"
        }}
        """))
    tofu.run("init", "-input=false")
    out = tofu.run("validate", ok=(1,))
    text = out.stdout + out.stderr
    assert "invalid name" in text and "'not an identifier' must be an identifier" in text, text
    assert "value is deprecated" in text, text
    assert tofu.objects() == []


def test_plugin_refuses_to_run_without_the_magic_cookie():
    proc = subprocess.run([sys.executable, "-m", "netpeer_provider.tofu", FACTORY], env=plugin_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("This binary is a plugin"), proc.stderr


def _openssl_cert(directory: Path, name: str) -> tuple[bytes, bytes]:
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost", "-days", "1",
                    "-addext", "subjectAltName=DNS:localhost", "-addext", "basicConstraints=critical,CA:TRUE"],
                   check=True, capture_output=True, env={**os.environ, "OPENSSL_CONF": "/dev/null"})
    return key.read_bytes(), cert.read_bytes()


def test_plugin_accepts_only_the_announced_client_certificate(workdir):
    import grpc

    from netpeer_provider.tofu import _stubs

    stubs = _stubs.load()
    key_a, cert_a = _openssl_cert(workdir, "tofu")   # what "OpenTofu" announces and presents
    key_b, cert_b = _openssl_cert(workdir, "other")  # anyone else on the machine
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "netpeer_provider.tofu", FACTORY], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=plugin_env(**dict([COOKIE]), PLUGIN_CLIENT_CERT=cert_a.decode(),
                                           PLUGIN_PROTOCOL_VERSIONS="6"))
    try:
        line = proc.stdout.readline().strip()
        startup = time.monotonic() - started
        fields = line.split("|")
        assert fields[:3] == ["1", "6", "unix"] and fields[4] == "grpc" and len(fields) == 6, (line, proc.stderr)
        sock = Path(fields[3])
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
        assert not fields[5].endswith("="), "go-plugin wants the certificate without base64 padding"
        der = base64.b64decode(fields[5] + "=" * (-len(fields[5]) % 4))
        server_pem = ("-----BEGIN CERTIFICATE-----\n" + base64.encodebytes(der).decode()
                      + "-----END CERTIFICATE-----\n").encode()
        print(f"plugin start-up to handshake: {startup:.2f}s")

        def call(key: bytes, cert: bytes):
            creds = grpc.ssl_channel_credentials(root_certificates=server_pem, private_key=key,
                                                 certificate_chain=cert)
            with grpc.secure_channel(f"unix:{sock}", creds,
                                     options=[("grpc.ssl_target_name_override", "localhost")]) as ch:
                return stubs.tf_grpc.ProviderStub(ch).GetProviderSchema(
                    stubs.tf.GetProviderSchema.Request(), timeout=20)

        with pytest.raises(grpc.RpcError) as refused:
            call(key_b, cert_b)
        assert refused.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED)

        schema = call(key_a, cert_a)
        assert set(schema.resource_schemas) == {"netpeer_toy"} and not schema.diagnostics

        creds = grpc.ssl_channel_credentials(root_certificates=server_pem, private_key=key_a, certificate_chain=cert_a)
        with grpc.secure_channel(f"unix:{sock}", creds,
                                 options=[("grpc.ssl_target_name_override", "localhost")]) as ch:
            stubs.ctl_grpc.GRPCControllerStub(ch).Shutdown(stubs.ctl.Empty(), timeout=20)
        asked = time.monotonic()
        assert proc.wait(timeout=30) == 0
        # go-plugin kills a plugin that is not gone 2 s after Shutdown (leaving its directory behind)
        print(f"plugin exit after Shutdown: {time.monotonic() - asked:.2f}s")
        assert not sock.parent.exists(), "the private socket directory must be removed on exit"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
