"""netpeerd in simulation: ``netpeer serve --dataplane memory``.

netpeerd programs ``netpeer.service.memory.MemoryDataplane`` instead of
OVN: the store, the consent, the sweeps, the Programmer, the tenant API
and the links between sites are the real ones, and no packet ever flows.
It is for simulations (a region of tens of sites on one machine, as
``python -m bench --only region`` runs) and for tests, never for tenants,
so it is refused where the configuration looks like production. The rule,
checked before anything is opened:

- everything netpeerd listens on or calls is on this machine: ``listen``,
  ``[interconnect] listen``, ``metrics_listen``, ``console_listen`` and every
  ``[sites.NAME] endpoint`` are loopback or a unix socket (the same
  resolved-address check as for TLS);
- no TLS is configured (``[tls]``, ``[metrics] cert``, ``[interconnect] cert/key/ca``,
  ``[sites.NAME] ca_cert``): certificates are for a real deployment;
- the store is an SQLite file (a PostgreSQL store is for replicas, which
  share one real dataplane).
"""

from __future__ import annotations

from netpeer.config import Config
from netpeer.core.dataplane import WAITS_FOR_DATAPLANE, Stamp
from netpeer.errors import InvalidArgument
from netpeer.service.memory import MemoryDataplane
from netpeer.store.base import Store, is_url

#: netpeerd's dataplanes (``netpeer serve --dataplane``).
DATAPLANES = ("ovn", "memory")

WARNING = ("SIMULATION: the dataplane is in memory (netpeer serve --dataplane memory): nothing is written to OVN "
           "and no packet flows; for simulations and tests only")


def why_refused(config: Config) -> str | None:
    """Why ``config`` looks like production (one clause), or None."""
    from netpeer.listen import is_local_address
    addresses = [("listen", config.listen), ("interconnect.listen", config.site_listen),
                 ("metrics_listen", config.metrics_listen), ("console_listen", config.console_listen)]
    # A site's endpoint may list its replicas, comma-separated: every one of them.
    addresses += [(f"sites.{link.name}.endpoint", one.strip()) for link in config.sites
                  for one in link.endpoint.split(",") if one.strip()]
    for field, address in addresses:
        if address and not is_local_address(address):
            return f"{field} {address!r} is not loopback or a unix socket"
    tls = [("tls.cert", config.tls_cert), ("tls.key", config.tls_key), ("tls.client_ca", config.tls_client_ca),
           ("interconnect.cert", config.site_cert), ("interconnect.key", config.site_key),
           ("interconnect.ca", config.site_ca), ("metrics.cert", config.metrics_cert)]
    tls += [(f"sites.{link.name}.ca_cert", link.ca_cert) for link in config.sites]
    for field, value in tls:
        if value is not None:
            return f"{field} is configured (TLS is for a real deployment)"
    if is_url(config.store):
        return "the store is PostgreSQL (replicas share one real dataplane)"
    return None


def check(config: Config, dataplane: str) -> None:
    """Refuses an unknown dataplane, and the memory dataplane with a
    configuration that looks like production; one line naming the flag."""
    if dataplane not in DATAPLANES:
        raise InvalidArgument.for_field("--dataplane", dataplane, f"must be one of {', '.join(DATAPLANES)}")
    if dataplane == "memory":
        why = why_refused(config)
        if why is not None:
            raise InvalidArgument.for_field("--dataplane", dataplane, f"is a simulation and test mode, refused "
                                            f"with a configuration that looks like production: {why}")


def fill(store: Store, dataplane: MemoryDataplane) -> int:
    """At start, the memory dataplane holds what the store implies, stamped
    with the store's generation, and every chassis has applied it: what a
    real dataplane holds when its netpeerd restarts. (Empty, the first sweep
    would find every network drifted and repair each in a write of its own.)
    The number of networks."""
    from netpeer.service.writes import desired_states
    with store.read() as tx:
        desired = desired_states(tx, tx.network_uids())
        stamp = Stamp(store.store_id, tx.generation()) if desired else None
        # Pairs still waiting for the chassis wait for sequence numbers of the
        # dataplane that ran before: this one goes on from the newest of them.
        waiting = [p.dataplane_cfg for p in tx.programming(WAITS_FOR_DATAPLANE - 1, limit=1_000_000)]
    dataplane.sync(desired, stamp)
    dataplane.cfg = dataplane.applied_cfg = max((c for c in waiting if c is not None), default=0)
    return len(desired)
