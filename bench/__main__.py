"""``python -m bench [--quick] [--out DIR] [--only SECTION ...]``

Writes ``results/<timestamp>/results.json``, ``results.md`` and PNG plots.
``--quick`` runs tiny sizes and few samples (a smoke run of the harness,
about two minutes); the figures it prints mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench import report
from bench.deploy import ROOT, load_average

SECTIONS = ("scale", "bulk", "stores", "pulumi", "tofu", "shapes", "sites", "region", "linearizability")
#: Run only when asked (--only): its long form is `make jepsen`.
OPT_IN = ("linearizability",)

FULL = {
    "sizes": [100, 1000, 10000],
    "bind_samples": {100: 300, 1000: 300, 10000: 300},  # p99 = 3rd worst
    "ttt_samples": {100: 16, 1000: 16, 10000: 2},
    "lflow_pairs": {100: 10, 1000: 10, 10000: 0},   # same per pair at any size; at 10,000 a count costs minutes
    "cli_reps": {100: 0, 1000: 5, 10000: 0},
    "bulk": {"networks": 500, "pairs": 1000, "concurrency": 32},
    "pulumi": {"counts": [50, 200], "reps": 5},   # medians of 5, interleaved: the machine is shared
    "tofu": {"counts": [50, 200], "reps": 1, "startup_samples": 10},
    "shapes": {"sizes": [1000], "samples": 6, "lflow_pairs": 10},
    "stores": {"networks": 500, "pairs": 1000, "concurrency": 32, "binds": 200},
    "sites": {"ttt_samples": 20, "kills": 10, "bringups": 3},
    # bench/region.py. Before, whole sides cost seconds per bind at 10,000 pairs: its samples are few.
    "region": {"pairs": {"sizes": [100, 1000, 10000], "samples": {100: 300, 1000: 300, 10000: 300},
                         "before_samples": {100: 100, 1000: 20, 10000: 3}, "budget_s": 120, "idle": 100,
                         "idle_budget_s": 20, "daemon_samples": 300, "idle_window_s": 20},
               "regions": [{"sites": 10, "networks": 2500, "pairs": 250, "samples": 5, "ks": [10, 100, 1000],
                            "cut": 4},
                           {"sites": 20, "networks": 5000, "pairs": 500, "samples": 5, "ks": [10, 100, 1000],
                            "cut": 4}],
               # On OVN 23.03 the chassis fell behind for good at 1,000 (docs/performance.md, "A region of many sites"):
               # that size is given 300 s, and what the chassis did instead is recorded.
               "ovn": {"loads": [10, 250, 1000], "ttt_samples": 10, "attach_samples": 3, "build_timeout": 300}},
    "linearizability": {"minutes": 6, "segment": 2},
}
QUICK = {
    "sizes": [30, 60],
    "bind_samples": {30: 20, 60: 20},
    "ttt_samples": {30: 2, 60: 2},
    "lflow_pairs": 2,
    "cli_reps": {30: 1, 60: 0},
    "bulk": {"networks": 20, "pairs": 30, "concurrency": 8},
    "pulumi": {"counts": [4], "reps": 1},
    "tofu": {"counts": [4], "reps": 1, "startup_samples": 2},
    "shapes": {"sizes": [30], "samples": 1, "lflow_pairs": 2},
    "stores": {"networks": 40, "pairs": 60, "concurrency": 8, "binds": 10},
    "sites": {"ttt_samples": 2, "kills": 2, "bringups": 1},
    "region": {"pairs": {"sizes": [20, 60], "samples": {20: 10, 60: 10}, "before_samples": {20: 5, 60: 5},
                         "budget_s": 20, "idle": 10, "idle_budget_s": 5, "daemon_samples": 10, "idle_window_s": 3},
               "regions": [{"sites": 4, "networks": 40, "pairs": 4, "samples": 2, "ks": [2, 5], "cut": 1,
                            "settle_s": 0},
                           {"sites": 6, "networks": 60, "pairs": 6, "samples": 1, "ks": [2, 5], "cut": 2,
                            "settle_s": 0}],
               "ovn": {"loads": [2, 6], "ttt_samples": 2, "attach_samples": 2}},
    "linearizability": {"minutes": 3, "segment": 0.5},
}


def machine() -> dict:
    def version(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
        except Exception:
            return "?"
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    return {"cpus": os.cpu_count(), "mem_gib": round(int(mem) / 2**20, 1), "python": platform.python_version(),
            "ovn": version(["ovn-northd", "--version"]), "ovs": version(["ovs-vswitchd", "--version"]),
            "git": rev + ("-dirty" if dirty else ""), "kernel": platform.release()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes, few samples: a smoke run of the harness")
    p.add_argument("--out", help="output directory (default results/<timestamp>)")
    p.add_argument("--only", action="append", choices=SECTIONS, help="run only these sections (repeatable)")
    p.add_argument("--sizes", help="comma-separated deployment sizes (networks), overriding the preset")
    p.add_argument("--shapes-sizes", help="comma-separated sizes for the shapes section, overriding the preset")
    p.add_argument("--report-only", metavar="JSON", help="re-render the table and plots from a results.json")
    args = p.parse_args(argv)

    if args.report_only:
        src = Path(args.report_only)
        data = json.loads(src.read_text())
        report.write(data, Path(args.out) if args.out else src.parent)
        return 0
    # Started in the background, a process inherits SIGINT ignored: restore
    # it, and let SIGTERM clean up the same way (daemons, namespaces, temp dirs).
    def interrupted(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    if os.geteuid() != 0:
        print("bench: needs root (OVN daemons, network namespaces)", file=sys.stderr)
        return 2
    preset = dict(QUICK if args.quick else FULL)
    if args.sizes:
        preset["sizes"] = [int(x) for x in args.sizes.split(",")]
    if args.shapes_sizes:
        preset["shapes"] = dict(preset["shapes"], sizes=[int(x) for x in args.shapes_sizes.split(",")])
    out = Path(args.out) if args.out else ROOT / "results" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    sections = args.only or [x for x in SECTIONS if x not in OPT_IN]
    data: dict = {"meta": {"quick": args.quick, "preset": preset, "machine": machine(),
                           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "load_start": load_average()}}
    t_start = time.monotonic()

    def save():
        data["meta"]["elapsed_s"] = time.monotonic() - t_start
        (out / "results.json").write_text(json.dumps(data, indent=1, default=str))

    load_samples = []
    import threading
    stop = threading.Event()

    def sample_load():
        while not stop.wait(10):
            load_samples.append(load_average()[0])
    threading.Thread(target=sample_load, daemon=True).start()

    from bench import scale
    try:
        if "scale" in sections:
            data["scale"] = {}
            for n in preset["sizes"]:
                data["scale"][str(n)] = scale.run_size(
                    n, bind_samples=_pick(preset["bind_samples"], n, 100), ttt_samples=_pick(preset["ttt_samples"], n, 5),
                    lflow_pairs=preset["lflow_pairs"], cli_reps=_pick(preset["cli_reps"], n, 0))
                save()
        if "bulk" in sections:
            from bench import bulk
            scale.log("bulk apply")
            data["bulk"] = bulk.run(**preset["bulk"])
            save()
        if "stores" in sections:
            from bench import stores
            scale.log("stores: SQLite, PostgreSQL x1, PostgreSQL x2")
            data["stores"] = stores.run(**preset["stores"])
            save()
        if "pulumi" in sections:
            from bench import pulumi_bench
            scale.log("pulumi")
            data["pulumi"] = pulumi_bench.run(**preset["pulumi"])
            save()
        if "tofu" in sections:
            from bench import tofu_bench
            scale.log("tofu against pulumi")
            data["tofu"] = tofu_bench.run(**preset["tofu"])
            save()
        if "shapes" in sections:
            from bench import shapes
            data["shapes"] = shapes.run(**preset["shapes"])
            save()
        if "sites" in sections:
            from bench import sites_bench
            scale.log("cross-site")
            data["sites"] = sites_bench.run(**preset["sites"])
            save()
        if "region" in sections:
            from bench import region
            scale.log("region: many sites, one link as its pairs grow, before and after")
            data["region"] = {}
            region.run(**preset["region"], into=data["region"], save=save)
        if "linearizability" in sections:
            # Concurrent clients' histories under faults, checked by lincheck (tests/linearizability).
            from tests.linearizability.longrun import parse, run_all, settle_args
            from tests.linearizability.checker import find_lincheck
            scale.log("linearizability")
            wanted = parse(["--minutes", str(preset["linearizability"]["minutes"])])
            stacks, faults = settle_args(wanted)
            data["linearizability"] = run_all(stacks, faults, wanted.minutes, preset["linearizability"]["segment"],
                                              wanted.seed, out / "linearizability", find_lincheck())
            save()
    finally:
        stop.set()
        data["meta"]["load_samples_1min"] = load_samples
        data["meta"]["load_end"] = load_average()
        save()
    report.write(data, out)
    print(out)
    return 0


def _pick(table: dict, n: int, default):
    return table.get(n, default)


if __name__ == "__main__":
    sys.exit(main())
