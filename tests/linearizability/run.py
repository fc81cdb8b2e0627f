"""One run: a stack, the workload for some seconds with faults injected
meanwhile, the checks of the final state, then the checker on the history.
Shared by the tests and by ``python -m tests.linearizability`` (``make
jepsen``)."""

from __future__ import annotations

import dataclasses
import json
import random
import time
from pathlib import Path

from tests.linearizability import checker
from tests.linearizability.history import History
from tests.linearizability.stacks import check_faults, nemesis
from tests.linearizability.workload import Run, run_for
from tests.support import ADMIN_TOKEN


@dataclasses.dataclass
class Settings:
    seconds: float = 30.0
    faults: tuple[str, ...] = ()
    seed: int = 1
    slots: int = 4
    clients_per_slot: int = 3
    calls_per_group: int = 60
    timeout: float = 10.0
    every: tuple[float, float] = (1.0, 3.0)   # seconds between faults
    sample: int = 3                            # pairs of each kind pinged at the end
    rounds: int = 0                            # at least this many rounds of every fault
    prefix: str = "g"


@dataclasses.dataclass
class Report:
    stack: str
    history: Path
    seconds: float
    verdict: checker.Verdict
    faults: dict[str, int]
    final: object
    run_seconds: float

    def figures(self) -> dict:
        s = self.verdict.summary
        return {"stack": self.stack, "verdict": s["verdict"], "operations": s["operations"],
                "checked": s["checked"], "by_outcome": s["by_outcome"], "groups": s["groups"],
                "largest_group": s["largest_group"], "in_doubt_writes": s["in_doubt_writes"],
                "faults": self.faults, "anomalies": len(s["violations"]) + len(s["unexpected_errors"]),
                "undecided": len(s["undecided"]), "checker_s": round(s["checker_seconds"], 2),
                "workload_s": round(self.seconds, 1), "run_s": round(self.run_seconds, 1),
                "ovn_matched_store_after_s": round(getattr(self.final, "ovn_matches_store_s", 0.0), 2),
                "pings": getattr(self.final, "pings", {}), **({"sites": s["sites"]} if s.get("sites") else {})}


def run(stack, directory: Path, settings: Settings, binary: Path, probe_status: bool = False,
        meta: dict | None = None) -> Report:
    """The workload against a started ``stack`` with ``settings.faults``;
    the final checks; the checker's verdict."""
    began = time.monotonic()
    check_faults(stack.name, list(settings.faults), stack.FAULTS)
    directory.mkdir(parents=True, exist_ok=True)
    history = History(directory / "history.jsonl")
    extra = {"lease_s": stack.lease_s} if getattr(stack, "lease_s", 0) else {}
    history.meta(stack=stack.name, seed=settings.seed, faults=list(settings.faults), seconds=settings.seconds,
                 **extra, **(meta or {}))
    work = Run(history, stack.endpoints, ADMIN_TOKEN, slots=settings.slots,
               clients_per_slot=settings.clients_per_slot, calls_per_group=settings.calls_per_group,
               seed=settings.seed, timeout=settings.timeout, prefix=settings.prefix, probe_status=probe_status)
    rnd = random.Random(settings.seed)
    injected: dict[str, int] = {}

    def faults(deadline: float) -> None:
        if settings.faults:
            injected.update(nemesis(stack, history, list(settings.faults), rnd, deadline, settings.every,
                                    rounds=settings.rounds))

    started = time.monotonic()
    try:
        run_for(work, settings.seconds, faults)
    finally:
        history.close()
    seconds = time.monotonic() - started
    final = stack.final(settings.sample, settings.seed)
    verdict = checked(binary, history.path, directory)
    return Report(stack.name, history.path, seconds, verdict, injected, final, time.monotonic() - began)


def checked(binary: Path, history: Path, directory: Path) -> checker.Verdict:
    """lincheck's verdict on ``history``, kept in ``directory`` (summary.json,
    and for each violation Porcupine's page and, with matplotlib, a PNG of the first three)."""
    verdict = checker.check(binary, history, out=directory / "violations")
    (directory / "summary.json").write_text(json.dumps(verdict.summary, indent=1) + "\n")
    try:
        from tests.linearizability.plot import draw
    except ImportError:
        return verdict
    for i, v in enumerate(verdict.violations[:3]):
        try:
            draw(history, verdict.summary, Path(v["visualization"]).with_suffix(".png"), i)
        except ImportError:   # no matplotlib: the HTML page is there
            break
    return verdict


def publish(request, name: str, figures: dict) -> None:
    """Prints a run's figures on the terminal (one ``[linearizability]`` JSON
    line) and, when NETPEER_LINEARIZABILITY_REPORT names a file, appends them there."""
    import json
    import os
    line = json.dumps({"test": name, **figures}, sort_keys=True)
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\n[linearizability] {line}")
    path = os.environ.get("NETPEER_LINEARIZABILITY_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def assert_clean(report: Report) -> None:
    """Linearizable, every group decided, no unexpected answer."""
    s = report.verdict.summary
    assert report.verdict.linearizable, (f"{s['verdict']}: {json.dumps(s['violations'][:3], indent=1)}; "
                                         f"undecided {s['undecided'][:5]}; history {report.history}")
    assert not s["unexpected_errors"], s["unexpected_errors"][:5]
