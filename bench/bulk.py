"""Bulk apply: 1,000 peerings (Bound pairs) among 500 networks through the
API, one call per consent (32 clients) and in batches (``BatchCreatePeerings``),
against one ``ovn-nbctl`` process writing the same OVN rows (ports, routes,
policies; address sets exist with the networks), in the same run.

A fourth side measures where the floor is: netpeer's OVN layer alone
(``OvnBackend.sync``, in this process) writing the same rows for the 1,000
binds in one NB transaction, as the second batch does, with no API, store or
consent logic. What the second batch takes beyond it is netpeer's own work.

Both start from the same 500 networks (same uids, same rows). ovn-northd is
paused while either side writes, so the figure compares the write paths, not
the machine's two cores shared with northd; then northd is resumed and the
time until the southbound database reflects everything is reported too.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from netpeer.core.dataplane import NetworkState
from netpeer.daemon import GC_THRESHOLDS
from netpeer.ovn import rows as dataplane
from netpeer.service.batch import MAX_REQUESTS

from bench import nbctl
from bench.deploy import OWNER, Deployment, Topology, peering_name

TABLES = ("Logical_Router_Port", "Logical_Router_Static_Route", "Logical_Router_Policy", "Address_Set")


def pair_list(networks: int, pairs: int) -> list[tuple[int, int]]:
    """``pairs`` pairs, each network in 2*pairs/networks of them: i with i+1, i+2, ..."""
    out = []
    step = 1
    while len(out) < pairs:
        for i in range(networks):
            if len(out) == pairs:
                break
            out.append((i, (i + step) % networks))
        step += 1
    return out


def nb_counts(d: Deployment) -> dict[str, int]:
    out = {}
    for table in TABLES:
        text = d.ovn.nbctl("--bare", "--columns=_uuid", "find", table, 'external_ids:"netpeer:owner"=netpeer',
                           timeout=120)
        out[table] = sum(1 for line in text.splitlines() if line.strip())
    return out


def _api(d: Deployment, topo: Topology, pairs, concurrency: int) -> dict:
    lock = threading.Lock()
    errors: list[str] = []

    client = d.client()  # one channel, shared by the threads (gRPC channels are thread-safe)

    def consent(args):
        i, j = args
        try:
            client.create_peering(topo.ns(i), topo.name(i), peering_name(j), topo.name(j), topo.ns(j))
        except Exception as exc:  # report, don't hide
            with lock:
                errors.append(str(exc))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(consent, pairs))
    t1 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(consent, [(j, i) for i, j in pairs]))
    t2 = time.perf_counter()
    client.close()
    if errors:
        raise RuntimeError(f"{len(errors)} API calls failed, first: {errors[0]}")
    return {"first_consents_s": t1 - t0, "second_consents_s": t2 - t1, "total_s": t2 - t0}


def _api_batch(d: Deployment, topo: Topology, pairs) -> dict:
    """The same consents in batches (``BatchCreatePeerings``): every first
    half, then every second half, ``MAX_REQUESTS`` per call at most."""
    def halves(order):
        return [dict(namespace=topo.ns(i), network=topo.name(i), name=peering_name(j), remote_network=topo.name(j),
                     remote_namespace=topo.ns(j)) for i, j in order]

    client = d.client()
    times = []
    for order in (pairs, [(j, i) for i, j in pairs]):
        todo = halves(order)
        t0 = time.perf_counter()
        for k in range(0, len(todo), MAX_REQUESTS):
            client.create_peerings(todo[k:k + MAX_REQUESTS])
        times.append(time.perf_counter() - t0)
    client.close()
    return {"first_consents_s": times[0], "second_consents_s": times[1], "total_s": sum(times),
            "calls_per_side": -(-len(pairs) // MAX_REQUESTS)}


def _states(networks: dict, pairs) -> dict[str, NetworkState]:
    """Every network as the API programs it once all 1,000 pairs are Bound."""
    peers: dict[int, list[tuple[int, str]]] = {i: [] for i in networks}
    for i, j in pairs:
        peers[i].append((j, peering_name(j)))
        peers[j].append((i, peering_name(i)))
    states = {}
    for i, net in networks.items():
        mine = sorted(((networks[j], name) for j, name in peers[i]), key=lambda x: x[0].key)
        states[net.uid] = NetworkState(net, tuple(n for n, _ in mine),
                                       tuple(sorted((n.uid, name) for n, name in mine)))
    return states


@contextlib.contextmanager
def _collector_as_netpeerd():
    saved = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def _ovn_alone(d: Deployment, networks: dict, pairs) -> dict:
    """netpeer's OVN layer writing what the 1,000 binds write, in one NB
    transaction (the desired rows computed first, as the API does before it
    programs): the time the rows take to build, commit and come back into
    the replica."""
    states = _states(networks, pairs)
    with _collector_as_netpeerd(), d.backend() as backend:
        t0 = time.perf_counter()
        report = backend.sync(states)
        took = time.perf_counter() - t0
    return {"sync_s": took, "rows_changed": report.changed}


def run(networks: int = 500, pairs: int = 1000, concurrency: int = 32) -> dict:
    topo = Topology(networks, group=0)
    plist = pair_list(networks, pairs)
    out: dict = {"networks": networks, "pairs": pairs, "api_concurrency": concurrency}
    with Deployment(chassis=False) as api, Deployment(chassis=False) as raw, Deployment(chassis=False) as bat, \
            Deployment(chassis=False) as alone:
        sides = (api, raw, bat, alone)
        for d in sides:
            d.start_ovn()
        api.seed(topo)
        api.wait_sb()
        api.start_netpeerd()
        bat.seed(topo)
        bat.wait_sb()
        bat.start_netpeerd()
        # The raw side gets the very same networks (uids), hence the same rows.
        for d in (raw, alone):
            d.networks = api.networks
            nbctl.run(d.ovn, nbctl.create_networks(
                [dataplane.network_rows(OWNER, n, []) for n in api.networks.values()]))
            d.wait_sb()

        # The rows the peerings add: each network's rows with its peers, minus its rows without.
        peers = {i: [] for i in range(networks)}
        for i, j in plist:
            peers[i].append(api.networks[j])
            peers[j].append(api.networks[i])
        rows = []
        for i, net in api.networks.items():
            before = {r.ident for r in dataplane.network_rows(OWNER, net, [])}
            rows += [r for r in dataplane.network_rows(OWNER, net, peers[i]) if r.ident not in before]
        batches = nbctl.pack(nbctl.add_children(rows))
        out["rows"] = len(rows)
        out["nbctl_args_bytes"] = sum(len(a) + 1 for b in batches for a in b)
        out["nbctl_invocations"] = len(batches)

        for d in sides:
            d.northd("pause")
        out["api"] = _api(api, topo, plist, concurrency)
        out["raw_s"] = sum(nbctl.run(raw.ovn, b) for b in batches)
        out["api_batch"] = _api_batch(bat, topo, plist)
        out["ratio"] = out["api"]["total_s"] / out["raw_s"]
        out["ratio_second_consents"] = out["api"]["second_consents_s"] / out["raw_s"]
        out["ratio_batch"] = out["api_batch"]["total_s"] / out["raw_s"]
        out["ovn_alone"] = _ovn_alone(alone, api.networks, plist)
        out["ratio_ovn_alone"] = out["ovn_alone"]["sync_s"] / out["raw_s"]
        for d in sides:
            d.northd("resume")
        out["api_until_sb_s"] = api.wait_sb(1200)
        out["raw_until_sb_s"] = raw.wait_sb(1200)
        out["batch_until_sb_s"] = bat.wait_sb(1200)
        out["rows_api"], out["rows_raw"], out["rows_batch"] = nb_counts(api), nb_counts(raw), nb_counts(bat)
        out["rows_ovn_alone"] = nb_counts(alone)
        for side in ("api", "batch", "ovn_alone"):
            if out[f"rows_{side}"] != out["rows_raw"]:
                raise RuntimeError(f"{side} and raw wrote different rows: {out[f'rows_{side}']} vs {out['rows_raw']}")
        out["netpeerd_rss_kib"] = api.netpeerd_rss()
    return out
