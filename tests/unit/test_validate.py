from datetime import timedelta

import pytest

from netpeer.core import validate
from netpeer.core.models import Route
from netpeer.errors import InvalidArgument


@pytest.mark.parametrize("name", ["a", "net-1", "A" + "b" * 62, "x-y-z"])
def test_good_names(name):
    assert validate.name("network", name) == name


@pytest.mark.parametrize("name", ["", "1a", "-a", "a-", "a_b", "a.b", "a" * 64, "é", "a b", "a\n"])
def test_bad_names(name):
    with pytest.raises(InvalidArgument, match="^network: "):
        validate.name("network", name)


@pytest.mark.parametrize("name", ["internal", "external", "INTERNAL"])
def test_reserved_peering_names(name):
    validate.name("network", name)  # fine for networks
    with pytest.raises(InvalidArgument, match="is reserved"):
        validate.name("peering", name, peering=True)


def test_prefixes_normalise_and_parse_routes():
    subnets, routes = validate.prefixes(["10.0.0.0/24", "fd00::/64"], ["10.9.0.0/24 via 10.0.0.5", "fd09::/48"])
    assert subnets == ("10.0.0.0/24", "fd00::/64")
    assert routes == (Route("10.9.0.0/24", "10.0.0.5"), Route("fd09::/48"))


@pytest.mark.parametrize("subnets,routes,message", [
    (["10.0.0.0/24"], ["10.0.0.0/25"], r"routes\[0\].prefix: '10.0.0.0/25' overlaps subnets\[0\]"),
    (["10.0.0.0/24"], ["10.9.0.0/24 via 10.0.0.1"], "reserved address"),
    (["10.0.0.0/24"], ["10.9.0.0/24 by 10.0.0.5"], "is not a route"),
    (["10.0.0.0/24"] * 2, [], "duplicates"),
    (["10.0.0.0/24"], ["0.0.0.0/0"], "covers every address"),
    (["fd00::/64"], ["10.9.0.0/24"], "needs an IPv4 subnet"),
    (["10/8"], [], "is not a CIDR prefix"),
])
def test_bad_prefixes(subnets, routes, message):
    with pytest.raises(InvalidArgument, match=message):
        validate.prefixes(subnets, routes)


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800), (" 5 ", 5), (60, 60)])
def test_ttl(text, seconds):
    assert validate.ttl("ttl", text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("value", ["0s", "-1s", "366d", "1y", "", "1.5h", True, None, float("nan"), 10 ** 40])
def test_bad_ttl(value):
    with pytest.raises(InvalidArgument, match="^ttl: "):
        validate.ttl("ttl", value)


def test_format_duration_round_trips():
    for text in ("7d", "90s", "12h", "5m"):
        assert validate.format_duration(validate.ttl("ttl", text)) == text


def test_pulumi_cli_and_sdk_versions_match():
    """scripts/install-pulumi.sh builds the CLI at the version of the pinned SDK."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    sdk = re.search(r'"pulumi==([0-9.]+)"', (root / "pyproject.toml").read_text()).group(1)
    cli = re.search(r"^DEFAULT_PULUMI_VERSION=([0-9.]+)$", (root / "scripts/install-pulumi.sh").read_text(), re.M).group(1)
    assert sdk == cli


# ------------------------------------------------------------------ found by attacking netpeerd

def test_a_next_hop_of_the_other_family_is_refused():
    with pytest.raises(InvalidArgument, match=r"^routes\[0\]\.next_hop: 'fd56::5' is an IPv6 address for the IPv4"):
        validate.prefixes(["10.1.0.0/24", "fd56::/64"], ["10.66.0.0/24 via fd56::5"])


@pytest.mark.parametrize("value", ["10.1.0.0/024", "10.1.0.0/00", "fd00::/064"])
def test_a_prefix_length_with_leading_zeros_is_refused(value):
    with pytest.raises(InvalidArgument, match=r"is not a CIDR prefix"):
        validate.subnet("subnets[0]", value)


def test_ttls_below_a_second_on_the_wire_are_refused_alike():
    from google.protobuf import duration_pb2
    from netpeer.api.convert import ttl_from_pb
    for seconds, nanos in ((0, 1), (0, 500_000_000), (0, 0), (366 * 86400, 0)):
        with pytest.raises(InvalidArgument, match="^ttl: .* must be between 1s and 365d"):
            ttl_from_pb(duration_pb2.Duration(seconds=seconds, nanos=nanos))
    assert ttl_from_pb(duration_pb2.Duration(seconds=90)).total_seconds() == 90


@pytest.mark.parametrize("address, local", [
    ("unix:///run/x.sock", True), ("127.0.0.1:7443", True), ("localhost:7443", True), ("[::1]:7443", True),
    ("0.0.0.0:7443", False), ("127.0.0.1.evil.example:7443", False), ("10.0.0.5:7443", False)])
def test_only_resolved_loopback_listens_without_tls(address, local):
    from netpeer.listen import is_local_address
    assert is_local_address(address) is local
