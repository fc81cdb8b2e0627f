"""Fixtures of the trust tests. The real OVN daemons and the in-process
netpeerd come from tests/conftest.py; the real `pulumi` CLI harness from
tests/e2e/conftest.py."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import pulumi_bin, stacks  # noqa: F401  (fixtures, re-exported for tests/trust)
from tests.trust import report
from tests.trust.invariants import Checker
from tests.trust.recording import start_recording_netpeerd


@pytest.fixture
def checker(netpeerd):
    c = Checker(netpeerd)
    yield c
    c.close()


@pytest.fixture
def recorded(ovn, state_dir):
    """netpeerd whose service records the serialization order of writes."""
    daemon, stop = start_recording_netpeerd(ovn, state_dir)
    try:
        yield daemon
    finally:
        stop()


def pytest_terminal_summary(terminalreporter):
    if report.FIGURES:
        terminalreporter.section("netpeer trust figures")
        for line in report.lines():
            terminalreporter.write_line(line)
        report.write_json()
