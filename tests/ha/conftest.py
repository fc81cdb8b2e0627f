"""Fixtures of the replica tests: real netpeerd processes on one PostgreSQL
database (tests/pgsupport.py: one cluster per session, a database per test)
and one OVN NB Raft cluster of three (``netpeer_dev.nbcluster``), all
stopped by pid and removed afterwards."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from netpeer_dev.nbcluster import NbCluster
from netpeer_dev.process import NetpeerdProcess
from tests.support import ADMIN_TOKEN, netpeerd_config, require_ovn, short_tmpdir


@pytest.fixture
def nb3() -> Iterator[NbCluster]:
    """A running NB Raft cluster of three with SB and northd."""
    require_ovn()
    directory = short_tmpdir("nph-")
    cluster = NbCluster(directory)
    try:
        cluster.start()
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def replicas(state_dir, pg_url):
    """``make(count, ovn_nb, **config)``: that many netpeerd processes (not
    started) sharing the test's PostgreSQL database; all stopped at teardown."""
    made: list[NetpeerdProcess] = []

    def make(count: int, ovn_nb: str, **kwargs) -> list[NetpeerdProcess]:
        out = []
        for _ in range(count):
            i = len(made) + 1
            directory = Path(state_dir) / f"r{i}"
            config = dataclasses.replace(netpeerd_config(directory, ovn_nb, **kwargs), store=pg_url)
            daemon = NetpeerdProcess(config, directory, ADMIN_TOKEN)
            made.append(daemon)
            out.append(daemon)
        return out

    yield make
    for daemon in made:
        daemon.stop()


def pytest_terminal_summary(terminalreporter):
    from tests.trust import report
    if report.FIGURES:
        terminalreporter.section("netpeer replica figures")
        for line in report.lines():
            terminalreporter.write_line(line)
