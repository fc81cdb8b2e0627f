"""The faces decide on an error's reason and field, never on its words: the
provider core (which the Pulumi plugin, Pulumi's dynamic providers and the
OpenTofu provider all run) and the CLI behave the same against a netpeerd
whose every message is scrambled (``NETPEER_TEST_SCRAMBLE_MESSAGES``; only
the message: the details stay), and what they tell the user still names the
field and the value."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from netpeer.api.errors import SCRAMBLE_ENV, scramble
from netpeer_provider import core
from netpeer_provider.core import network, peering
from netpeer_provider.core.ids import PeeringId
from tests.provider.test_core_api import NET_A, TO_C, Api, FakeTime, server  # noqa: F401 (a fixture)


@pytest.fixture(params=[False, True], ids=["plain", "scrambled"])
def scrambled(request, monkeypatch, server):  # noqa: F811
    """netpeerd (in this process) scrambles its messages, or not."""
    if request.param:
        monkeypatch.setenv(SCRAMBLE_ENV, "1")
    else:
        monkeypatch.delenv(SCRAMBLE_ENV, raising=False)
    return request.param


def _names(text: str, field: str, value: str) -> bool:
    return field in text and value in text and "\n" not in text


def test_the_scramble_hides_the_words():
    line = "network team-a/net-a is in use by 1 peering(s): to-b; delete them first"
    assert scramble(line) == scramble(line) and scramble(line) != line
    assert "net-a" not in scramble(line) and sorted(scramble(line)) == sorted(line)


def test_the_provider_core_decides_on_reasons(server, scrambled):  # noqa: F811
    api = Api(server.endpoint)
    a = api.session("team-a")
    net = network.create(a, NET_A)   # with its inline peering to-b, towards team-b/net-b

    # A peering of that name exists: a duplicate declaration, said in the engine's words, on `name`.
    with pytest.raises(core.Conflict) as info:
        peering.create(a, {**TO_C, "name": "to-b", "remote_namespace": "team-b", "remote_network": "net-b"})
    assert info.value.path == "name" and _names(str(info.value), "peering", "to-b"), str(info.value)
    assert "declared twice" in str(info.value)
    # Another peering towards the same remote: most likely a rename, on `remote_network`.
    with pytest.raises(core.Conflict) as info:
        peering.create(a, {**TO_C, "name": "to-b2", "remote_namespace": "team-b", "remote_network": "net-b"})
    assert info.value.path == "remote_network" and _names(str(info.value), "remote", "team-b/net-b"), str(info.value)

    # Clearing the pin of a Bound peering is no refusal: it follows its partner already.
    with api.client(api.token("team-b")) as b:
        b.create_network("team-b", "net-b", ["10.2.0.0/24"])
        b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    c = a.client()
    assert c.get_peering("team-a", "net-a", "to-b")["phase"] == "Bound"
    p = peering.update_half(c, PeeringId("team-a", "net-a", "to-b"), {"description": "d", "ttl": None,
                                                                       "remote_uid": ""})
    assert p["phase"] == "Bound" and p["description"] == "d"

    # A network in use: the delete waits for its peerings to go, then gives up naming network and value.
    c.create_peering("team-a", "net-a", "to-c", "net-c", "team-c")
    t = FakeTime()
    with pytest.raises(core.ServiceError) as info:
        network.delete(a, net.id, {**net.outputs, "inline_peerings": []}, in_use_wait=3, sleep=t.sleep, clock=t.clock)
    assert t.now == 3.0 and info.value.kind == "FailedPrecondition"
    assert _names(str(info.value), "network", "net-a"), str(info.value)
    t = FakeTime(lambda now: [c.delete_peering("team-a", "net-a", n) for n in ("to-b", "to-c")] if now == 0.5 else None)
    network.delete(a, net.id, {**net.outputs, "inline_peerings": []}, sleep=t.sleep, clock=t.clock)
    assert c.list_networks("team-a") == [] and t.now == 0.5


def _netpeer(endpoint: str, token: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    env.update(NETPEER_ENDPOINT=endpoint, NETPEER_TOKEN=token)
    return subprocess.run([sys.executable, "-m", "netpeer.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_the_cli_names_field_and_value(server, scrambled):  # noqa: F811
    api = Api(server.endpoint)
    token = api.token("team-a")
    with api.client(token) as c:
        c.create_network("team-a", "net-a", ["10.1.0.0/24"])
        c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    cases = [(("network", "delete", "net-a"), "network", "net-a"),
             (("peering", "create", "net-a", "to-b", "team-z/net-z"), "peering", "to-b"),
             (("peering", "create", "net-a", "again", "team-b/net-b"), "remote", "team-b/net-b"),
             (("network", "create", "net-c", "--subnet", "10.3.0.5/24"), "subnets[0]", "10.3.0.5/24"),
             (("network", "show", "nope"), "network", "nope")]
    for args, field, value in cases:
        out = _netpeer(server.endpoint, token, *args)
        assert out.returncode == 1 and out.stderr.startswith("error: "), (args, out.stderr)
        assert _names(out.stderr.strip(), field, value), (args, out.stderr)
        if scrambled:
            assert out.stderr.split("error: ", 1)[1].split(" ")[0] != field   # the words did change
