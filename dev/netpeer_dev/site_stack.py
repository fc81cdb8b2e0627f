"""One site's control plane in the multi-site dev stack (``netpeer_dev.multisite``):
its netpeerd, or its netpeerd replicas, with the site's configuration::

    site = "east"
    [interconnect]
    listen = "unix://<state-dir>/east/site.sock"             # where the other sites reach this netpeerd
    gateway_group = "np-gw-east"
    cert = "<state-dir>/pki/east/site-east.crt"              # mTLS: netpeer site cert issue east ... --dns localhost
    key = "<state-dir>/pki/east/site-east.key"
    ca = "<state-dir>/pki/east/region-ca.crt"
    [sites.west]
    endpoint = "unix://<state-dir>/east/links/west.sock"    # the site link, across the WAN
    secret_file = "<state-dir>/secrets/east-west.secret"     # shared by the pair, 0600
    transit_ipv4 = "169.254.0.0/21"                          # the pair's own /21 (``transit_block``)

With replicas, each in ``<state-dir>/<site>/netpeerd-<i>/``, ``listen`` is
that directory's ``site.sock`` and ``store`` the site's PostgreSQL database.
"""

from __future__ import annotations

import dataclasses
import itertools
from datetime import timedelta
from pathlib import Path

from netpeer import errors
from netpeer.api.client import Client
from netpeer.certs import CA_CERT
from netpeer.config import Config
from netpeer.core import validate
from netpeer_dev.operator import MAX_SITES, gateway_group
from netpeer_dev.postgres import PgCluster
from netpeer_dev.process import NetpeerdProcess
from netpeer_dev.sites import Sites
from netpeer_dev.stack import DevStack, port_in

__all__ = ["SiteStack", "transit_block", "LEASE"]

#: The replicas' leader_lease: short, so that a dead leader's links move within seconds (as ``--ha``).
LEASE = timedelta(seconds=3)


class SiteStack(DevStack):
    """One site's netpeerd, in ``<state-dir>/<site>/``, on the site's OVN
    central; or, with ``replicas`` > 1, its replicas on ``pg``."""

    def __init__(self, sites: Sites, site: str, replicas: int = 1, pg: PgCluster | None = None) -> None:
        self.dir = sites.state_dir / site
        self.ovn = sites.central[site]
        self.sites = sites
        self.site = site
        self.replicas, self.pg = replicas, pg

    @property
    def replicated(self) -> bool:
        return self.replicas > 1

    def replica_dir(self, i: int) -> Path:
        return self.dir / f"netpeerd-{i}"

    @property
    def database(self) -> str:
        """The site's PostgreSQL database (replicas)."""
        return f"netpeer_{self.site}"

    @property
    def sockets(self) -> list[Path]:
        """The tenant API's unix socket of the netpeerd, or of each replica."""
        if not self.replicated:
            return [self.socket]
        return [self.replica_dir(i) / "netpeer.sock" for i in range(1, self.replicas + 1)]

    @property
    def endpoint(self) -> str:
        """What ``NETPEER_ENDPOINT`` takes: the replicas comma-separated."""
        return ",".join(f"unix://{s}" for s in self.sockets)

    @property
    def site_sockets(self) -> list[Path]:
        """Where the netpeerd, or each replica, serves the other sites."""
        if not self.replicated:
            return [self.site_socket]
        return [self.replica_dir(i) / "site.sock" for i in range(1, self.replicas + 1)]

    @property
    def metrics_port_files(self) -> list[Path]:
        if not self.replicated:
            return [self.metrics_port_file]
        return [self.replica_dir(i) / "metrics.port" for i in range(1, self.replicas + 1)]

    @property
    def metrics_url(self) -> str:
        """The metrics URL of the netpeerd, or of each replica comma-separated."""
        return ",".join(f"http://127.0.0.1:{port_in(f)}/metrics" for f in self.metrics_port_files)

    def netpeerd(self, sweep_interval: str = "5s") -> NetpeerdProcess:
        if self.replicated:   # the one process of a site without replicas; netpeerds() is every one
            raise errors.FailedPrecondition(f"site {self.site} runs {self.replicas} netpeerd replicas")
        return super().netpeerd(sweep_interval)

    def netpeerds(self, sweep_interval: str = "5s") -> dict[str, NetpeerdProcess]:
        """The site's netpeerd (``{"netpeerd": ...}``) or its replicas
        (``{"netpeerd-1": ..., ...}``)."""
        if not self.replicated:
            return {"netpeerd": super().netpeerd(sweep_interval)}
        token = self.admin_token() if self.token_file.exists() else ""
        return {f"netpeerd-{i}": NetpeerdProcess(self.config(sweep_interval, i), self.replica_dir(i), token)
                for i in range(1, self.replicas + 1)}

    def roles(self, procs: dict[str, NetpeerdProcess]) -> dict[str, str]:
        """Each running replica's role as it answers: "leader" (it holds the
        sweeper lease: it sweeps and runs the site's links), "replica", or
        "not answering"."""
        roles = {}
        for label, proc in procs.items():
            if proc.pid is None:
                roles[label] = ""
                continue
            try:
                with Client(proc.endpoint, proc.admin_token, timeout=3) as c:
                    roles[label] = "leader" if c.status()["leading"] else "replica"
            except errors.NetpeerError:
                roles[label] = "not answering"
        return roles

    def secret_file(self, other: str) -> Path:
        a, b = sorted((self.site, other))
        return self.sites.state_dir / "secrets" / f"{a}-{b}.secret"

    @property
    def pki(self) -> Path:
        """This site's certificate, key and the region CA's certificate (what ``netpeer site cert issue`` writes)."""
        return self.sites.state_dir / "pki" / self.site

    @property
    def site_socket(self) -> Path:
        """Where this site's netpeerd serves the other sites (``[interconnect] listen``);
        the site link relay forwards the other sites' connections to it."""
        return self.dir / "site.sock"

    def config(self, sweep_interval: str = "5s", replica: int = 0) -> Config:
        """The single-site configuration plus ``site``, ``[interconnect]`` and one
        ``[sites.NAME]`` per other site, with mTLS; with ``replica`` (1 to N),
        that replica's, on the site's PostgreSQL database."""
        _require_site_config()
        if replica:
            d = self.replica_dir(replica)
            base = Config(listen=f"unix://{d / 'netpeer.sock'}", store=self.pg.url(self.database),
                          ovn_nb=self.ovn.nb_remote, admin_token_file=self.token_file,
                          sweep_interval=validate.ttl("--sweep-interval", sweep_interval), leader_lease=LEASE,
                          metrics_listen=f"127.0.0.1:{port_in(d / 'metrics.port')}" if d.exists() else None)
            listen = d / "site.sock"
        else:
            base, listen = super().config(sweep_interval), self.site_socket
        return dataclasses.replace(base, site=self.site, site_listen=f"unix://{listen}",
                                   gateway_group=gateway_group(self.site), ovn_sb=self.ovn.sb_remote,
                                   sites=self.links(),
                                   site_cert=self.pki / f"site-{self.site}.crt",
                                   site_key=self.pki / f"site-{self.site}.key", site_ca=self.pki / CA_CERT)

    def links(self) -> tuple:
        """``[sites.NAME]`` for every other site of the stack."""
        from netpeer.config import SiteLink
        return tuple(SiteLink(name=other, endpoint=f"unix://{self.sites.link_socket(self.site, other)}",
                              secret_file=self.secret_file(other),
                              transit_ipv4=transit_block(self.sites.plan(self.site).index,
                                                         self.sites.plan(other).index))
                     for other in self.sites.site_names if other != self.site)


def _require_site_config() -> None:
    fields = {f.name for f in dataclasses.fields(Config)}
    missing = sorted({"site", "site_listen", "gateway_group", "sites"} - fields)
    if missing:
        raise errors.FailedPrecondition(f"--sites: this netpeerd has no site configuration (netpeer.config.Config "
                                        f"lacks {', '.join(missing)})")


def transit_block(a: int, b: int) -> str:
    """The IPv4 block of the link between the sites of indices ``a`` and ``b``
    (``Sites.indices``): the same on both sides, never overlapping another
    link of either site, and fixed for the link's life, so that a site added
    to a running stack finds blocks free: a /21 per possible pair of the
    stack's ``MAX_SITES`` sites (28 pairs, 1022 networks per site and link)."""
    pairs = list(itertools.combinations(range(MAX_SITES), 2))
    return f"169.254.{pairs.index(tuple(sorted((a, b)))) * 8}.0/21"
