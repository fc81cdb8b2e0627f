"""One netpeerd on SQLite, killed with kill -9 and started again while
twelve clients call it: every client's history is linearizable
(tests/linearizability/checker), OVN ends with exactly the rows the final
state implies, and pings agree with the final Bound set on a sample.

The short version of what ``make jepsen`` runs for minutes
(``NETPEER_LINEARIZABILITY_SECONDS`` makes it longer)."""

from __future__ import annotations

import os

from tests.linearizability import run as runs
from tests.linearizability.stacks import SqliteStack
from tests.support import require_ovn

SECONDS = float(os.environ.get("NETPEER_LINEARIZABILITY_SECONDS", "12"))
SEED = int(os.environ.get("NETPEER_FAULTS_SEED", "20261127"))


def test_kill9_while_clients_contend_stays_linearizable(lincheck, workdir, request):
    require_ovn(chassis=True)
    stack = SqliteStack(workdir / "stack")
    try:
        stack.start()
        report = runs.run(stack, workdir / "run", runs.Settings(seconds=SECONDS, faults=("kill",), seed=SEED,
                                                                every=(1.0, 2.5), rounds=2), lincheck)
        stack.logs_clean()
    finally:
        stack.stop()
    runs.assert_clean(report)
    figures = report.figures()
    assert figures["faults"].get("kill", 0) >= 2, figures
    assert figures["pings"]["bound_pairs_answered"] >= 1 and figures["pings"]["other_pairs_silent"] >= 1, figures
    runs.publish(request, "sqlite_kill9", figures)
