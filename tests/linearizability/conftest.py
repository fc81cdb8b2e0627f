"""Fixtures of the linearizability tests: the checker (built and cached by
scripts/install-porcupine.sh; without Go or the module proxy the tests fail,
saying so) and a fresh directory per test, removed afterwards."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from tests.linearizability.checker import CheckerError, find_lincheck
from tests.support import short_tmpdir


@pytest.fixture(scope="session")
def lincheck() -> Path:
    try:
        return find_lincheck()
    except CheckerError as exc:
        pytest.fail(f"{exc} (scripts/install-porcupine.sh; scripts/setup.sh runs it)")


@pytest.fixture
def workdir(request) -> Iterator[Path]:
    """A short temp dir, removed afterwards. With NETPEER_LINEARIZABILITY_KEEP=DIR,
    the runs it holds (history, lincheck's summary, visualisations) are
    copied to DIR/<test> first."""
    d = short_tmpdir("npl-")
    try:
        yield d
    finally:
        keep = os.environ.get("NETPEER_LINEARIZABILITY_KEEP")
        if keep:
            for run in d.glob("**/history.jsonl"):
                shutil.copytree(run.parent, Path(keep) / request.node.name / run.parent.name, dirs_exist_ok=True)
        shutil.rmtree(d, ignore_errors=True)
