"""``netpeer dev up --sites east,west``: several sites, each with its netpeerd,
on one machine.

:class:`MultiSiteStack` adds to the OVN/WAN/WireGuard stack of
``netpeer_dev.sites`` the control plane of each site: one netpeerd per site
(:class:`SiteStack`, a ``DevStack`` whose OVN is the site's central) with
its own SQLite store, admin token, unix socket, metrics port and
configuration under ``<state-dir>/<site>/``::

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

A pair's shared secret is 32 random bytes (urlsafe base64), made once per
pair in ``<state-dir>/secrets/`` (0700) and removed by ``down``. The
certificates are those of ``netpeer site cert``: a region CA in
``<state-dir>/pki/ca`` and one certificate per site, for the name
``localhost`` (the endpoints are unix sockets, whose TLS check is for that
name), made once and removed by ``down``. Instances
(``netpeer dev instance add``) go on the site's instance chassis (``hv`` with
``--ha-gateways``, the gateway otherwise), MTU 1300 (GENEVE inside WireGuard).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Callable

from netpeer import errors
from netpeer.certs import CA_CERT
from netpeer.config import Config
from netpeer_dev.operator import MAX_SITES, gateway_group
from netpeer_dev.sites import Sites, SitesError
from netpeer_dev.stack import DevStack

__all__ = ["MultiSiteStack", "SiteStack", "INSTANCE_MTU"]

INSTANCE_MTU = 1300


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


class MultiSiteStack:
    """Every site of a ``--sites`` dev stack in ``state_dir``."""

    def __init__(self, state_dir: str | os.PathLike, sites: list[str], ha: bool = False,
                 indices: dict[str, int] | None = None) -> None:
        self.sites = Sites(state_dir, sites, ha=ha, indices=indices)
        self.dir = self.sites.state_dir
        self.stacks = {name: SiteStack(self.sites, name) for name in self.sites.site_names}

    @classmethod
    def open(cls, state_dir: str | os.PathLike) -> "MultiSiteStack | None":
        """The stack recorded in ``state_dir`` (its ``sites.json``), or None."""
        found = Sites.open(state_dir)
        return None if found is None else cls(state_dir, found.site_names, found.ha, found.indices)

    @property
    def names(self) -> list[str]:
        return self.sites.site_names

    @property
    def first(self) -> SiteStack:
        return self.stacks[self.names[0]]

    # ------------------------------------------------------------ up / down
    def up(self, sweep_interval: str, say: Callable[[str], None], serve_args: tuple[str, ...] = (),
           timeout: float = 180.0) -> None:
        """Start (or complete) the whole stack: OVN, WAN, WireGuard, site links,
        then each site's netpeerd once its transit switches exist. Idempotent."""
        for stack in self.stacks.values():
            if len(str(stack.socket)) > 100:
                raise errors.InvalidArgument.for_field("--state-dir", str(self.dir),
                                                       "is too long for unix sockets; choose a shorter path")
        _require_site_config()
        try:
            self.sites.start(lambda site: self.stacks[site].site_socket, timeout=timeout, progress=say)
        except SitesError as exc:
            raise errors.FailedPrecondition(str(exc)) from None
        self.ensure_secrets()
        self.ensure_certificates()
        procs = []
        for name, stack in self.stacks.items():
            stack.dir.mkdir(parents=True, exist_ok=True)
            os.chmod(stack.dir, 0o700)
            stack.ensure_admin_token()
            netpeerd = stack.netpeerd(sweep_interval)
            if netpeerd.pid is None:
                say(f"{name}: starting netpeerd")
                netpeerd.spawn(args=serve_args)
                procs.append(netpeerd)
            else:
                say(f"{name}: netpeerd already running (pid {netpeerd.pid})")
        for netpeerd in procs:
            netpeerd.wait_ready(timeout=60)

    def ensure_secrets(self) -> None:
        """Each pair's secret (0600, in a 0700 directory), unless it has one."""
        folder = self.dir / "secrets"
        folder.mkdir(exist_ok=True)
        os.chmod(folder, 0o700)
        for stack in self.stacks.values():
            for other in self.names:
                path = stack.secret_file(other) if other != stack.site else None
                if path is not None and not path.exists():
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "w") as f:
                        f.write(secrets.token_urlsafe(32) + "\n")

    def ensure_certificates(self) -> None:
        """The region CA and each site's certificate (``netpeer site cert``),
        unless it has them."""
        from netpeer import certs
        ca = self.dir / "pki" / "ca"
        if not (ca / CA_CERT).exists():
            (self.dir / "pki").mkdir(mode=0o700, exist_ok=True)
            certs.make_ca(ca)
        for stack in self.stacks.values():
            if not (stack.pki / f"site-{stack.site}.crt").exists():
                certs.issue(stack.site, ca, stack.pki, dns=("localhost",))

    def down(self, purge: bool, say: Callable[[str], None]) -> None:
        """Stop every netpeerd, delete every instance, stop the OVN/WAN/WireGuard
        stack (by pid; namespaces, veths, keys removed), remove the pair
        secrets; with ``purge`` the whole state directory."""
        failures: list[str] = []
        for name, stack in self.stacks.items():
            netpeerd = stack.netpeerd()
            if netpeerd.pid is not None:
                say(f"{name}: stopping netpeerd (pid {netpeerd.pid})")
            netpeerd.stop()
        for name in self.names:
            try:
                with self.fleet(name) as fleet:
                    fleet.delete_all(say)
            except errors.NetpeerError as exc:
                failures.append(f"{name}: {exc}")
        say(f"stopping the sites {', '.join(self.names)} (OVN, WireGuard, namespaces)")
        try:
            self.sites.stop()
        except SitesError as exc:
            failures.append(str(exc))
        shutil.rmtree(self.dir / "secrets", ignore_errors=True)
        shutil.rmtree(self.dir / "pki", ignore_errors=True)
        if failures:
            raise errors.Unavailable("; ".join(failures))
        if purge and self.dir.exists():
            shutil.rmtree(self.dir)
            say(f"removed {self.dir}")

    # ------------------------------------------------------------ settings
    def exports(self) -> list[str]:
        """The ``export`` lines of ``dev up``: per site (names upper-cased), then the first site's."""
        lines = [f"export NETPEER_SITES={','.join(self.names)}"]
        for name, stack in self.stacks.items():
            key = name.upper()
            lines += [f"export NETPEER_ENDPOINT_{key}={stack.endpoint}",
                      f"export NETPEER_TOKEN_{key}={stack.admin_token()}",
                      f"export NETPEER_METRICS_URL_{key}={stack.metrics_url}"]
        lines += [f"export NETPEER_ENDPOINT={self.first.endpoint}", f"export NETPEER_TOKEN={self.first.admin_token()}",
                  f"export NETPEER_METRICS_URL={self.first.metrics_url}"]
        return lines

    def site_of_endpoint(self, endpoint: str | None) -> str:
        """The site whose netpeerd listens at ``endpoint`` (None: the first site)."""
        if not endpoint:
            return self.names[0]
        for name, stack in self.stacks.items():
            if endpoint in (stack.endpoint, f"unix:{stack.socket}", str(stack.socket)):
                return name
        raise errors.InvalidArgument.for_field(
            "--endpoint", endpoint, f"is not a netpeerd of the sites in {self.dir} "
                                    f"({', '.join(s.endpoint for s in self.stacks.values())})")

    def token_for(self, site: str, token: str | None) -> str:
        """The token to use at ``site``: the given one, unless it is another
        site's admin token of this stack (then ``site``'s own admin token)."""
        admins = {s.admin_token() for s in self.stacks.values() if s.token_file.exists()}
        if not token or token in admins:
            return self.stacks[site].admin_token()
        return token

    def fleet(self, site: str):
        """The instances of ``site`` (on its instance chassis)."""
        from netpeer_dev.instances import Fleet, _owner_of
        stack = self.stacks[site]
        return Fleet(self.sites.hypervisor(site), stack.dir, owner=_owner_of(stack.config_file), mtu=INSTANCE_MTU)

    # ------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """Everything ``netpeer dev status`` shows, as data."""
        sites = []
        for name, stack in self.stacks.items():
            pid = stack.netpeerd_pid()
            sites.append({"name": name, "endpoint": stack.endpoint, "netpeerd_pid": pid,
                          "netpeerd": "running" if pid else "stopped", "nb_remote": stack.ovn.nb_remote,
                          "sb_remote": stack.ovn.sb_remote, "gateway_group": gateway_group(name),
                          "instance_chassis": self.sites.hypervisor(name).system_id,
                          "metrics_url": stack.metrics_url if stack.metrics_port_file.exists() else None,
                          "state_dir": str(stack.dir)})
        processes = [{"name": p.role, "pid": p.pid, "state": "running" if p.running else "stopped"}
                     for p in self.sites.processes()]
        processes += [{"name": f"{s['name']}/netpeerd", "pid": s["netpeerd_pid"], "state": s["netpeerd"]}
                      for s in sites]
        instances = []
        for name in self.names:
            if not self.stacks[name].dir.exists():
                continue
            with self.fleet(name) as fleet:
                states = fleet.states()
                instances += [{"site": name, **i.to_json(states.get(i.name))} for i in fleet.list()]
        return {"state_dir": str(self.dir), "sites": sites, "ha": self.sites.ha, "ic_nb": self.sites.ic.nb_remote,
                "ic_sb": self.sites.ic.sb_remote, "daemons": processes,
                "gateways": [dataclasses.asdict(g) for g in self.sites.gateway_status()],
                "tunnels": [dataclasses.asdict(t) for t in self.sites.tunnel_status()],
                "instances": instances}
