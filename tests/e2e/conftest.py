"""The real Pulumi engine: the `pulumi` CLI built by scripts/install-pulumi.sh,
a local file backend, everything offline, driving the stacks in examples/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PASSPHRASE = "netpeer-tests"


@pytest.fixture(scope="session")
def pulumi_bin() -> Path:
    """Builds (first time) or finds the cached CLI. No CLI is a failure, never a skip."""
    out = subprocess.run(["bash", str(ROOT / "scripts/install-pulumi.sh")], capture_output=True, text=True,
                         timeout=1800)
    assert out.returncode == 0, f"the Pulumi CLI is not available: {out.stderr.strip().splitlines()[-1:]}"
    return Path(out.stdout.strip().splitlines()[-1])


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
        self.run("stack", "init", name)

    def run(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        proc = subprocess.run(["pulumi", *args, "--non-interactive", "--color", "never"], cwd=self.dir,
                              env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                                 f"{proc.stderr[-4000:]}")
        return proc

    def config(self, key: str, value: str, secret: bool = False) -> None:
        self.run("config", "set", *(["--secret"] if secret else ["--plaintext"]), key, value)

    def up(self, check: bool = True) -> subprocess.CompletedProcess:
        return self.run("up", "--yes", "--skip-preview", check=check)

    def outputs(self) -> dict:
        return json.loads(self.run("stack", "output", "--json", "--show-secrets").stdout)

    def state(self) -> dict:
        return json.loads(self.run("stack", "export").stdout)

    def resource(self, type_suffix: str, name: str) -> dict | None:
        for r in self.state()["deployment"].get("resources", []):
            if r["type"].endswith(type_suffix) and r["urn"].endswith(f"::{name}"):
                return r
        return None


@pytest.fixture
def stacks(netpeerd, pulumi_bin, state_dir):
    """A factory of example stacks configured against netpeerd."""
    backend, home = state_dir / "backend", state_dir / "pulumi-home"
    backend.mkdir()
    home.mkdir()
    made: list[Stack] = []

    def make(example: str, token: str, name: str = "dev") -> Stack:
        s = Stack(example, state_dir, pulumi_bin, backend, home, name)
        s.config("netpeer:endpoint", netpeerd.endpoint)
        s.config("netpeer:token", token, secret=True)
        made.append(s)
        return s

    yield make
    for s in reversed(made):  # leave nothing behind in the service
        s.run("destroy", "--yes", check=False)
