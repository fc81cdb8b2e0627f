"""netpeerd: the service process (``netpeer serve --config FILE``).

Start-up order: the store (migrated if needed), the OVN connection, the
check that the two belong together (``netpeer.service.epoch``; writes are
held until it passed), then the gRPC server and the sweeps. A failed check
ends the process with one line and exit code 2, before anything changed.

With a PostgreSQL store, several netpeerd processes (replicas) serve the
same store and OVN: each serves reads and writes (writes serialize on the
store's write lock), and the sweeps and the Programmer run on the one that
holds the sweeper lease (``netpeer.service.leader``).

Longer than 400 lines: the start-up and stop order of every part (store,
OVN, leadership, links, server, metrics, sweeps) reads in one place,
where an order that is wrong is seen; each part's own logic is elsewhere.

With ``--dataplane memory`` (``netpeer.simulation``) netpeerd programs an
in-memory dataplane instead of OVN: a simulation and test mode, refused
when the configuration looks like production.

One module of this size: start, reload, the lease and stop share the
daemon's state; what is not that state lives elsewhere
(``netpeer.simulation``, ``netpeer.service``).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import signal
import sys
import threading
from typing import Callable

from netpeer import linkfiles
from netpeer.config import Config
from netpeer.core import validate
from netpeer.errors import InvalidArgument, Unavailable, Unreachable
from netpeer.observe import logs
from netpeer.observe.metrics import NONE
from netpeer.service.epoch import EpochMismatch, Mode

EXIT_REFUSED = 2

# How long start-up waits for the NB replica after the store/OVN check before
# it answers reads without it (writes wait for it).
REPLICA_GRACE_S = 2.0

# When the leader sweeps after another replica went away, in seconds from
# then (and once more at ovn_timeout): at once, then in case the dead
# replica's last NB transaction commits after its store sessions are gone.
# A new leader sweeps at the same times after it took over.
AFTER_DEPARTURE_S = (0.0, 1.0, 3.0)

LOG = logging.getLogger("netpeerd")

# The cyclic garbage collector's thresholds in netpeerd, instead of Python's
# (700, 10, 10). netpeerd makes millions of objects that live as long as it
# does, most of them at once (the NB replica: 130,000 rows at 10,000
# networks), and with the defaults the collector walked them again and again
# while they arrived: the replica alone took 19.0-22.4 s at 10,000 networks,
# 11.1-11.7 s with collection held off (docs/performance-log.md, section 4,
# "The collector, and the stamp first"). Cycles are still collected, in
# batches of 100,000 allocations: a few MiB of garbage at most waits for it.
GC_THRESHOLDS = (100_000, 50, 10)


class Daemon:
    """netpeerd in this process: store, OVN backend, service, gRPC server and
    the reconciler's sweep thread. ``serve`` runs one until a signal; tests
    start one in-process (``service_factory`` lets them wrap the Service)."""

    def __init__(self, config: Config, service_factory=None, workers: int = 16, mode: Mode = Mode.CHECK,
                 dataplane: str = "ovn"):
        from netpeer import simulation
        from netpeer.api.server import Limits, Server
        from netpeer.listen import check_listen
        from netpeer.service import Service
        from netpeer.service.leader import Solo, replica_name
        from netpeer.store.base import is_url, open_store

        simulation.check(config, dataplane)   # before anything is opened
        if (config.tls_cert is None) != (config.tls_key is None):
            raise InvalidArgument.for_field("tls", "cert/key", "needs both [tls] cert and [tls] key")
        check_listen(config.listen, tls=config.tls_cert is not None)   # before anything is opened
        config.check_metrics()
        config.check_console()
        self._metrics_endpoint = _metrics_endpoint(config)
        self.console_server, self._console_dir = None, None
        if config.console_listen:   # the console reaches the API over a socket only this process may enter
            import tempfile
            self._console_dir = tempfile.mkdtemp(prefix="netpeer-console-")
        self.config = config
        self.mode = mode
        self.exit_code = 0
        timeout = config.ovn_timeout.total_seconds()
        self.replicated = is_url(config.store)
        if self.replicated:
            from netpeer.store.pg_lease import application_name
            self.store = open_store(config.store, lock_timeout=2 * timeout + 5, idle_timeout=2 * timeout + 30,
                                    application_name=application_name())
        else:
            self.store = open_store(config.store)
        self.leadership = Solo()
        if self.replicated:
            from netpeer.service.leader import PgLease
            self.store.claim_owner(config.owner)
            self.leadership = PgLease(config.store, replica_name(config.listen),
                                      config.leader_lease.total_seconds())
        if dataplane == "memory":
            LOG.warning("%s", simulation.WARNING)
            from netpeer.service.memory import MemoryDataplane
            self.backend = MemoryDataplane(track_changes=True)
            simulation.fill(self.store, self.backend)
        else:
            from netpeer.ovn.backend import OvnBackend
            # The start-up check reads OVN's stamp before the replica is asked for (``stamp_first``).
            self.backend = OvnBackend(config.ovn_nb, owner=config.owner, timeout=config.ovn_timeout.total_seconds(),
                                      site=_site_context(config), stamp_first=True)
        self.metrics, self.metrics_server = NONE, None
        if config.metrics_listen:
            from netpeer.observe.metrics import Metrics
            self.metrics = Metrics()
            self.backend.on_transaction = self.metrics.ovn_transaction
        self.service = (service_factory or Service)(self.store, self.backend, _service_settings(config),
                                                    metrics=self.metrics, leadership=self.leadership)
        self.site_server = self.site_transport = None
        if config.site:
            self._link_sites(config)
        if self.backend.kind == "ovn":
            # A transit switch port got its key across sites: the rest of its
            # attachment waits for that (netpeer.ovn.ic_rows), so sweep now.
            self.backend.changes.on_keyed = lambda: self.service.reconciler.sweep_soon((0.0,))
        if config.admin_token_file is not None:
            self.service.bootstrap_admin(config.admin_token_file.read_text().strip())
        self.server = Server(
            self.service, config.listen,
            tls_cert=config.tls_cert.read_bytes() if config.tls_cert else None,
            tls_key=config.tls_key.read_bytes() if config.tls_key else None,
            client_ca=config.tls_client_ca.read_bytes() if config.tls_client_ca else None,
            limits=Limits(read_workers=workers), metrics=self.metrics, watch=config.watch,
            private=f"unix://{self._console_dir}/api.sock" if self._console_dir else None)
        self.port = self.server.port
        if config.metrics_listen:
            self.metrics.state(lambda: {"peerings": self.service.phase_counts(),
                                        "ovn_connected": self.backend.connected,
                                        "watchers": self.server.watches.count, "ready": self.server.ready,
                                        "links": self.service.sites.status()})
        self.stopping = threading.Event()
        self._settled = False
        #: Called once, by the sweeper (replicas: the lease follower), when
        #: OVN's replica is whole and writes were released (``serve``: the
        #: collector's ``freeze``).
        self.on_replica: Callable[[], None] = lambda: None
        self.service.writes.hold("netpeerd is starting: it checks that its store and OVN belong together "
                                 "before any write; retry in a moment")
        self._sweeper = threading.Thread(target=self.service.reconciler.run, name="sweeper", daemon=True,
                                         args=(self.stopping, config.sweep_interval.total_seconds()),
                                         kwargs={"before_first": self._settle_in_background})
        # Alone on its store, every commit it must see is its own (and wakes
        # it): the look for other processes' commits can be rare.
        self._programmer = threading.Thread(target=self.service.programmer.run, name="programmer", daemon=True,
                                            args=(self.stopping,), kwargs={"idle": 5.0})
        self._leading: threading.Event | None = None
        self._led: list[threading.Thread] = []
        if self.replicated:   # the sweeps run while this replica holds the lease
            self._sweeper = threading.Thread(target=self._follow_lease, name="leader", daemon=True)
            self._programmer = None

    def _link_sites(self, config: Config) -> None:
        """This site's links to the others: the SiteService listener and the
        exchanges (``netpeer.service.sites``)."""
        from netpeer.api.sites import SiteServer, SiteTransport
        from netpeer.ovn import ic_rows
        files = linkfiles.read(config)
        self.site_transport = SiteTransport(config.site, files.endpoints, files.secrets, cert=files.cert,
                                            key=files.key, ca=files.cas)
        links = self.service.link_sites(config.site, {link.name: ic_rows.capacity(link.transit_ipv4)
                                                      for link in config.sites},
                                        self.site_transport, interval=config.sweep_interval.total_seconds())
        self.site_transport.counter = links.count
        self.site_server = SiteServer(links, config.site_listen, files.secrets, cert=files.cert, key=files.key,
                                      ca=files.ca)

    def reload(self, path) -> str:
        """Reads the configuration file again and applies what can change
        while netpeerd runs: the links to other sites (``[sites.NAME]``): a
        new site is linked at once, a site no longer listed is retired (its
        pairs withdrawn, ``SiteRetired``), an endpoint, secret or CA file
        takes effect for the next exchange; and the files of
        ``[interconnect] cert, key, ca`` (a renewed certificate is presented
        from the next connection on). A link's ``transit_ipv4`` cannot
        change while it exists (retire the site first), nor can TLS be
        turned on or off. Anything else that differs is reported as needing
        a restart. Raises InvalidArgument (nothing changed) on a bad file.
        What was done, one line."""
        new = Config.load(path)
        old = self.config
        live = ("sites", "site_cert", "site_key", "site_ca")
        restart = [f.name for f in dataclasses.fields(Config)
                   if f.name not in live and getattr(new, f.name) != getattr(old, f.name)]
        # TLS on or off, or a client certificate required or not: the listener itself changes.
        toggled = [name for name in ("site_cert", "site_ca")
                   if (getattr(new, name) is None) != (getattr(old, name) is None)]
        if old.site and new.site == old.site and "site" not in restart:
            kept = {link.name: link for link in old.sites}
            for link in new.sites:
                was = kept.get(link.name)
                if was is not None and was.transit_ipv4 != link.transit_ipv4:
                    raise InvalidArgument.for_field(f"sites.{link.name}.transit_ipv4", link.transit_ipv4,
                                                    f"differs from the running link's ({was.transit_ipv4}): retire "
                                                    "the site (remove its [sites] table, reload), then add it back")
            applied = new if not toggled else dataclasses.replace(new, site_cert=old.site_cert,
                                                                  site_key=old.site_key, site_ca=old.site_ca)
            restart += toggled
            files = linkfiles.read(applied)   # every file checked before anything changes
            from netpeer.ovn import ic_rows
            renewed = self.site_server.tls and self.site_server.set_credentials(files.cert, files.key, files.ca)
            self.site_transport.reconfigure(files.endpoints, files.secrets, files.cas, cert=files.cert,
                                            key=files.key)
            self.site_server.set_secrets(files.secrets)
            if self.backend.kind == "ovn":
                self.backend.site = _site_context(new)
            added, removed = self.service.sites.reconfigure(
                {link.name: ic_rows.capacity(link.transit_ipv4) for link in new.sites})
            self.config = dataclasses.replace(old, sites=new.sites, site_cert=applied.site_cert,
                                              site_key=applied.site_key, site_ca=applied.site_ca)
            links = f"linked {', '.join(added) or 'no new site'}; retired {', '.join(removed) or 'none'}"
            if renewed:
                links += "; new connections use the new certificate, key or CA of [interconnect]"
                self.service.sites.poke(list(self.service.sites.capacity))   # use them now: a mistake shows at once
        else:
            restart += [name for name in live if getattr(new, name) != getattr(old, name)]
            links = "links unchanged"
        restart = sorted(set(restart))
        what = f"reloaded {path}: {links}" + (f"; needs a restart to change: {', '.join(restart)}" if restart else "")
        LOG.info("%s", what)
        return what

    def _settle(self) -> None:
        """The start-up check (raises EpochMismatch; Unavailable when it
        needs more of OVN than has arrived). It needs OVN's stamp only, read
        before the whole replica is (``netpeer.ovn.early``). Writes are
        released by the caller once the replica is whole: they are computed
        against it."""
        from netpeer.service import epoch
        what = epoch.settle(self.store, self.backend, self.config.owner, self.mode,
                            adopt=lambda: epoch.adopt(self.store, self.backend.read_back(), self.service.clock()))
        LOG.info("%s", what)
        if self.mode == Mode.ACCEPT_ROLLBACK:
            self.service.reconciler.allow_mass_delete_once = True
        self._settled = True

    def _settle_in_background(self) -> bool:
        """Run by the sweeper (replicas: the lease follower) once OVN's
        replica is whole: the check if it has not run yet, then writes may
        go. Tries again while OVN comes and goes; False if the check refused
        the store (netpeerd stops) or netpeerd is stopping."""
        while not self.stopping.is_set():
            try:
                if not self._settled:
                    self._settle()
                self.service.writes.release()
                self.on_replica()
                return True
            except EpochMismatch as exc:
                LOG.error("%s", exc.message)
                self.exit_code = EXIT_REFUSED
                self.stopping.set()
                return False
            except Unavailable as exc:   # OVN went away again meanwhile
                LOG.warning("start-up check: %s; trying again", exc.message)
                self.stopping.wait(1.0)
        return False

    def _follow_lease(self) -> None:
        """Replicas: settles once OVN answers, then follows the sweeper lease,
        running the sweeps and the Programmer while this replica leads."""
        while not self.stopping.is_set():
            if self.backend.connected:
                if not self._settle_in_background():
                    return
                break
            self.stopping.wait(0.2)
        self.leadership.run(self.stopping, self._gain, self._lose)

    def _gain(self) -> None:
        self._leading = threading.Event()
        interval = self.config.sweep_interval.total_seconds()
        self._led = [threading.Thread(target=self.service.reconciler.run, name="sweeper", daemon=True,
                                      args=(self._leading, interval)),
                     threading.Thread(target=self.service.programmer.run, name="programmer", daemon=True,
                                      args=(self._leading,))]
        from netpeer.service.leader import ReplicaWatch
        watch = ReplicaWatch(self.config.store)
        # Who is connected now, before the first sweep starts: a replica that dies
        # from here on is seen going, even one that dies before the watch's first round.
        watch.look()
        self._led.append(threading.Thread(target=watch.run, name="replicas",
                                          daemon=True, args=(self._leading, self._replica_gone)))
        if self.site_server is not None:
            self.service.sites.run_links(self._leading)
        # A new leader most often follows a departure (the old leader's): its last
        # NB transaction may land after the first sweep, which runs at once.
        self.service.reconciler.sweep_soon(AFTER_DEPARTURE_S[1:] + (self.config.ovn_timeout.total_seconds(),))
        for thread in self._led:
            thread.start()

    def _replica_gone(self, gone: set[str]) -> None:
        """The leader sweeps at once when another replica went away (it may
        have died between its OVN commit and its store commit), and again
        over the next ``ovn_timeout``: a transaction the replica sent just
        before it died may still be committing in the NB (a Raft round, or a
        leader election) when its sessions are already gone from the store."""
        LOG.info("replica(s) %s went away: sweeping now and over the next %s", ", ".join(sorted(gone)),
                 validate.format_duration(self.config.ovn_timeout))
        self.service.reconciler.sweep_soon(AFTER_DEPARTURE_S + (self.config.ovn_timeout.total_seconds(),))

    def _lose(self) -> None:
        if self._leading is not None:
            self._leading.set()
            if self.site_server is not None:
                self.service.sites.stop_links()
            self.service.programmer.poke()   # they sleep at rest
            self.service.reconciler.wake()
        for thread in self._led:
            thread.join(timeout=self.config.ovn_timeout.total_seconds() + 5)
        self._led = []

    def start(self, connect_timeout: float | None = None) -> "Daemon":
        """Checks the store against OVN if OVN answers (its stamp within
        ovn_timeout; the whole replica within ``connect_timeout``, default
        ovn_timeout, when the check needs it; 0: no check now), raising
        EpochMismatch, then serves. Otherwise serves at once with writes
        held; the check runs when OVN answers."""
        timeout = self.config.ovn_timeout.total_seconds() if connect_timeout is None else connect_timeout
        try:
            if timeout > 0:
                self._settle()   # OVN's stamp is enough, most of the time: reads need not wait for the replica
            else:
                self.backend.start_replica()
        except Unreachable:
            pass
        except Unavailable:   # the check needs the whole replica (an empty store, or a mode that writes)
            if self.backend.wait_connected(timeout):
                try:
                    self._settle()
                except Unavailable:   # OVN went away again: the sweeper checks when it is back
                    pass
        if not self._settled:
            LOG.warning("OVN NB %s does not answer yet: serving reads; writes wait for it", self.config.ovn_nb)
        elif self.backend.wait_connected(REPLICA_GRACE_S):
            # A small NB's replica is there a moment after the check: waiting for it
            # spares the first writers an UNAVAILABLE. A large one answers reads meanwhile.
            self.service.writes.release()
        else:
            self.service.writes.hold("netpeerd is starting: it is reading OVN's rows before any write; "
                                     "retry in a moment")
        # The site link before the API: whoever sees the API up may count on the link's socket.
        if self.site_server is not None:
            self.site_server.start()
            if self.replicated:   # every replica answers the other sites; the leader runs the links (_gain)
                self.service.sites.prepare()
            else:
                self.service.sites.start(self.stopping)
            LOG.info("site %s: other sites reach it on %s; linked to %s", self.config.site, self.config.site_listen,
                     ", ".join(link.name for link in self.config.sites))
        self.server.start()
        if self.config.metrics_listen:
            self.metrics_server = self.metrics.serve(self.config.metrics_listen, **self._metrics_endpoint)
            LOG.info("metrics on %s", _metrics_url(self.config))
        if self.config.console_listen:
            self.console_server = _console(self.config, self.server.private)
            LOG.info("console on http%s://%s", "s" if self.console_server.secure else "",
                     _with_port(self.config.console_listen, self.console_server.port))
        LOG.info("netpeerd listening on %s%s (%s, store %s)", self.config.listen,
                 f" port {self.port}" if self.port and not self.config.listen.startswith("unix:") else "",
                 f"OVN NB {self.config.ovn_nb}" if self.backend.kind == "ovn" else "dataplane in memory: a simulation",
                 self.config.store)
        self._sweeper.start()
        if self._programmer is not None:
            self._programmer.start()
        return self

    def stop(self, grace: float = 2.0) -> None:
        self.stopping.set()
        self.service.programmer.poke()   # they sleep at rest
        self.service.reconciler.wake()
        if self.metrics_server is not None:
            self.metrics_server.stop()
        if self.console_server is not None:
            self.console_server.stop()
        if self.site_server is not None:
            self.site_server.stop(grace=min(grace, 1.0))
            self.service.sites.poke(self.service.sites.capacity)
            self.service.sites.join()
            self.site_transport.close()
        self.server.stop(grace=grace)
        for thread in (self._sweeper, self._programmer, *self._led):
            if thread is not None and thread.is_alive():
                thread.join(timeout=5)
        self.backend.close()
        self.store.close()
        if self._console_dir is not None:
            import shutil
            shutil.rmtree(self._console_dir, ignore_errors=True)
        LOG.info("netpeerd stopped")


def _site_context(config: Config):
    if not config.site:
        return None
    from netpeer.ovn.ic_rows import SiteContext
    return SiteContext(config.site, config.gateway_group, {link.name: link.transit_ipv4 for link in config.sites})


def _service_settings(config: Config):
    """The service's part of the configuration (``netpeer.service.Settings``)."""
    from netpeer.service import Settings
    return Settings(owner=config.owner, quotas=config.quotas, limits=config.limits,
                    attachment_grace=config.attachment_grace, repair_max_delete_share=config.repair_max_delete_share,
                    full_sweep_interval=config.full_sweep_interval)


def _metrics_endpoint(config: Config) -> dict:
    """How the metrics endpoint serves (``Metrics.serve``'s tls and
    access), its files read now: a missing or unusable one is refused in
    one line before anything starts."""
    if not config.metrics_listen:
        return {}
    from netpeer.observe.endpoint import Access, tls_context
    tls = None
    if config.metrics_tls is not None:
        field, cert, key = config.metrics_tls
        tls = tls_context(cert, key, field)
    access = Access()
    if config.metrics_bearer_token_file is not None:
        access = Access(bearer_token=linkfiles.read_secret("metrics.bearer_token_file",
                                                           config.metrics_bearer_token_file))
    elif config.metrics_basic_auth_username is not None:
        access = Access(basic_auth=(config.metrics_basic_auth_username, linkfiles.read_secret(
            "metrics.basic_auth_password_file", config.metrics_basic_auth_password_file)))
    return {"tls": tls, "access": access}


def _console(config: Config, api: str):
    """The web console (``netpeer.console``), over TLS with [tls]'s cert and
    key when they are set."""
    from netpeer.console.server import Console
    from netpeer.observe.endpoint import tls_context
    tls = tls_context(config.tls_cert, config.tls_key, "tls.cert") if config.tls_cert is not None else None
    return Console(config.console_listen, api, tls=tls, assets=config.console_assets)


def _with_port(listen: str, port: int) -> str:
    return f"{listen.rsplit(':', 1)[0]}:{port}"


def _metrics_url(config: Config) -> str:
    if config.metrics_listen.startswith("unix:"):
        return f"{config.metrics_listen} (HTTP{'S' if config.metrics_tls else ''}, /metrics)"
    return f"http{'s' if config.metrics_tls else ''}://{config.metrics_listen}/metrics"


def serve(config: Config, mode: Mode = Mode.CHECK, path=None, dataplane: str = "ovn") -> int:
    """Runs netpeerd until SIGTERM/SIGINT; SIGHUP reloads ``path``
    (``Daemon.reload``). Returns an exit code; ``EXIT_REFUSED`` with one
    line on stderr, nothing started, for a dataplane this configuration may
    not run (``netpeer.simulation``)."""
    from netpeer import simulation
    try:
        simulation.check(config, dataplane)
    except InvalidArgument as exc:
        sys.stderr.write(f"netpeerd: {exc.message}\n")
        return EXIT_REFUSED
    gc.set_threshold(*GC_THRESHOLDS)
    logs.configure(config.log_level, config.log_format)
    daemon = Daemon(config, mode=mode, dataplane=dataplane)
    # Once the replica is whole, what netpeerd holds from its start (the
    # replica is most of it) is left out of every later collection: a full
    # collection walked all of it, 1-3 s of CPU at 10,000 networks with every
    # other thread stopped. Replica rows hold no cycles, so rows deleted
    # later are still freed; cyclic garbage alive at that moment stays.
    daemon.on_replica = gc.freeze

    def on_signal(signum, frame):
        LOG.info("signal %d: shutting down", signum)
        daemon.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    reload = threading.Event()
    if path is not None:
        signal.signal(signal.SIGHUP, lambda signum, frame: reload.set())

        def reloader():   # not in the signal handler: a reload writes to the store
            while not daemon.stopping.is_set():
                if reload.wait(0.5):
                    reload.clear()
                    try:
                        daemon.reload(path)
                    except InvalidArgument as exc:
                        LOG.error("reload of %s refused, nothing changed: %s", path, exc.message)
                    except Exception:
                        LOG.exception("reload of %s failed", path)
        threading.Thread(target=reloader, name="reload", daemon=True).start()
    try:
        daemon.start()
    except EpochMismatch as exc:
        daemon.stop(grace=0)
        sys.stderr.write(f"netpeerd: {exc.message}\n")
        return EXIT_REFUSED
    daemon.stopping.wait()
    daemon.stop()
    return daemon.exit_code
