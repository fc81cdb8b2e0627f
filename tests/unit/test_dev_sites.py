"""The pure parts of the multi-site dev stack: X25519 keys (RFC 7748 vectors),
site names, the operator's commands, transit blocks."""

from __future__ import annotations

import pytest

from netpeer_dev.multisite import transit_block
from netpeer_dev.operator import operator_commands, transit_switch, validate_sites
from netpeer_dev.wireguard import _x25519, generate_private_key, x25519_public


def test_x25519_rfc7748_vectors() -> None:
    # RFC 7748 section 5.2, first test vector, and section 6.1 (Alice's key pair).
    k = bytes.fromhex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4")
    u = bytes.fromhex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c")
    assert _x25519(k, u).hex() == "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"
    alice = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    assert x25519_public(alice).hex() == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"


def test_generated_keys_are_clamped_and_distinct() -> None:
    keys = {generate_private_key() for _ in range(8)}
    assert len(keys) == 8
    for k in keys:
        assert k[0] & 7 == 0 and k[31] & 128 == 0 and k[31] & 64 == 64


@pytest.mark.parametrize("value,message", [
    ("east", "--sites: 'east': needs 2 to 8 sites"),
    ("east,east", "--sites: 'east,east': site names must be distinct"),
    ("East,west", "--sites: 'East,west': site name 'East' must be a lowercase letter followed by at most 9 "
                  "lowercase letters or digits"),
    ("east,", "--sites: 'east,': site name '' must be a lowercase letter followed by at most 9 lowercase letters "
              "or digits"),
    ("east,averyverylong", "--sites: 'east,averyverylong': site name 'averyverylong' must be a lowercase letter followed "
                        "by at most 9 lowercase letters or digits"),
    ("1a,b", "--sites: '1a,b': site name '1a' must be a lowercase letter followed by at most 9 lowercase letters "
             "or digits"),
])
def test_site_names_refused_in_one_line(value: str, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        validate_sites(value)
    assert str(exc.value) == message


def test_site_names_accepted() -> None:
    assert validate_sites("east,west") == ["east", "west"]
    assert validate_sites("a,b2,c3456789x") == ["a", "b2", "c3456789x"]


def test_operator_commands() -> None:
    assert transit_switch("west", "east") == "np-ts-east-west"
    cmds = operator_commands("west", ["west", "east", "north"], [("west-gw1", 20), ("west-gw2", 10)])
    assert cmds == [
        ("ovn-ic-nbctl", ["--may-exist", "ts-add", "np-ts-east-west"]),
        ("ovn-ic-nbctl", ["--may-exist", "ts-add", "np-ts-north-west"]),
        ("ovn-nbctl", ["set", "NB_Global", ".", "name=west", "options:ic-route-adv=false",
                       "options:ic-route-learn=false", "options:bfd-min-rx=100", "options:bfd-min-tx=100",
                       "options:bfd-mult=3"]),
        ("ovn-nbctl", ["ha-chassis-group-add", "np-gw-west", "--", "ha-chassis-group-add-chassis", "np-gw-west",
                       "west-gw1", "20", "--", "ha-chassis-group-add-chassis", "np-gw-west", "west-gw2", "10"]),
    ]


def test_transit_blocks_same_on_both_sides_disjoint_and_fixed_by_index() -> None:
    """A link's block depends on its sites' indices only: adding or retiring
    a site never moves another link's block (a running link cannot change it)."""
    import ipaddress
    from netpeer_dev.operator import MAX_SITES
    assert transit_block(0, 1) == transit_block(1, 0) == "169.254.0.0/21"
    blocks = {(a, b): ipaddress.ip_network(transit_block(a, b))
              for a in range(MAX_SITES) for b in range(a + 1, MAX_SITES)}
    assert len(blocks) == 28 and all(b.prefixlen == 21 for b in blocks.values())
    assert all(b.subnet_of(ipaddress.ip_network("169.254.0.0/16")) for b in blocks.values())
    every = list(blocks.values())
    assert all(not x.overlaps(y) for i, x in enumerate(every) for y in every[i + 1:])
