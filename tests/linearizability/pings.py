"""After a run: packets must agree with the final Bound set, on a sample.

Some Bound pairs and some pairs that are not Bound are drawn from the
store's final state; each network of them gets an instance (a network
namespace on the chassis); an instance of one side pings the other side's
instance: Bound pairs must answer, the others must not. A pair that is not
Bound is drawn only where no Bound peer of the pinging side could answer
for the address (its prefixes overlap none of them)."""

from __future__ import annotations

import ipaddress
import random
import secrets
import time
from pathlib import Path

from netpeer.core.models import Network
from netpeer.store.base import Store, iter_all_networks
from netpeer_dev import netns as nsx
from netpeer_dev.daemons import OvnDaemons
from tests.support import wait_until
from netpeer_dev.instances import Fleet


def _overlap(a: Network, b: Network) -> bool:
    return any(x.version == y.version and (x in y or y in x) for x in a.prefixes for y in b.prefixes)


def _as_api(n: Network) -> dict:
    return {"namespace": n.namespace, "name": n.name, "uid": n.uid, "subnets": list(n.subnets)}


def wait_programmed(store: Store, timeout: float = 60.0) -> None:
    """Until every chassis has applied every change (no pair is Programming)."""
    def settled() -> bool:
        with store.read() as tx:
            return not tx.programming(2 ** 62, limit=1)
    wait_until(settled, timeout, "pairs still Programming after the run", step=0.1)


def draw(store: Store, sample: int, seed: int) -> tuple[list[tuple[Network, Network]], list[tuple[Network, Network]]]:
    """(Bound pairs, pairs that are not Bound), at most ``sample`` of each."""
    rnd = random.Random(seed)
    with store.read() as tx:
        nets = {n.key: n for n in iter_all_networks(tx)}
        bound: dict[tuple, set] = {k: set() for k in nets}
        for key in nets:
            for p in tx.bound_peerings_of(key):
                if p.remote_key in nets:
                    bound[key].add(p.remote_key)
    pairs = sorted({tuple(sorted((a, b))) for a in bound for b in bound[a]})
    groups: dict[str, list] = {}
    for key in nets:
        groups.setdefault(key.namespace.rsplit("-", 1)[0], []).append(key)
    apart = []
    for members in groups.values():
        for a in members:
            for b in members:
                if a < b and b not in bound[a] and not _overlap(nets[a], nets[b]) \
                        and not any(_overlap(nets[b], nets[c]) for c in bound[a]):
                    apart.append((a, b))
    rnd.shuffle(pairs)
    rnd.shuffle(apart)
    return [(nets[a], nets[b]) for a, b in pairs[:sample]], [(nets[a], nets[b]) for a, b in apart[:sample]]


def ping_sample(store: Store, ovn: OvnDaemons, directory: Path, sample: int, seed: int) -> dict:
    """Pings a sample of pairs; the figures. Raises naming every pair whose
    packets disagree with its phase."""
    wait_programmed(store)
    bound, apart = draw(store, sample, seed)
    fleet = Fleet(ovn, directory, owner="netpeer", prefix=f"np{secrets.token_hex(3)}")
    wrong = []
    try:
        instances = {}
        for a, b in bound + apart:
            for n in (a, b):
                if n.uid not in instances:
                    instances[n.uid] = fleet.add(_as_api(n), f"i{len(instances)}")
        for (a, b), want in [(p, True) for p in bound] + [(p, False) for p in apart]:
            src, dst = instances[a.uid], instances[b.uid]
            address = str(ipaddress.ip_interface(dst.ips[0]).ip)
            deadline = time.monotonic() + (10.0 if want else 0.0)
            while True:
                answered = nsx.ping(src.netns, address, count=1 if want else 2, timeout=1.0)
                if answered == want or time.monotonic() > deadline:
                    break
            if answered != want:
                wrong.append(f"{a.key} -> {b.key} ({address}): {'no answer' if want else 'answered'} "
                             f"although {'Bound' if want else 'not Bound'}")
    finally:
        try:
            fleet.delete_all()
        finally:
            fleet.close()
    assert not wrong, f"pings disagree with the final Bound set: {wrong}"
    return {"bound_pairs_answered": len(bound), "other_pairs_silent": len(apart)}
