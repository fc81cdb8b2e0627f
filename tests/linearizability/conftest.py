"""Fixtures of the linearizability tests: the checker (built and cached by
scripts/install-porcupine.sh; without Go or the module proxy the tests fail,
saying so) and a fresh directory per test, removed afterwards."""

from __future__ import annotations

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
def workdir() -> Iterator[Path]:
    d = short_tmpdir("npl-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
