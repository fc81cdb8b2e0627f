"""Running the real ``tofu`` on root modules, as a user would, against a test's netpeerd.

``Home``: a HOME of the tests' own, where scripts/install-tofu-provider.sh installs netpeer's provider
(the package of scripts/build-packages.sh, not this checkout's sources) into OpenTofu's implied local
mirror (``~/.terraform.d/plugins/...``); no CLI configuration file is
used, so ``tofu init`` finds the provider exactly as on a user's machine. ``Module``: one root module
(a copy of an example, or text written by the test) with its own environment (endpoint, token).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("NETPEER_CACHE_DIR") or Path.home() / ".cache" / "netpeer")


def tofu_bin() -> Path:
    """The cached tofu (scripts/install-opentofu.sh builds it the first time); a failure if it cannot."""
    out = subprocess.run(["bash", str(ROOT / "scripts/install-opentofu.sh")], capture_output=True, text=True,
                         timeout=3600, env={**os.environ, "PYTHON": sys.executable})
    if out.returncode != 0:
        pytest.fail(f"tofu is not available: {out.stderr.strip().splitlines()[-1:]}")
    path = Path(out.stdout.strip().splitlines()[-1]) / "tofu"
    if not os.access(path, os.X_OK):
        pytest.fail(f"no tofu at {path}")
    return path


class Home:
    """A HOME with netpeer's provider installed by the project's own script."""

    def __init__(self, root: Path, binary: Path, *, install: bool = True):
        """``install=False``: the test installs the provider itself (another way, or not at all)."""
        self.root, self.binary = root, binary
        self.sockets = root / "sockets"  # the plugin's private directories go here (PLUGIN_UNIX_SOCKET_DIR)
        self.sockets.mkdir()
        if not install:
            return
        out = subprocess.run(["bash", str(ROOT / "scripts/install-tofu-provider.sh")], capture_output=True,
                             text=True, timeout=120,
                             env={**os.environ, "HOME": str(root), "PYTHON": sys.executable,
                                  "NETPEER_CACHE_DIR": str(CACHE)})
        if out.returncode != 0:
            pytest.fail(f"installing the provider failed: {out.stderr.strip()}")
        self.plugin_dir = Path(out.stdout.strip())

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "PLUGIN_", "NETPEER_"))}
        env.update(HOME=str(self.root), TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1", TF_INPUT="0",
                   PLUGIN_UNIX_SOCKET_DIR=str(self.sockets), XDG_DATA_HOME=str(self.root / ".local/share"),
                   XDG_CONFIG_HOME=str(self.root / ".config"), XDG_CACHE_HOME=str(self.root / ".cache"))
        return env


class Module:
    """One root module in ``directory``: ``run`` tofu in it, read its state and outputs."""

    def __init__(self, home: Home, directory: Path, *, example: str | None = None, **env: str):
        self.home, self.dir = home, directory
        if example:
            shutil.copytree(ROOT / "examples" / "opentofu" / example, directory)
        else:
            directory.mkdir(parents=True)
        self.env = {**home.env(), **env}

    def write(self, text: str, name: str = "main.tf") -> None:
        (self.dir / name).write_text(text)

    def run(self, *args: str, ok: tuple[int, ...] = (0,), **extra_env: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.home.binary), *args, "-no-color"], cwd=self.dir,
                              env={**self.env, **extra_env}, capture_output=True, text=True, timeout=600)
        if proc.returncode not in ok:
            pytest.fail(f"tofu {' '.join(args)} in {self.dir.name} exited {proc.returncode} (wanted {ok}):\n"
                        f"{proc.stdout[-5000:]}\n{proc.stderr[-5000:]}")
        return proc

    def init(self) -> subprocess.CompletedProcess:
        return self.run("init", "-input=false")

    def apply(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        return self.run("apply", "-auto-approve", "-input=false", *args, ok=ok)

    def plan(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        """``-detailed-exitcode``: 0 = no changes, 2 = changes."""
        return self.run("plan", "-detailed-exitcode", "-input=false", *args, ok=ok)

    def outputs(self) -> dict:
        return {k: v["value"] for k, v in json.loads(self.run("output", "-json").stdout).items()}

    def values(self, address: str) -> dict | None:
        shown = json.loads(self.run("show", "-json").stdout)
        for r in shown.get("values", {}).get("root_module", {}).get("resources", []):
            if r["address"] == address:
                return r["values"]
        return None

    def state_text(self) -> str:
        path = self.dir / "terraform.tfstate"
        return path.read_text() if path.exists() else ""


__all__ = ["Home", "Module", "tofu_bin"]
