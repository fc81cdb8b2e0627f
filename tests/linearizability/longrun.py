"""``python -m tests.linearizability`` (``make jepsen``): the long run.

    python -m tests.linearizability [--minutes 32] [--stacks sqlite,replicas,sites]
                                    [--segment 4] [--faults STACK=KIND[,KIND...]] [--seed N] [--out DIR]

Each stack is started once and runs the workload in segments of
``--segment`` minutes, every fault it can inject (or those ``--faults``
names) injected throughout; each segment is one history, checked by
lincheck, followed by the final checks (OVN == final state, pings on a
sample). The minutes are shared out 30/40/30 between the SQLite, replica
and two-site stacks. Writes ``results/jepsen/<timestamp>/report.json``,
``report.md``, and per segment its history (gzipped) and the
visualisations of any violation. Exit status 0 when every history is
linearizable and every final check passed, 1 otherwise, 2 for bad input
(one line).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

SHARES = {"sqlite": 0.3, "replicas": 0.4, "sites": 0.3}
EVERY = {"sqlite": (1.0, 3.0), "replicas": (1.0, 3.0), "sites": (2.0, 5.0)}


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.linearizability", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=32.0)
    p.add_argument("--stacks", default="sqlite,replicas,sites")
    p.add_argument("--segment", type=float, default=4.0, help="minutes per history")
    p.add_argument("--faults", action="append", default=[], metavar="STACK=KIND[,KIND...]")
    p.add_argument("--seed", type=int, default=20261127)
    p.add_argument("--out", type=Path, default=None)
    return p.parse_args(argv)


def settle_args(args: argparse.Namespace) -> tuple[list[str], dict[str, tuple[str, ...]]]:
    """The stacks and their faults; ValueError with one line for bad input."""
    from tests.linearizability.sites import SitesStack
    from tests.linearizability.stacks import ReplicaStack, SqliteStack, check_faults
    known = {"sqlite": SqliteStack, "replicas": ReplicaStack, "sites": SitesStack}
    stacks = [s.strip() for s in args.stacks.split(",") if s.strip()]
    for s in stacks:
        if s not in known:
            raise ValueError(f"--stacks: {s!r} is not a stack (known: {', '.join(known)})")
    if not stacks:
        raise ValueError("--stacks: names no stack")
    if args.minutes <= 0 or args.segment <= 0:
        raise ValueError(f"--minutes and --segment must be positive, got {args.minutes:g} and {args.segment:g}")
    faults = {s: known[s].FAULTS for s in stacks}
    for item in args.faults:
        stack, _, kinds = item.partition("=")
        if stack not in stacks or not kinds:
            raise ValueError(f"--faults: {item!r} is not STACK=KIND[,KIND...] for one of {', '.join(stacks)}")
        faults[stack] = tuple(check_faults(stack, [k.strip() for k in kinds.split(",") if k.strip()],
                                           known[stack].FAULTS))
    return stacks, faults


def run_stack(name: str, faults: tuple[str, ...], minutes: float, segment: float, seed: int, out: Path,
              binary: Path, figures: list[dict]) -> None:
    """The stack's share of the run, one history per segment, each on a
    stack started afresh (so that its state stays the size of a segment's);
    each segment's figures appended to ``figures`` as it ends."""
    from tests.linearizability import run as runs
    from tests.linearizability.sites import SitesStack, run_sites
    from tests.linearizability.stacks import ReplicaStack, SqliteStack
    from tests.support import short_tmpdir
    deadline = time.monotonic() + minutes * 60
    k = 0
    while k == 0 or time.monotonic() < deadline - 30:   # one history at least, then none shorter than 30 s
        k += 1
        seconds = max(min(segment * 60, deadline - time.monotonic()), 20.0)
        directory = out / f"{name}-{k}"
        directory.mkdir(parents=True, exist_ok=True)
        work = short_tmpdir("npj-")
        stack = {"sqlite": lambda: SqliteStack(work / "stack"), "replicas": lambda: ReplicaStack(work / "stack"),
                 "sites": lambda: SitesStack(work / "sites")}[name]()
        settings = runs.Settings(seconds=seconds, faults=faults, seed=seed + k, every=EVERY[name],
                                 timeout=5.0 if name != "sqlite" else 10.0, calls_per_group=120,
                                 clients_per_slot=2 if name == "sites" else 3, sample=2 if name == "sites" else 3)
        say(f"{name} #{k}: {seconds / 60:.1f} min, faults {', '.join(faults) or 'none'}")
        try:
            stack.start()
            if name == "sites":
                report = run_sites(stack, directory, settings, binary)
            else:
                report = runs.run(stack, directory, settings, binary, probe_status=(name == "replicas"))
            stack.logs_clean()
            f = {"history": str(directory / "history.jsonl.gz"), **report.figures()}
            say(f"  {f['verdict']}: {f['operations']} operations, faults {f['faults']}, checker {f['checker_s']} s")
        except Exception as exc:    # a segment that cannot go on is a result too: recorded, and the run goes on
            f = ended_early(name, directory, work, binary, f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")
            say(f"  {f['error']}; the history so far: {f['verdict']}")
        finally:
            try:
                stack.stop()
            finally:
                shutil.rmtree(work, ignore_errors=True)
            history = directory / "history.jsonl"
            if history.exists():
                with open(history, "rb") as src, gzip.open(str(history) + ".gz", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                history.unlink()
        figures.append(f)


def ended_early(name: str, directory: Path, work: Path, binary: Path, error: str) -> dict:
    """The figures of a segment that could not complete: why (error.txt, and
    the daemons' logs kept in logs/), and the checker's verdict on the
    history up to there."""
    from tests.linearizability import run as runs
    from tests.linearizability.checker import CheckerError
    (directory / "error.txt").write_text(traceback.format_exc())
    for log in work.rglob("*.log"):
        kept = directory / "logs" / log.relative_to(work)
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(log, kept)
    f = {"stack": name, "history": str(directory / "history.jsonl.gz"), "error": error[:500], "verdict": "unchecked",
         "anomalies": 0}
    history = directory / "history.jsonl"
    if history.exists() and history.stat().st_size:
        try:
            s = runs.checked(binary, history, directory).summary
        except CheckerError as exc:
            f["error"] += f"; the history could not be checked: {exc}"
            return f
        f.update(verdict=s["verdict"], operations=s["operations"], checked=s["checked"], by_outcome=s["by_outcome"],
                 groups=s["groups"], largest_group=s["largest_group"], in_doubt_writes=s["in_doubt_writes"],
                 faults=s["nemesis"], anomalies=len(s["violations"]) + len(s["unexpected_errors"]),
                 undecided=len(s["undecided"]), checker_s=round(s["checker_seconds"], 2), workload_s=0.0, pings={})
    return f


def say(message: str) -> None:
    print(f"jepsen: {message}", file=sys.stderr, flush=True)


def totals(runs: list[dict]) -> dict:
    done = [r for r in runs if "operations" in r]
    faults: dict[str, int] = {}
    for r in done:
        for k, v in r["faults"].items():
            faults[k] = faults.get(k, 0) + v
    return {"histories": len(done), "operations": sum(r["operations"] for r in done),
            "checked": sum(r["checked"] for r in done), "faults": faults,
            "anomalies": sum(r.get("anomalies", 0) for r in runs),
            "undecided": sum(r.get("undecided", 0) for r in done),
            "in_doubt_writes": sum(r["in_doubt_writes"] for r in done),
            "checker_s": round(sum(r["checker_s"] for r in done), 2),
            "workload_s": round(sum(r["workload_s"] for r in done), 1),
            "errors": [r["error"] for r in runs if r.get("error")]}


def markdown(report: dict) -> str:
    t = report["totals"]
    lines = [f"# Linearizability run {report['started']}", "",
             f"{report['minutes']:g} minutes requested, {report['took_s'] / 60:.1f} taken, seed {report['seed']}, "
             f"load average at the start {report['load']}", "",
             "| stack | history | verdict | operations checked | in doubt | faults | checker (s) | pings |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["runs"]:
        if "operations" not in r:
            lines.append(f"| {r['stack']} | {Path(r.get('history', '-')).parent.name} | ended early: {r['error']} "
                         "| | | | | |")
            continue
        pings = r.get("pings") or {}
        verdict = r["verdict"] + (f" (ended early: {r['error']})" if r.get("error") else "")
        lines.append(f"| {r['stack']} | {Path(r['history']).parent.name} | {verdict} | {r['checked']:,} | "
                     f"{r['in_doubt_writes']} | {', '.join(f'{k} {v}' for k, v in sorted(r['faults'].items()))} | "
                     f"{r['checker_s']} | {pings.get('bound_pairs_answered', '-')}/{pings.get('other_pairs_silent', '-')} |")
    lines += ["", f"Totals: {t['histories']} histories, {t['checked']:,} operations checked, faults "
              f"{', '.join(f'{k} {v}' for k, v in sorted(t['faults'].items()))}, {t['anomalies']} anomalies, "
              f"{t['undecided']} undecided, {len(t['errors'])} ended early, checker {t['checker_s']} s."]
    return "\n".join(lines) + "\n"


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    # SIGTERM and SIGINT end the run the same way, each stack stopped by pid on the way out
    # (a run started in the background has SIGINT ignored otherwise).
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        stacks, faults = settle_args(args)
    except ValueError as exc:
        print(f"jepsen: {exc}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("jepsen: needs root (OVN daemons, network namespaces, PostgreSQL)", file=sys.stderr)
        return 2
    from tests.linearizability.checker import CheckerError, find_lincheck
    try:
        binary = find_lincheck()
    except CheckerError as exc:
        print(f"jepsen: {exc}", file=sys.stderr)
        return 2
    out = args.out or Path("results") / "jepsen" / time.strftime("%Y%m%dT%H%M%S")
    report = run_all(stacks, faults, args.minutes, args.segment, args.seed, out, binary)
    print(markdown(report))
    say(f"report in {out}")
    t = report["totals"]
    if report["interrupted"]:
        return 130
    return 0 if not t["anomalies"] and not t["undecided"] and not t["errors"] else 1


def run_all(stacks: list[str], faults: dict[str, tuple[str, ...]], minutes: float, segment: float, seed: int,
            out: Path, binary: Path) -> dict:
    """The whole run (also the ``linearizability`` section of ``python -m
    bench``); its report, written to ``out`` as report.json and report.md.
    An interrupt (SIGINT, or SIGTERM through ``main``) ends it early."""
    started = time.strftime("%Y%m%dT%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    load = round(os.getloadavg()[0], 2)
    share = sum(SHARES[s] for s in stacks)
    runs: list[dict] = []
    interrupted = False
    try:
        for name in stacks:
            run_stack(name, faults[name], minutes * SHARES[name] / share, segment, seed, out, binary, runs)
    except KeyboardInterrupt:
        interrupted = True
        say("interrupted: the report holds the histories completed so far")
    report = {"started": started, "minutes": minutes, "seed": seed, "load": load, "interrupted": interrupted,
              "took_s": round(time.monotonic() - began, 1), "runs": runs, "totals": totals(runs)}
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "report.md").write_text(markdown(report))
    return report
