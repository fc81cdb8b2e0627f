"""One site's control plane in the multi-site dev stack (``netpeer_dev.multisite``):
its netpeerd, with the site's configuration::

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
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

from netpeer import errors
from netpeer.certs import CA_CERT
from netpeer.config import Config
from netpeer_dev.operator import MAX_SITES, gateway_group
from netpeer_dev.sites import Sites
from netpeer_dev.stack import DevStack

__all__ = ["SiteStack", "transit_block"]


class SiteStack(DevStack):
    """One site's netpeerd, in ``<state-dir>/<site>/``, on the site's OVN central."""

    def __init__(self, sites: Sites, site: str) -> None:
        self.dir = sites.state_dir / site
        self.ovn = sites.central[site]
        self.sites = sites
        self.site = site

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

    def config(self, sweep_interval: str = "5s") -> Config:
        """The single-site configuration plus ``site``, ``[interconnect]`` and one
        ``[sites.NAME]`` per other site, with mTLS."""
        base = super().config(sweep_interval)
        _require_site_config()
        return dataclasses.replace(base, site=self.site, site_listen=f"unix://{self.site_socket}",
                                   gateway_group=gateway_group(self.site), sites=self.links(),
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
