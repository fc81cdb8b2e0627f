"""Two sites on real OVN-IC over WireGuard under load (part (c) of the
region section, ``bench/region.py``): the two-site dev stack of the
cross-site section (``bench/sites_bench.py``, ``netpeer_dev.multisite``)
with 10, then 1,000 Bound cross-site pairs already in place (made with
``BatchCreatePeerings``; every one waited for until it is Programmed on
both sides, so ovn-ic and the transit switch carry them), then:

- time to traffic across the sites: the second consent (west's) until the
  first answered ping from west's instance to east's, on a pair whose
  networks are attached to the link already (as the cross-site section
  measures it), p50/p99;
- the first-attachment wait: a new network's first half towards the
  other site creates its transit switch port, whose router side waits for
  ovn-ic's tunnel key (docs/cross-site.md, "The router side of an
  attachment waits for the port's key"): from that consent until the key
  is in the site's NB (seen on a connection of the benchmark's own to the
  NB), and until the pair is Programmed on both sides.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from bench import sites_bench
from bench.deploy import load_average
from bench.region_pairs import Watcher, figures
from bench.scale import log
from netpeer.ovn import names
from netpeer.ovn.connection import Connection
from netpeer.ovn.ic_rows import TUNNEL_KEY


class KeyWatch:
    """When each transit switch port of a site's NB first carried its
    tunnel key across sites (``time.monotonic()``), by port name."""

    def __init__(self, nb_remote: str):
        self.keyed: dict[str, float] = {}
        self._cond = threading.Condition()
        self._conn = Connection(nb_remote, names.NB_SCHEMA, {"Logical_Switch_Port": ["name", "options"]},
                                on_change=self._note, name="bench-keys")
        self._conn.start_monitor()
        if not self._conn.wait_ready(30):
            raise RuntimeError(f"could not monitor the NB {nb_remote}")

    def _note(self, table, uuid, old, new) -> None:
        if table != "Logical_Switch_Port" or new is None or TUNNEL_KEY not in (new.get("options") or {}):
            return
        with self._cond:
            self.keyed.setdefault(new.get("name"), time.monotonic())
            self._cond.notify_all()

    def wait(self, port: str, timeout: float = 60.0) -> float | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while port not in self.keyed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self.keyed[port]

    def close(self) -> None:
        self._conn.close()


def subnet(index: int) -> str:
    """A /28 of 10.64.0.0/10 per network (the instances' networks are 10.1 and 10.2)."""
    index += 64 << 12
    return f"10.{(index >> 12) & 255}.{(index >> 4) & 255}.{(index & 15) << 4}/28"


class Programmed(Watcher):
    """``Watcher`` that also records when each peering turned Programmed."""

    def __init__(self, endpoint: str, namespaces: list[str], token: str):
        self.programmed: dict[tuple[str, str, str], float] = {}
        super().__init__(endpoint, namespaces, token)

    def _run(self, client, namespace: str) -> None:
        try:
            for e in client.watch(namespace, resume=False):
                if e["type"] == "Bookmark":
                    self._started.release()
                    continue
                if e.get("kind") != "peering":
                    continue
                key = (e["namespace"], e["network"], e["name"])
                with self._cond:
                    if e.get("phase") == "Bound":
                        self.bound.setdefault(key, time.monotonic())
                    if e.get("phase") == "Bound" and e.get("dataplane") == "Programmed":
                        self.programmed.setdefault(key, time.monotonic())
                    self._cond.notify_all()
        except Exception:
            pass

    def wait_programmed(self, keys, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not all(k in self.programmed for k in keys):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return max(self.programmed[k] for k in keys)


def _behind(multi, site: str, pairs, watch: Programmed) -> dict:
    """Why a site's pairs are not Programmed: how many are, how far its
    chassis are behind its NB (nb_cfg, hv_cfg), and how often each chassis's
    ovs-vswitchd refused an OpenFlow bundle of ovn-controller's (its log)."""
    central = multi.sites.central[site]
    try:
        nb_cfg, hv_cfg = (int(x) for x in central.nbctl("get", "NB_Global", ".", "nb_cfg", "hv_cfg").split())
    except Exception as exc:   # the NB itself may not answer
        nb_cfg = hv_cfg = None
        log(f"region: {site}'s NB does not answer: {exc}")
    refused = {}
    for role, chassis in multi.sites.chassis[site].items():
        log_file = Path(chassis.state_dir) / "ovs-vswitchd.log"
        text = log_file.read_text(errors="replace") if log_file.exists() else ""
        refused[role] = {kind: text.count(kind) for kind in ("OFPBAC_BAD_LEN", "OFPBFC_TIMEOUT")}
    with watch._cond:
        programmed = sum(1 for k in pairs if k in watch.programmed)
    return {"programmed": programmed, "of": len(pairs), "nb_cfg": nb_cfg, "hv_cfg": hv_cfg,
            "vswitchd_refused": refused}


#: Bound pairs per namespace: under ``quotas.site_attachments_per_namespace`` (250 by default),
#: which counts a namespace's networks attached to one link.
BULK_NS = 200


def bulk_ns(i: int) -> str:
    return f"bulk{i // BULK_NS}"


def run(loads: list[int], ttt_samples: int, attach_samples: int, build_timeout: float = 600.0) -> dict:
    """The two-site stack brought up, loaded step by step to each size of
    ``loads`` (Bound cross-site pairs), measured at each; stopped by pid. A
    size that fails is recorded with why, and larger ones are not tried."""
    multi, took = sites_bench._start(ha=False)
    out: dict = {"bring_up_s": round(took, 2), "load_start": load_average(), "sizes": {}}
    t, keys, watch = None, {}, {}
    try:
        t = sites_bench._Tenants(multi)
        keys = {s: KeyWatch(multi.stacks[s].ovn.nb_remote) for s in ("east", "west")}
        tokens = {s: multi.stacks[s].admin_token() for s in ("east", "west")}
        spaces = sorted({bulk_ns(i) for i in range(0, max(loads, default=0), BULK_NS)})
        watch = {s: Programmed(multi.stacks[s].endpoint, [*spaces, "fa"], tokens[s]) for s in ("east", "west")}
        a = t.network("east", "r-a", "net", "10.1.0.0/24")
        b = t.network("west", "r-b", "net", "10.2.0.0/24")
        vms = t.vm("east", a, "vm-a"), t.vm("west", b, "vm-b")
        t.consent("east", "r-a", "net", "to-b", "west", "r-b", "net")
        # Once untimed: west's network gets its port on the link (its first attachment), kept from then on.
        t0 = time.monotonic()
        t.consent("west", "r-b", "net", "to-a", "east", "r-a", "net")
        out["first_ping_of_the_instances_s"] = sites_bench._first_ping(vms[1].netns, vms[0].address(4), t0,
                                                                       timeout=60)
        t.withdraw("west", "r-b", "net", "to-a")
        sites_bench._until_silent(vms[1].netns, vms[0].address(4))
        made = 0
        for target in loads:
            r = out["sizes"][str(target)] = {"load": load_average()}
            try:
                if not _size(multi, t, keys, watch, vms, made, target, r, ttt_samples, attach_samples,
                             build_timeout):
                    break
            except Exception as exc:   # recorded, not raised: the sizes before it stand
                r["error"] = f"{type(exc).__name__}: {exc}"[:500]
                log(f"region: real OVN-IC at {target} pairs failed: {r['error']}")
                break
            made = target
        out["load_end"] = load_average()
        return out
    finally:
        for w in watch.values():
            w.close()
        for k in keys.values():
            k.close()
        if t is not None:
            t.close()
        out["teardown_s"] = round(sites_bench._stop(multi), 2)


def _size(multi, t, keys, watch, vms, made: int, target: int, r: dict, ttt_samples: int, attach_samples: int,
          build_timeout: float) -> bool:
    """Brings the Bound cross-site pairs from ``made`` to ``target`` and
    measures there, into ``r``; False if they were not Programmed in time."""
    va, vb = vms
    log(f"region: real OVN-IC, {target} Bound cross-site pairs")
    t0 = time.monotonic()
    new = list(range(made, target))
    for site, other in (("east", "west"), ("west", "east")):
        for i in new:
            t.clients[site].create_network(bulk_ns(i), f"n{i}", [subnet(2 * i + (site == "west"))])
        for start in range(0, len(new), 1000):
            t.clients[site].create_peerings([
                {"namespace": bulk_ns(i), "network": f"n{i}", "name": "p", "remote_site": other,
                 "remote_namespace": bulk_ns(i), "remote_network": f"n{i}"} for i in new[start:start + 1000]])
    pairs = [(bulk_ns(i), f"n{i}", "p") for i in range(target)]
    late = [site for site in ("east", "west") if watch[site].wait_programmed(pairs, build_timeout) is None]
    if late:
        # Measured, not judged: what the chassis did instead is the figure.
        r["not_programmed"] = {site: _behind(multi, site, pairs, watch[site]) for site in late}
        r["built_s"] = None
        log(f"region: {target} pairs not Programmed within {build_timeout:.0f} s: {r['not_programmed']}")
        return False
    r["built_s"] = round(time.monotonic() - t0, 1)
    log(f"region: {target} pairs Bound and Programmed on both sides after {r['built_s']} s")

    cross, missed = [], 0
    for _ in range(ttt_samples):
        t0 = time.monotonic()
        t.consent("west", "r-b", "net", "to-a", "east", "r-a", "net")
        took = sites_bench._first_ping(vb.netns, va.address(4), t0)
        cross.append(took) if took is not None else None
        missed += took is None
        t.withdraw("west", "r-b", "net", "to-a")
        sites_bench._until_silent(vb.netns, va.address(4))
    r["time_to_traffic"] = dict(figures(cross), missed=missed)

    keyed, programmed = [], []
    for i in range(made, made + attach_samples):
        east = t.clients["east"].create_network("fa", f"e{i}", [subnet(1_000_000 + 2 * i)])
        west = t.clients["west"].create_network("fa", f"w{i}", [subnet(1_000_001 + 2 * i)])
        t.consent("east", "fa", f"e{i}", "p", "west", "fa", f"w{i}")
        # East's port keyed first: west's first attachment is what is timed.
        if keys["east"].wait(names.transit_switch_port("east", "west", east["uid"])) is None:
            raise RuntimeError(f"east's port of fa/e{i} got no key within 60 s")
        t0 = time.monotonic()
        t.consent("west", "fa", f"w{i}", "p", "east", "fa", f"e{i}")
        k = keys["west"].wait(names.transit_switch_port("west", "east", west["uid"]))
        done = [watch["east"].wait_programmed([("fa", f"e{i}", "p")], 60),
                watch["west"].wait_programmed([("fa", f"w{i}", "p")], 60)]
        if k is None or None in done:
            raise RuntimeError(f"the first attachment of fa/w{i} was not keyed and Programmed within 60 s")
        keyed.append(k - t0)
        programmed.append(max(done) - t0)
    r["first_attachment"] = {"keyed": figures(keyed), "programmed": figures(programmed)}
    return True
