"""Two netpeerd replicas on PostgreSQL and an NB Raft cluster of three,
while twelve clients call both replicas and a probe asks each, twenty times
a second, whether it leads. Each of these faults is injected at least once:
kill -9 of the leader and of the follower (each started again), the leader
paused (SIGSTOP) for longer than its lease and then continued, an immediate
shutdown and restart of PostgreSQL, kill -9 of the NB Raft leader.

Every client's history is linearizable, and so are the claims of the lease
(never two replicas leading within one lease: a paused leader that wakes up
must not go on leading, nor answer from what it knew before). Afterwards OVN
holds exactly the rows the final state implies, and pings between instances
on a chassis of the cluster's SB agree with the final Bound set on a sample.
"""

from __future__ import annotations

import os

from tests.linearizability import run as runs
from tests.linearizability.stacks import ReplicaStack
from tests.support import require_ovn

SECONDS = float(os.environ.get("NETPEER_LINEARIZABILITY_SECONDS", "15"))
SEED = int(os.environ.get("NETPEER_FAULTS_SEED", "20261127"))


def test_replica_and_store_faults_stay_linearizable(lincheck, workdir, pg_cluster, pg_url, request):
    require_ovn()
    stack = ReplicaStack(workdir / "stack", pg=pg_cluster, url=pg_url)
    try:
        stack.start()
        report = runs.run(stack, workdir / "run", runs.Settings(
            seconds=SECONDS, faults=ReplicaStack.FAULTS, seed=SEED, every=(0.5, 1.5), rounds=1, timeout=5.0),
            lincheck, probe_status=True)
        stack.logs_clean()
    finally:
        stack.stop()
    runs.assert_clean(report)
    figures = report.figures()
    assert all(figures["faults"].get(kind, 0) >= 1 for kind in ReplicaStack.FAULTS), figures
    assert report.verdict.summary["by_operation"].get("status", 0) > 0
    assert figures["pings"]["bound_pairs_answered"] >= 1 and figures["pings"]["other_pairs_silent"] >= 1, figures
    runs.publish(request, "replicas_faults", figures)
