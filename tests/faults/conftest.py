"""Fixtures of the fault tests: every process they start is stopped by pid in
a finalizer, whatever the test did, and every temp dir is removed."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from netpeer_dev.nbcluster import NbCluster
from netpeer_dev.process import NetpeerdProcess
from tests.support import netpeerd_process, require_ovn


@pytest.fixture
def netpeerd_factory(state_dir):
    """Make (not start) netpeerd processes in the test's state dir; all are
    stopped at teardown."""
    made: list[NetpeerdProcess] = []

    def make(ovn_nb: str, name: str = "netpeerd", **kwargs) -> NetpeerdProcess:
        daemon = netpeerd_process(Path(state_dir) / name, ovn_nb, **kwargs)
        made.append(daemon)
        return daemon

    yield make
    for daemon in made:
        daemon.stop()


@pytest.fixture
def nb_cluster():
    """A running three-member clustered NB with SB and ovn-northd, stopped
    (by pid) and removed afterwards."""
    require_ovn()
    directory = Path(tempfile.mkdtemp(prefix="npc-", dir="/tmp"))
    cluster = None
    try:
        cluster = NbCluster(directory)
        cluster.start()
        yield cluster
    finally:
        try:
            if cluster is not None:
                cluster.stop()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
