"""Where each face's settings come from: what the user gave the face (the
stack's `netpeer:*`, the provider block) wins; the `NETPEER_*` environment
only fills in what it leaves out. One function decides it,
``core.Settings.resolve``; each face is checked to go through it."""

from __future__ import annotations

import asyncio

import pytest
from pulumi.provider.experimental import provider as p
from pulumi.provider.experimental.property_value import PropertyValue

from netpeer_provider import common, core
from netpeer_provider.plugin.provider import NetpeerProvider as Plugin
from netpeer_provider.pulumi_engine import Engine
from netpeer_provider.tofu.netpeer import NetpeerProvider as Tofu

ENV = {"NETPEER_TOKEN": "np_admin_env", "NETPEER_ENDPOINT": "env:1", "NETPEER_ERROR_ON_NOT_BOUND": "true",
       "NETPEER_CA_CERT": "/env/ca.pem"}


@pytest.fixture
def env(monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)


def expect(settings: core.Settings) -> None:
    # Given: token, endpoint, error_on_not_bound (false wins over the environment's true); left out: ca_cert.
    assert (settings.token, settings.endpoint, settings.error_on_not_bound, settings.ca_cert) == \
        ("np_stack", "unix:///stack.sock", False, "/env/ca.pem")


def test_resolve_prefers_the_given_settings(env):
    expect(core.Settings.resolve({"token": "np_stack", "endpoint": "unix:///stack.sock", "error_on_not_bound": False}))
    # Empty counts as left out.
    assert core.Settings.resolve({"token": "", "endpoint": None}).token == "np_admin_env"


def test_the_plugin_prefers_the_stack(env):
    plugin = Plugin(Engine(None))
    args = {"token": PropertyValue("np_stack").with_secret(True), "endpoint": PropertyValue("unix:///stack.sock"),
            "errorOnNotBound": PropertyValue(False), "caCert": PropertyValue.computed()}
    asyncio.run(plugin.configure(p.ConfigureRequest({}, args, True, False)))
    expect(plugin.session().settings)


def test_the_dynamic_providers_prefer_the_stack(env, monkeypatch):
    monkeypatch.setattr(common, "_CONFIG", {})
    common.configure_from({"netpeer:token": "np_stack", "netpeer:endpoint": "unix:///stack.sock",
                           "netpeer:errorOnNotBound": "false"})
    expect(common.session().settings)


def test_opentofu_prefers_the_provider_block(env):
    tofu = Tofu()
    tofu.configure({"token": "np_stack", "endpoint": "unix:///stack.sock", "error_on_not_bound": False,
                    "ca_cert": None, "client_cert": None, "client_key": None}, "1.10.0")
    expect(tofu.session().settings)
