"""lincheck, the checker (tests/linearizability/checker: netpeer's model over
Porcupine), from Python: built and cached by scripts/install-porcupine.sh,
found the way the tests find wireguard-go. Missing Go or an unreachable
module proxy is a failure, never a skip."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

from tests.support import ROOT

INSTALL = ROOT / "scripts" / "install-porcupine.sh"


class CheckerError(RuntimeError):
    """lincheck could not be built, or refused its input (one line)."""


def find_lincheck() -> Path:
    """The lincheck binary (built now if its source changed)."""
    out = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines() or ["(no output)"]
        raise CheckerError(f"lincheck cannot be built: {lines[-1]}")
    binary = Path(out.stdout.strip().splitlines()[-1]) / "lincheck"
    if not binary.is_file():
        raise CheckerError(f"{INSTALL} printed {binary.parent}, which holds no lincheck")
    return binary


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What lincheck said of a history."""

    exit_code: int
    summary: dict

    @property
    def linearizable(self) -> bool:
        return self.exit_code == 0

    @property
    def violations(self) -> list[dict]:
        return self.summary.get("violations", [])


def check(binary: Path, history: Path, out: Path | None = None, timeout: float = 120.0) -> Verdict:
    """Runs lincheck on ``history``; raises CheckerError with its one line
    when it refuses the input."""
    argv = [str(binary), "check", str(history), "-timeout", str(timeout)]
    if out is not None:
        argv += ["-out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout * 20 + 60)
    if proc.returncode == 2:
        raise CheckerError(proc.stderr.strip())
    try:
        summary = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise CheckerError(f"lincheck answered {proc.returncode} without a summary: {proc.stderr.strip()[-500:]}")
    return Verdict(proc.returncode, summary)
