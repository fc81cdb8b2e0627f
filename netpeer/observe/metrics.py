"""netpeerd's Prometheus metrics, served on ``metrics_listen``.

Every name starts with ``netpeer_``. Components do not import
prometheus_client: they call the small hooks of ``Metrics`` (or of ``NONE``,
a ``NoMetrics``, which does nothing), so the service, the OVN backend and the store stay
free of it. Gauges that describe state (peerings by phase, OVN connection,
watchers) are read at scrape time.
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from netpeer.observe.endpoint import Access, Limits, MetricsEndpoint

_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """The metrics of one netpeerd (a registry of its own: several can live
    in one process, as in the tests)."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.rpc_requests = Counter("netpeer_rpc_requests_total", "RPCs answered, by method and status code",
                                    ["method", "code"], registry=r)
        self.rpc_seconds = Histogram("netpeer_rpc_duration_seconds", "RPC latency by method", ["method"],
                                     buckets=_FAST, registry=r)
        self.group_size = Histogram("netpeer_write_group_size", "Writes committed together (group commit)",
                                    buckets=(1, 2, 4, 8, 16, 32, 64), registry=r)
        self.store_seconds = Histogram("netpeer_store_transaction_seconds",
                                       "Store write transactions, OVN transaction included", buckets=_FAST, registry=r)
        self.ovn_seconds = Histogram("netpeer_ovn_transaction_seconds", "OVN NB transactions by kind", ["kind"],
                                     buckets=_FAST, registry=r)
        self.sweep_seconds = Histogram("netpeer_sweep_duration_seconds", "Sweeps (expiry and repair)",
                                       buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300), registry=r)
        self.repaired_rows = Counter("netpeer_sweep_repaired_rows_total", "OVN rows restored, rewritten or removed "
                                     "by the repair sweep", registry=r)
        self.sweep_errors = Counter("netpeer_sweep_errors_total", "Networks a sweep could not repair", registry=r)
        self.expired = Counter("netpeer_expired_peerings_total", "Peerings deleted after their TTL", registry=r)
        self.programmed = Counter("netpeer_programmed_peerings_total", "Peerings whose dataplane change every "
                                  "chassis acknowledged", registry=r)
        self._state: list[Callable[[], dict]] = []
        r.register(_StateCollector(self._state))

    # ------------------------------------------------------------ hooks
    def rpc(self, method: str, code: str, seconds: float) -> None:
        self.rpc_requests.labels(method, code).inc()
        self.rpc_seconds.labels(method).observe(seconds)

    def stream_ended(self, method: str, code: str) -> None:
        """A stream (Watch) ended: counted, not timed (its length is the client's)."""
        self.rpc_requests.labels(method, code).inc()

    def write_group(self, size: int, seconds: float) -> None:
        self.group_size.observe(size)
        self.store_seconds.observe(seconds)

    def ovn_transaction(self, kind: str, seconds: float) -> None:
        self.ovn_seconds.labels(kind).observe(seconds)

    def sweep(self, expired: int, repaired: int, errors: int, seconds: float) -> None:
        self.sweep_seconds.observe(seconds)
        self.expired.inc(expired)
        self.repaired_rows.inc(repaired)
        self.sweep_errors.inc(errors)

    def programmed_peerings(self, count: int) -> None:
        self.programmed.inc(count)

    def state(self, read: Callable[[], dict]) -> None:
        """``read()`` -> {"peerings": {phase: n}, "ovn_connected": bool, "watchers": n, "ready": bool,
        "links": [netpeer.service.sites.LinkStatus, ...]}."""
        self._state.append(read)

    # ------------------------------------------------------------ serving
    def serve(self, listen: str, *, tls=None, access: Access = Access(), limits: Limits = Limits()) -> MetricsEndpoint:
        """Serves ``/metrics`` on ``listen`` (HOST:PORT or unix:///PATH), over
        TLS with an ``ssl.SSLContext``, to whom ``access`` admits
        (``netpeer.observe.endpoint``), until its ``stop()``."""
        return MetricsEndpoint(self.registry, listen, tls=tls, access=access, limits=limits)


class _StateCollector:
    def __init__(self, reads: list[Callable[[], dict]]):
        self._reads = reads

    def collect(self):
        phases = GaugeMetricFamily("netpeer_peerings", "Peerings by phase", labels=["phase"])
        connected = GaugeMetricFamily("netpeer_ovn_connected", "1 while the OVN NB database answers")
        watchers = GaugeMetricFamily("netpeer_watchers", "Open Watch streams")
        ready = GaugeMetricFamily("netpeer_ready", "1 once the first sweep completed and OVN and the store answer")
        links = _LinkFamilies()
        for read in self._reads:
            state = read()
            for phase, n in sorted(state.get("peerings", {}).items()):
                phases.add_metric([phase], n)
            connected.add_metric([], 1 if state.get("ovn_connected") else 0)
            watchers.add_metric([], state.get("watchers", 0))
            ready.add_metric([], 1 if state.get("ready") else 0)
            for link in state.get("links", ()):
                links.add(link)
        yield from (phases, connected, watchers, ready)
        yield from links.families()


class _LinkFamilies:
    """Per link to another site (label ``site``): what ``netpeer status`` shows."""

    def __init__(self):
        g, c = GaugeMetricFamily, CounterMetricFamily
        self.reachable = g("netpeer_site_link_reachable", "1 while the last exchange with the site succeeded",
                           labels=["site"])
        self.last_ok = g("netpeer_site_link_last_exchange_timestamp_seconds", "When the last exchange succeeded",
                         labels=["site"])
        self.pending = g("netpeer_site_link_pending_changes", "Changes the other site has not acknowledged",
                         labels=["site"])
        self.diverged = g("netpeer_site_link_diverged", "1 when a full copy from the site did not match its digest",
                          labels=["site"])
        self.items = g("netpeer_site_link_items", "Items of the side told to the site (told) and held of its "
                       "side (held)", labels=["site", "side"])
        self.exchanges = c("netpeer_site_exchanges", "Exchanges with the site, by outcome", labels=["site", "outcome"])
        self.bytes = c("netpeer_site_bytes", "Bytes on the link to the site, by direction",
                       labels=["site", "direction"])
        self.resyncs = c("netpeer_site_resyncs", "Full copies after a mismatch or a long absence, by direction",
                         labels=["site", "direction"])

    def add(self, link) -> None:
        site = [link.site]
        self.reachable.add_metric(site, 1 if link.reachable else 0)
        if link.last_ok is not None:
            self.last_ok.add_metric(site, link.last_ok.timestamp())
        self.pending.add_metric(site, link.pending)
        self.diverged.add_metric(site, 1 if link.diverged else 0)
        self.items.add_metric(site + ["told"], link.told)
        self.items.add_metric(site + ["held"], link.mirrored)
        self.exchanges.add_metric(site + ["ok"], link.exchanges - link.failures)
        self.exchanges.add_metric(site + ["failed"], link.failures)
        self.bytes.add_metric(site + ["sent"], link.bytes_sent)
        self.bytes.add_metric(site + ["received"], link.bytes_received)
        self.resyncs.add_metric(site + ["sent"], link.resyncs_sent)
        self.resyncs.add_metric(site + ["received"], link.resyncs_received)

    def families(self):
        return (self.reachable, self.last_ok, self.pending, self.diverged, self.items, self.exchanges, self.bytes,
                self.resyncs)


class NoMetrics:
    """``Metrics``' hooks, doing nothing (no metrics configured, and in unit
    tests). A real class and not a catch-all, so that a hook misspelled or
    missing here fails at once instead of measuring nothing; it has every
    method of ``Metrics`` but ``serve`` (without metrics nothing is served)."""

    def rpc(self, method: str, code: str, seconds: float) -> None:
        pass

    def stream_ended(self, method: str, code: str) -> None:
        pass

    def write_group(self, size: int, seconds: float) -> None:
        pass

    def ovn_transaction(self, kind: str, seconds: float) -> None:
        pass

    def sweep(self, expired: int, repaired: int, errors: int, seconds: float) -> None:
        pass

    def programmed_peerings(self, count: int) -> None:
        pass

    def state(self, read: Callable[[], dict]) -> None:
        pass


NONE = NoMetrics()
