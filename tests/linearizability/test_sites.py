"""Two sites (OVN-IC over WireGuard, a netpeerd on SQLite per site) while
clients call both: the WAN cut and healed, and either site's netpeerd
killed with kill -9 and started again, each at least once.

Within each site every answer is linearizable; across the sites each side
is linearizable for its own halves, and once the last fault has healed both
sides agree on every pair within ``AGREE_S`` (never Bound on one side while
the other withdrew). Afterwards each site's OVN holds exactly the rows its
store implies, and pings across the sites agree with the final Bound set on
a sample."""

from __future__ import annotations

import os

from tests.linearizability import run as runs
from tests.linearizability.sites import SitesStack, run_sites
from tests.sites.conftest import start_multi, stop_multi
from tests.sites.helpers import all_pids

SECONDS = float(os.environ.get("NETPEER_LINEARIZABILITY_SECONDS", "12"))
SEED = int(os.environ.get("NETPEER_FAULTS_SEED", "20261127"))


def test_wan_cuts_and_kills_across_sites(lincheck, workdir, credential_watch, request):
    mark = credential_watch.mark()
    multi = start_multi(ha=False)
    pids = all_pids(multi)
    stack = SitesStack(workdir, multi=multi)
    try:
        report = run_sites(stack, workdir / "run", runs.Settings(
            seconds=SECONDS, faults=SitesStack.FAULTS, seed=SEED, every=(0.5, 1.5), rounds=1, timeout=5.0,
            clients_per_slot=2, sample=2), lincheck)
        stack.logs_clean()
    finally:
        stack.stop()
        stop_multi(multi, pids, credential_watch, mark)
    runs.assert_clean(report)
    figures = report.figures()
    assert all(figures["faults"].get(kind, 0) >= 1 for kind in SitesStack.FAULTS), figures
    sites = report.verdict.summary["sites"]
    assert sites["pairs"] == stack.pairs and not sites["disagreements"], sites
    assert figures["pings"]["bound_pairs_answered"] >= 1 and figures["pings"]["other_pairs_silent"] >= 1, figures
    runs.publish(request, "sites_cuts_and_kills", figures)
