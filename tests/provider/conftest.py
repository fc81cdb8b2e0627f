"""Fixtures of the provider tests: Pulumi's dynamic-provider server
(tests/provider/dynamic_server.py) against a real netpeerd on real OVN."""

from __future__ import annotations

import os

import pytest

from tests.provider.dynamic_server import DynamicServer


@pytest.fixture
def dynamic(netpeerd):
    """A dynamic-provider server configured (like `pulumi config`) for netpeerd.
    The environment carries no NETPEER_* variables: settings come from Configure."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    server = DynamicServer(env)
    try:
        yield server
    finally:
        server.close()
