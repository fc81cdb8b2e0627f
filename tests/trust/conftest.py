"""Fixtures of the trust tests. The real OVN daemons, the in-process netpeerd
and the real `pulumi` CLI harness come from tests/conftest.py."""

from __future__ import annotations

import pytest

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
    daemon = start_recording_netpeerd(ovn, state_dir)
    try:
        yield daemon
    finally:
        daemon.stop()


def pytest_terminal_summary(terminalreporter):
    if report.FIGURES:
        terminalreporter.section("netpeer trust figures")
        for line in report.lines():
            terminalreporter.write_line(line)
        report.write_json()
