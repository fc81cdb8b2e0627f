"""Consent rules on the pure core, with the SQLite store in memory as the World."""

from datetime import datetime, timedelta, timezone

from netpeer.core import consent
from netpeer.core.models import Network, Peering, Phase, Reason
from netpeer.store.sqlite import SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def net(ns, name, *subnets, uid=None):
    return Network(ns, name, uid or f"{abs(hash((ns, name))) % 10**8:08d}-0000-4000-8000-000000000000", tuple(subnets))


def half(local: Network, remote: Network, name="p", t=T0, remote_uid=None):
    return Peering(local.namespace, local.name, name, remote.namespace, remote.name, local.uid, remote_uid,
                   create_time=t, last_phase_transition_time=t)


def world(*networks):
    store = SqliteStore(":memory:")
    cm = store.write()
    tx = cm.__enter__()
    tx._keepalive = (store, cm)  # closing the context manager would roll back
    for n in networks:
        tx.put_network(n)
    return tx


def test_one_half_stays_pending():
    a, b = net("x", "a", "10.1.0.0/24"), net("y", "b", "10.2.0.0/24")
    tx = world(a, b)
    tx.put_peering(half(a, b))
    assert consent.resolve(tx, [half(a, b).key], T0) == []


def test_both_halves_bind_and_learn_uids():
    a, b = net("x", "a", "10.1.0.0/24"), net("y", "b", "10.2.0.0/24")
    tx = world(a, b)
    tx.put_peering(half(a, b))
    tx.put_peering(half(b, a))
    later = T0 + timedelta(minutes=1)
    changes = consent.resolve(tx, [half(b, a).key], later)
    assert {new.phase for _, new in changes} == {Phase.BOUND}
    pa = tx.get_peering(half(a, b).key)
    assert pa.remote_uid == b.uid and pa.last_phase_transition_time == later and pa.expires_at is None


def test_pinned_uid_mismatch_stays_pending():
    a, b = net("x", "a", "10.1.0.0/24"), net("y", "b", "10.2.0.0/24")
    tx = world(a, b)
    tx.put_peering(half(a, b, remote_uid="00000000-0000-4000-8000-00000000dead"))
    tx.put_peering(half(b, a))
    assert consent.resolve(tx, [half(b, a).key], T0) == []


def test_overlap_fails_both_halves():
    a, b = net("x", "a", "10.1.0.0/24"), net("y", "b", "10.1.0.0/16")
    tx = world(a, b)
    tx.put_peering(half(a, b))
    tx.put_peering(half(b, a))
    consent.resolve(tx, [half(a, b).key], T0)
    for p in (half(a, b), half(b, a)):
        got = tx.get_peering(p.key)
        assert (got.phase, got.reason) == (Phase.FAILED, Reason.OVERLAPPING_PREFIXES)
        assert got.expires_at == T0 + got.ttl


def test_older_consent_wins_a_three_way_conflict():
    # B may peer with A or with C, but A and C overlap: whichever pair
    # completed first is Bound, the other Failed.
    a, b, c = net("x", "a", "10.1.0.0/24"), net("y", "b", "10.2.0.0/24"), net("z", "c", "10.1.0.0/25")
    tx = world(a, b, c)
    for p in (half(a, b, "ab", T0), half(b, a, "ba", T0), half(b, c, "bc", T0 + timedelta(1)),
              half(c, b, "cb", T0 + timedelta(1))):
        tx.put_peering(p)
    consent.resolve(tx, [half(c, b, "cb").key, half(a, b, "ab").key], T0)
    assert tx.get_peering(half(a, b, "ab").key).phase == Phase.BOUND
    assert tx.get_peering(half(c, b, "cb").key).phase == Phase.FAILED


def test_withdrawal_returns_to_pending():
    a, b = net("x", "a", "10.1.0.0/24"), net("y", "b", "10.2.0.0/24")
    tx = world(a, b)
    tx.put_peering(half(a, b))
    tx.put_peering(half(b, a))
    consent.resolve(tx, [half(a, b).key], T0)
    tx.delete_peering(half(b, a).key)
    consent.resolve(tx, [half(a, b).key], T0 + timedelta(hours=1))
    got = tx.get_peering(half(a, b).key)
    assert (got.phase, got.reason) == (Phase.PENDING, Reason.REMOTE_WITHDRAWN)
    assert got.remote_uid == b.uid  # still follows the identity it bound to
