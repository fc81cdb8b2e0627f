"""Helpers the tests share (fixtures live in the conftest.py files).

Nothing here is mocked: OVN daemons are real (``netpeer_dev.daemons``),
netpeerd is the real daemon (``netpeer.daemon.Daemon`` in this process, or
``netpeer_dev.process.NetpeerdProcess`` as a child process). A missing OVN
package fails the test loudly: the suite is meant to run where
``scripts/setup.sh`` has installed it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.config import Config
from netpeer.daemon import Daemon
from netpeer.ovn.backend import OvnBackend
from netpeer.service import Service
from netpeer.store.sqlite import SqliteStore
from netpeer_dev import netns as nsx
from netpeer_dev.daemons import OvnDaemonError, OvnDaemons
from netpeer_dev.process import NetpeerdProcess

ROOT = Path(__file__).resolve().parents[1]
ADMIN_TOKEN = "np_admin_" + "a" * 40
PASSPHRASE = "netpeer-tests"

#: Bytes that are no protobuf message of netpeer's, by what is wrong with them.
MALFORMED_PROTOBUF = {
    "a string that is not UTF-8": b"\x0a\x03\xff\xfe\xfd",
    "a truncated string": b"\x0a\x10abc",
    "groups nested 1,000 deep": b"\x0b" * 1000 + b"\x0c" * 1000,
    "groups nested 5,000 deep": b"\x0b" * 5000 + b"\x0c" * 5000,
    "an end of group without its start": b"\x0c",
    "an invalid wire type": b"\x0e\x01",
    "a varint that never ends": b"\x10" + b"\xff" * 11,
}

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what, step: float = 0.02, *,
               until: Callable[[T], object] = bool, ignore: tuple[type[BaseException], ...] = ()) -> T:
    """Calls ``condition()`` every ``step`` seconds until ``until`` of its
    answer is true (by default: the answer is), and returns that answer;
    fails the test after ``timeout`` seconds with ``what`` (a string, or a
    function of the last answer, for a message that says what was seen
    instead). An exception of ``ignore`` counts as "not yet" (it is the last
    answer ``what`` is given)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = condition()
        except ignore as exc:
            answer = exc
        else:
            if until(answer):
                return answer
        if time.monotonic() >= deadline:
            pytest.fail(f"{what(answer) if callable(what) else what} (waited {timeout:g} s)")
        time.sleep(step)


CENTRAL_TOOLS = ("ovsdb-server", "ovsdb-tool", "ovn-northd", "ovn-nbctl", "ovn-sbctl")
CHASSIS_TOOLS = ("ovs-vswitchd", "ovs-vsctl", "ovs-appctl", "ovn-controller", "ip")


def run_cli(*args: str, env: dict | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """``netpeer ARGS`` as a user runs it (``python -m netpeer.cli.main``),
    with ``env`` as its whole environment (None: the test's). With
    ``check``, an exit code other than 0 fails the test, naming the command
    and its stderr."""
    proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"netpeer {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def wait_dataplane_connected(daemons, timeout: float = 60.0) -> None:
    """Until every netpeerd of ``daemons`` (``NetpeerdProcess``es) answers
    with OVN connected, within ``timeout`` in all: after a fault, before
    calls that must not fail. The failure names the netpeerd and its log's
    tail."""
    deadline = time.monotonic() + timeout
    for d in daemons:
        def connected(d=d) -> bool:
            with Client(d.endpoint, d.admin_token, timeout=5) as c:
                return c.status()["dataplane_connected"]
        wait_until(connected, max(0.0, deadline - time.monotonic()),
                   lambda last, d=d: f"{d.endpoint} does not answer with OVN connected: {d.tail(300)}", step=0.05,
                   ignore=(errors.NetpeerError,))


def short_tmpdir(prefix: str = "np-") -> Path:
    """Unix socket paths must stay under 108 bytes: pytest's tmp_path is too long."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def require_ovn(chassis: bool = False) -> None:
    """Fail, with what is missing, when OVN cannot run here."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append("needs root")
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = [t for t in CENTRAL_TOOLS + (CHASSIS_TOOLS if chassis else ()) if shutil.which(t, path=path) is None]
    if missing:
        reasons.append("missing " + ", ".join(missing)
                       + " (Debian packages ovn-central, ovn-host, openvswitch-switch, iproute2)")
    if reasons:
        pytest.fail("; ".join(reasons) + ": run scripts/setup.sh (or `make test`) as root")


def make_pki(d: Path) -> Path:
    """In ``d``: a CA (ca.crt), a server certificate for localhost and
    127.0.0.1 (server.crt, server.key) and a client certificate (client.crt,
    client.key), made by openssl."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    d.mkdir(parents=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=netpeer-test-ca")
    for name, san in (("server", "subjectAltName=DNS:localhost,IP:127.0.0.1"), ("client", "subjectAltName=DNS:client")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={name}")
        (d / f"{name}.ext").write_text(san + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")
    return d


def netpeerd_config(directory: Path, ovn_nb: str, *, sweep_interval: str = "30s", ovn_timeout: str = "10s",
                    log_level: str = "INFO", listen: str | None = None, **extra) -> Config:
    """The configuration of a test's netpeerd in ``directory`` (admin token written there)."""
    from netpeer.core import validate
    token_file = directory / "admin.token"
    directory.mkdir(parents=True, exist_ok=True)
    token_file.write_text(ADMIN_TOKEN + "\n")
    return Config(listen=listen or f"unix://{directory / 'netpeer.sock'}", store=directory / "netpeer.db",
                  ovn_nb=ovn_nb, admin_token_file=token_file,
                  sweep_interval=validate.ttl("sweep_interval", sweep_interval),
                  ovn_timeout=validate.ttl("ovn_timeout", ovn_timeout), log_level=log_level, **extra)


def netpeerd_process(directory: Path, ovn_nb: str, **kwargs) -> NetpeerdProcess:
    """netpeerd as a child process (not started): to kill -9 it."""
    return NetpeerdProcess(netpeerd_config(directory, ovn_nb, **kwargs), directory, ADMIN_TOKEN)


@dataclasses.dataclass
class Netpeerd:
    """A real netpeerd in this process (``netpeer.daemon.Daemon``)."""

    ovn: OvnDaemons
    daemon: Daemon
    endpoint: str
    socket: Path

    @property
    def service(self) -> Service:
        return self.daemon.service

    @property
    def backend(self) -> OvnBackend:
        return self.daemon.backend

    @property
    def store(self) -> SqliteStore:
        return self.daemon.store

    def client(self, token: str = ADMIN_TOKEN) -> Client:
        return Client(self.endpoint, token, timeout=30)

    def token(self, *namespaces: str) -> str:
        with self.client() as c:
            return c.create_token(list(namespaces))["token"]

    def tenant(self, namespace: str) -> Client:
        return self.client(self.token(namespace))

    def owned_rows(self) -> dict[str, list[dict]]:
        return self.backend.owned_rows()

    def settle(self, timeout: float = 30.0) -> None:
        """Waits until every dataplane change was acknowledged (no peering is
        Programming): after it, nothing writes in the background until the
        next call (tests that compare store dumps or trace statements)."""
        def settled() -> bool:
            with self.store.read() as tx:
                return not tx.programming(2 ** 62, limit=1)
        wait_until(settled, timeout, "netpeerd's dataplane changes were never acknowledged")

    def stop(self) -> None:
        self.daemon.stop(grace=1)


def start_netpeerd(ovn: OvnDaemons, directory: Path, *, service_factory=None, workers: int = 16,
                   sweep_interval: str = "365d", **kwargs) -> Netpeerd:
    """netpeerd in this process, connected to ``ovn``. Its sweep runs once at
    start, then (by default) practically never: tests call ``service.sweep()``."""
    config = netpeerd_config(directory, ovn.nb_remote, sweep_interval=sweep_interval, **kwargs)
    daemon = Daemon(config, service_factory=service_factory, workers=workers)
    daemon.backend.start_replica()   # the whole replica before the start-up check, not after its stamp read
    assert daemon.backend.wait_connected(30), "netpeerd could not connect to the OVN NB database"
    daemon.start()
    netpeerd = Netpeerd(ovn, daemon, config.listen, directory / "netpeer.sock")
    wait_first_sweep(netpeerd)  # so it never races what the test does first
    # and health says SERVING (it re-checks every half second)
    wait_until(lambda: daemon.server.ready, 30, "netpeerd never became ready")
    return netpeerd


def wait_first_sweep(netpeerd: Netpeerd, timeout: float = 30.0) -> None:
    """The in-process netpeerd's start-up sweep has completed."""
    wait_until(lambda: netpeerd.service.reconciler.status.sweeps, timeout, "netpeerd's first sweep did not complete")


@dataclasses.dataclass
class Instances:
    """Creates namespaces attached to br-int and remembers them for cleanup."""

    daemons: OvnDaemons
    token: str = dataclasses.field(default_factory=lambda: secrets.token_hex(3))
    created: list[str] = dataclasses.field(default_factory=list)

    def name(self, short: str) -> str:
        """A namespace name unique to this test run (``np<token>-<short>``)."""
        return f"np{self.token}-{short}"

    def add(self, short: str, iface_id: str, mac: str, addresses: list[str], gateways: list[str],
            mtu: int = 1400, wait: bool = True) -> str:
        netns = self.name(short)
        self.created.append(netns)
        nsx.add_instance(self.daemons, netns, iface_id, mac, addresses, gateways, mtu=mtu)
        if wait:
            nsx.wait_instance_up(self.daemons, netns)
        return netns

    def cleanup(self) -> None:
        errors = []
        for netns in reversed(self.created):
            try:
                nsx.delete_instance(self.daemons, netns)
            except (nsx.NetnsError, OvnDaemonError) as exc:
                errors.append(str(exc))
        self.created.clear()
        if errors:
            raise RuntimeError("; ".join(errors))


class Stack:
    """One example project copied to a temp dir, with its own stack."""

    def __init__(self, example: str, workdir: Path, pulumi_bin: Path, backend: Path, home: Path, name: str):
        source = ROOT / example if "/" in example else ROOT / "examples" / example
        self.dir = workdir / f"{source.name}-{name}"
        shutil.copytree(source, self.dir)
        project = (self.dir / "Pulumi.yaml").read_text()
        venv = Path(sys.prefix)  # the venv running the tests has netpeer installed
        (self.dir / "Pulumi.yaml").write_text(project.replace("virtualenv: ../../.venv", f"virtualenv: {venv}"))
        self.name = name
        self.backend = backend
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("NETPEER_", "PULUMI_"))}
        self.env.update(PATH=f"{pulumi_bin}:{self.env.get('PATH', '')}", PULUMI_HOME=str(home),
                        PULUMI_BACKEND_URL=f"file://{backend}", PULUMI_CONFIG_PASSPHRASE=PASSPHRASE,
                        PULUMI_SKIP_UPDATE_CHECK="true", PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
                        PULUMI_SKIP_CONFIRMATIONS="true", NO_COLOR="1",
                        # Plugins started outside a program (`pulumi import`) use this interpreter.
                        PULUMI_PYTHON_CMD=str(venv / "bin" / "python"))
        self.runtime = next((line.split(":", 1)[1].strip() for line in project.splitlines()
                             if line.startswith("runtime:") and line.split(":", 1)[1].strip()), "python")
        # YAML, TypeScript: netpeer's provider plugin in this Pulumi home, installed from its package (the
        # tarball of scripts/build-packages.sh), not from this checkout. Python programs run the dynamic
        # providers in the venv running the tests, as a Python program runs them in its own venv.
        if self.runtime != "python":
            out = subprocess.run(["bash", str(ROOT / "scripts/install-pulumi-plugin.sh")], capture_output=True,
                                 text=True, timeout=600, env={**self.env, "NETPEER_PYTHON": sys.executable})
            if out.returncode != 0:
                pytest.fail(f"netpeer's Pulumi plugin cannot be installed: {out.stderr.strip()[-2000:]}")
        self.run("stack", "init", name)

    def run(self, *args: str, check: bool = True, timeout: float = 300,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run(["pulumi", *args, "--non-interactive", "--color", "never"], cwd=self.dir,
                              env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                                 f"{proc.stderr[-4000:]}")
        return proc

    def config(self, key: str, value: str, secret: bool = False) -> None:
        self.run("config", "set", *(["--secret"] if secret else ["--plaintext"]), key, value)

    def up(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run("up", "--yes", "--skip-preview", *args, check=check)

    def outputs(self) -> dict:
        return json.loads(self.run("stack", "output", "--json", "--show-secrets").stdout)

    def state(self) -> dict:
        return json.loads(self.run("stack", "export").stdout)

    def resource(self, type_suffix: str, name: str) -> dict | None:
        for r in self.state()["deployment"].get("resources", []):
            if r["type"].endswith(type_suffix) and r["urn"].endswith(f"::{name}"):
                return r
        return None



__all__ = ["ADMIN_TOKEN", "ROOT", "Instances", "Netpeerd", "Stack", "make_pki", "netpeerd_config", "netpeerd_process", "require_ovn", "short_tmpdir",
           "start_netpeerd", "wait_first_sweep"]
