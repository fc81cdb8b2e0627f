"""The checker catches each fault it is meant to catch: a build of
netpeerd with one planted in it (tests/linearizability/planted.py, a
test-only entry point: netpeerd itself knows nothing of it) runs the same
workload, and the checker's verdict must be "not linearizable", naming an
operation that its visualisation draws.

- a write acknowledged before its commit (SQLite): a read after the answer
  misses it;
- reads served from a stale cache on a replica that does not lead;
- a paused leader that keeps its lease: it wakes up still leading while the
  replica that took over leads too.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.linearizability import run as runs
from tests.linearizability.stacks import ReplicaStack, SqliteStack
from tests.support import require_ovn

READS = ("get_peering", "list_networks")


def shown(visualization: Path) -> set[str]:
    """The operations Porcupine's page draws."""
    html = visualization.read_text()
    start = html.index("const data = ") + len("const data = ")
    data, _ = json.JSONDecoder().raw_decode(html[start:])
    return {e["Description"] for p in data["Partitions"] for e in p["History"]}


def flagged(report: runs.Report) -> list[dict]:
    verdict = report.verdict
    assert verdict.exit_code == 1 and verdict.summary["verdict"] == "not linearizable", verdict.summary
    for v in verdict.violations:
        assert v["operation"] in shown(Path(v["visualization"])), v
    return verdict.violations


def test_a_write_acknowledged_before_its_commit_is_flagged(lincheck, workdir, request):
    require_ovn()
    stack = SqliteStack(workdir / "stack", plant="ack-before-commit", chassis=False)
    try:
        stack.start()
        report = runs.run(stack, workdir / "run", runs.Settings(seconds=6, seed=1), lincheck)
    finally:
        stack.stop()
    violations = flagged(report)
    runs.publish(request, "planted_ack_before_commit", {**report.figures(), "flagged": violations[0]["operation"]})


def test_stale_reads_on_a_follower_are_flagged(lincheck, workdir, pg_cluster, pg_url, request):
    require_ovn()
    stack = ReplicaStack(workdir / "stack", plant="stale-follower-reads", pg=pg_cluster, url=pg_url)
    try:
        stack.start()
        report = runs.run(stack, workdir / "run", runs.Settings(seconds=6, seed=2, timeout=5.0), lincheck)
    finally:
        stack.stop()
    violations = flagged(report)
    assert any(v["operation"].startswith(READS) for v in violations), violations
    runs.publish(request, "planted_stale_follower_reads", {**report.figures(), "flagged": violations[0]["operation"]})


def test_a_paused_leader_that_keeps_its_lease_is_flagged(lincheck, workdir, pg_cluster, pg_url, request):
    require_ovn()
    stack = ReplicaStack(workdir / "stack", plant="paused-leader-keeps-lease", pg=pg_cluster, url=pg_url)
    try:
        stack.start()
        report = runs.run(stack, workdir / "run", runs.Settings(
            seconds=3, faults=("pause-leader",), seed=3, every=(0.5, 1.0), rounds=1, timeout=5.0),
            lincheck, probe_status=True)
    finally:
        stack.stop()
    violations = flagged(report)
    assert [v["group"] for v in violations] == ["lease"], violations
    runs.publish(request, "planted_paused_leader_keeps_lease", {**report.figures(),
                                                               "flagged": violations[0]["operation"]})
