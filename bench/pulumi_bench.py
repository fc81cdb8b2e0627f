"""Pulumi overhead: ``pulumi up`` / ``refresh`` / ``destroy`` of stacks with N
netpeer resources against the same stacks made of a do-nothing dynamic
resource, with the real CLI (``scripts/install-pulumi.sh``), offline, as
tests/e2e/conftest.py runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.deploy import ADMIN_TOKEN, ROOT, Deployment

PASSPHRASE = "netpeer-bench"


def pulumi_bin() -> Path:
    out = subprocess.run(["bash", str(ROOT / "scripts/install-pulumi.sh")], capture_output=True, text=True,
                         timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"the Pulumi CLI is not available: {out.stderr.strip().splitlines()[-1:]}")
    return Path(out.stdout.strip().splitlines()[-1])


class Stack:
    def __init__(self, kind: str, count: int, workdir: Path, binary: Path, endpoint: str):
        self.dir = workdir / f"{kind}-{count}"
        shutil.copytree(Path(__file__).parent / "programs" / kind, self.dir)
        venv = Path(sys.prefix)
        project = self.dir / "Pulumi.yaml"
        project.write_text(project.read_text().replace("VENV", str(venv)))
        home, backend = workdir / "home", workdir / "backend"
        home.mkdir(exist_ok=True)
        backend.mkdir(exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("NETPEER_", "PULUMI_"))}
        self.env.update(PATH=f"{binary}:{self.env.get('PATH', '')}", PULUMI_HOME=str(home),
                        PULUMI_BACKEND_URL=f"file://{backend}", PULUMI_CONFIG_PASSPHRASE=PASSPHRASE,
                        PULUMI_SKIP_UPDATE_CHECK="true", PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
                        PULUMI_SKIP_CONFIRMATIONS="true", NO_COLOR="1", PULUMI_PYTHON_CMD=str(venv / "bin" / "python"),
                        PYTHONPATH=str(ROOT))
        self.run("stack", "init", f"bench-{count}")  # one backend for all stacks of a run
        self.run("config", "set", "count", str(count))
        self.run("config", "set", "namespace", f"pb-{kind}-{count}")
        self.run("config", "set", "netpeer:endpoint", endpoint)
        self.run("config", "set", "--secret", "netpeer:token", ADMIN_TOKEN)

    def run(self, *args: str, timeout: float = 900) -> float:
        t = time.perf_counter()
        proc = subprocess.run(["pulumi", *args, "--non-interactive", "--color", "never"], cwd=self.dir,
                              env=self.env, capture_output=True, text=True, timeout=timeout)
        elapsed = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"pulumi {' '.join(args)} in {self.dir} failed ({proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return elapsed

    def resources(self) -> int:
        import json
        proc = subprocess.run(["pulumi", "stack", "export"], cwd=self.dir, env=self.env, capture_output=True,
                              text=True, timeout=120, check=True)
        res = json.loads(proc.stdout)["deployment"].get("resources", [])
        return sum(1 for r in res if r["type"].startswith("pulumi-python:dynamic"))


def run(counts: list[int], reps: int = 1) -> dict:
    binary = pulumi_bin()
    out: dict = {"counts": counts, "reps": reps, "runs": {}}
    with Deployment(chassis=False) as d:
        d.start_ovn()
        d.start_netpeerd()
        work = d.dir / "pulumi"
        work.mkdir()
        for count in counts:
            for rep in range(reps):
                for kind in ("netpeer", "noop"):
                    key = f"{kind}-{count}"
                    stack = Stack(kind, count, work / f"r{rep}", binary, d.endpoint)
                    times = {"up": stack.run("up", "--yes", "--skip-preview")}
                    n = stack.resources()
                    if n != count:
                        raise RuntimeError(f"{key}: {n} dynamic resources in the state, expected {count}")
                    times["refresh"] = stack.run("refresh", "--yes", "--skip-preview")
                    times["up (no changes)"] = stack.run("up", "--yes", "--skip-preview")
                    times["destroy"] = stack.run("destroy", "--yes", "--skip-preview")
                    for op, secs in times.items():
                        out["runs"].setdefault(key, {}).setdefault(op, []).append(secs)
                    print(f"bench: pulumi {key} rep {rep}: " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items()),
                          file=sys.stderr, flush=True)
    overhead = {}
    for count in counts:
        for op in ("up", "refresh", "up (no changes)", "destroy"):
            a = min(out["runs"][f"netpeer-{count}"][op])
            b = min(out["runs"][f"noop-{count}"][op])
            overhead[f"{op} {count}"] = {"netpeer_s": a, "noop_s": b, "overhead_pct": (a / b - 1) * 100}
    out["overhead"] = overhead
    return out
