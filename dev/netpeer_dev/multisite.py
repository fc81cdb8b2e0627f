"""``netpeer dev up --sites east,west``: several sites, each with its netpeerd,
on one machine.

:class:`MultiSiteStack` adds to the OVN/WAN/WireGuard stack of
``netpeer_dev.sites`` the control plane of each site: one netpeerd per site
(:class:`SiteStack` in ``netpeer_dev.site_stack``, a ``DevStack`` whose OVN
is the site's central, with its configuration) with its own SQLite store,
admin token, unix socket, metrics port and configuration under
``<state-dir>/<site>/``.

A pair's shared secret is 32 random bytes (urlsafe base64), made once per
pair in ``<state-dir>/secrets/`` (0700) and removed by ``down``. The
certificates are those of ``netpeer site cert``: a region CA in
``<state-dir>/pki/ca`` and one certificate per site, for the name
``localhost`` (the endpoints are unix sockets, whose TLS check is for that
name), made once and removed by ``down``. Instances
(``netpeer dev instance add``) go on the site's instance chassis (``hv`` with
``--ha-gateways``, the gateway otherwise), MTU 1300 (GENEVE inside WireGuard).

With ``replicas`` from 2 to 5 (``--replicas N``) each site runs N netpeerd
processes on a PostgreSQL database of its own (``netpeer_<site>``, in one
private cluster for the stack, ``netpeer_dev.postgres``), as
``docs/replicas.md`` describes, each in ``<state-dir>/<site>/netpeerd-<i>/``
with its own tenant socket (``netpeer.sock``), ``[interconnect] listen``
(``site.sock``) and metrics port, and a 3 s ``leader_lease``; they share the
site's admin token. The site link relay forwards the other sites'
connections to whichever replica accepts (``netpeer_dev.sitelink``), so the
other sites' ``[sites.NAME]`` is the same as without replicas.
``<state-dir>/replicas`` records N; ``down`` keeps it (and the database), so
a later ``up`` brings the same replicas back."""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Callable

from netpeer import errors
from netpeer.certs import CA_CERT
from netpeer_dev.operator import gateway_group
from netpeer_dev.postgres import PgCluster, PostgresError
from netpeer_dev.site_stack import LEASE, SiteStack, _require_site_config, transit_block
from netpeer_dev.sites import Sites, SitesError

__all__ = ["MultiSiteStack", "SiteStack", "INSTANCE_MTU", "MAX_REPLICAS", "LEASE", "transit_block"]

INSTANCE_MTU = 1300
MAX_REPLICAS = 5


class MultiSiteStack:
    """Every site of a ``--sites`` dev stack in ``state_dir``."""

    def __init__(self, state_dir: str | os.PathLike, sites: list[str], ha: bool = False,
                 indices: dict[str, int] | None = None, replicas: int = 1) -> None:
        if not 1 <= replicas <= MAX_REPLICAS:
            raise errors.InvalidArgument.for_field("--replicas", replicas, f"must be from 1 to {MAX_REPLICAS} with "
                                                   "--sites (1: one netpeerd per site, on SQLite)")
        self.sites = Sites(state_dir, sites, ha=ha, indices=indices)
        self.dir = self.sites.state_dir
        self.replicas = replicas
        self.pg = PgCluster(self.dir) if replicas > 1 else None
        self.stacks = {name: SiteStack(self.sites, name, replicas, self.pg) for name in self.sites.site_names}

    @classmethod
    def open(cls, state_dir: str | os.PathLike) -> "MultiSiteStack | None":
        """The stack recorded in ``state_dir`` (its ``sites.json``), or None."""
        found = Sites.open(state_dir)
        return None if found is None else cls(state_dir, found.site_names, found.ha, found.indices,
                                              cls.recorded_replicas(state_dir))

    @staticmethod
    def recorded_replicas(state_dir: str | os.PathLike) -> int:
        """How many netpeerd per site the stack in ``state_dir`` was last brought up with."""
        try:
            return int((Path(state_dir).absolute() / "replicas").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 1

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
        then each site's netpeerd (or its replicas, on PostgreSQL) once its
        transit switches exist. Idempotent; the number of replicas changes
        only after ``down``."""
        for stack in self.stacks.values():
            if any(len(str(p)) > 100 for p in stack.sockets + stack.site_sockets):
                raise errors.InvalidArgument.for_field("--state-dir", str(self.dir),
                                                       "is too long for unix sockets; choose a shorter path")
        recorded = self.recorded_replicas(self.dir)
        if self.sites.manifest.exists() and recorded != self.replicas:
            raise errors.InvalidArgument.for_field(
                "--replicas", self.replicas, f"differs from the {recorded} netpeerd per site of the stack in "
                                             f"{self.dir}: `netpeer dev down` first to change it")
        _require_site_config()
        try:
            self.sites.start(lambda site: self.stacks[site].site_sockets, timeout=timeout, progress=say)
        except SitesError as exc:
            raise errors.FailedPrecondition(str(exc)) from None
        self.ensure_secrets()
        self.ensure_certificates()
        if self.pg is not None:
            say(f"PostgreSQL ({self.pg.dir}): a database per site")
            try:
                self.pg.start()
                for stack in self.stacks.values():
                    self.pg.create_database(stack.database)
            except PostgresError as exc:
                raise errors.FailedPrecondition(str(exc)) from None
            (self.dir / "replicas").write_text(f"{self.replicas} netpeerd replicas per site on PostgreSQL\n")
        else:
            (self.dir / "replicas").unlink(missing_ok=True)
        procs = []
        for name, stack in self.stacks.items():
            for d in [stack.dir] + [stack.replica_dir(i) for i in range(1, self.replicas + 1) if stack.replicated]:
                d.mkdir(parents=True, exist_ok=True)
                os.chmod(d, 0o700)
            stack.ensure_admin_token()
            for label, netpeerd in stack.netpeerds(sweep_interval).items():
                if netpeerd.pid is None:
                    say(f"{name}: starting {label}")
                    netpeerd.spawn(args=serve_args)
                    procs.append(netpeerd)
                else:
                    say(f"{name}: {label} already running (pid {netpeerd.pid})")
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
        stack (by pid; namespaces, veths, keys removed) and PostgreSQL, remove
        the pair secrets; with ``purge`` the whole state directory and the
        PostgreSQL cluster."""
        failures: list[str] = []
        for name, stack in self.stacks.items():
            for label, netpeerd in stack.netpeerds().items():
                if netpeerd.pid is not None:
                    say(f"{name}: stopping {label} (pid {netpeerd.pid})")
                netpeerd.stop()
            for path in stack.sockets + stack.site_sockets:   # those of a netpeerd killed -9 and not restarted
                path.unlink(missing_ok=True)
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
        if self.pg is not None and self.pg.pid is not None:
            say(f"stopping PostgreSQL (pid {self.pg.pid})")
            try:
                self.pg.stop()
            except PostgresError as exc:
                failures.append(str(exc))
        shutil.rmtree(self.dir / "secrets", ignore_errors=True)
        shutil.rmtree(self.dir / "pki", ignore_errors=True)
        if failures:
            raise errors.Unavailable("; ".join(failures))
        if purge and self.pg is not None:
            self.pg.remove()
            say(f"removed {self.pg.dir}")
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
        """The site whose netpeerd (or one of whose replicas) listens at
        ``endpoint``, one address or several comma-separated (None: the first site)."""
        if not endpoint:
            return self.names[0]
        given = {e.strip() for e in endpoint.split(",") if e.strip()}
        for name, stack in self.stacks.items():
            if given & {form for s in stack.sockets for form in (f"unix://{s}", f"unix:{s}", str(s))}:
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
        sites, netpeerds = [], []
        for name, stack in self.stacks.items():
            procs = stack.netpeerds()
            pids = {label: proc.pid for label, proc in procs.items()}
            item = {"name": name, "endpoint": stack.endpoint, "netpeerd_pid": pids.get("netpeerd"),
                    "netpeerd": "running" if all(pids.values()) else "stopped", "nb_remote": stack.ovn.nb_remote,
                    "sb_remote": stack.ovn.sb_remote, "gateway_group": gateway_group(name),
                    "instance_chassis": self.sites.hypervisor(name).system_id,
                    "metrics_url": stack.metrics_url if all(f.exists() for f in stack.metrics_port_files) else None,
                    "state_dir": str(stack.dir)}
            if stack.replicated:
                roles = stack.roles(procs)
                up = [label for label, pid in pids.items() if pid]
                item["netpeerd"] = "stopped" if not up else "running" if len(up) == len(pids) else \
                    f"{len(up)} of {len(pids)} running"
                item["netpeerd_pid"] = next((pids[label] for label, role in roles.items() if role == "leader"), None)
                item["replicas"] = [{"name": label, "pid": pids[label], "state": "running" if pids[label] else
                                     "stopped", "role": roles[label], "endpoint": procs[label].endpoint}
                                    for label in procs]
                netpeerds += [{"name": f"{name}/{r['name']}", "pid": r["pid"], "state": r["state"],
                               "role": r["role"]} for r in item["replicas"]]
            else:
                netpeerds.append({"name": f"{name}/netpeerd", "pid": item["netpeerd_pid"], "state": item["netpeerd"]})
            sites.append(item)
        processes = [{"name": p.role, "pid": p.pid, "state": "running" if p.running else "stopped"}
                     for p in self.sites.processes()]
        if self.pg is not None:
            pid = self.pg.pid
            processes.append({"name": "postgres", "pid": pid, "state": "running" if pid else "stopped",
                              "role": "database"})
        processes += netpeerds
        instances = []
        for name in self.names:
            if not self.stacks[name].dir.exists():
                continue
            with self.fleet(name) as fleet:
                states = fleet.states()
                instances += [{"site": name, **i.to_json(states.get(i.name))} for i in fleet.list()]
        return {"state_dir": str(self.dir), "sites": sites, "ha": self.sites.ha, "replicas": self.replicas,
                "postgres": str(self.pg.dir) if self.pg is not None else None, "ic_nb": self.sites.ic.nb_remote,
                "ic_sb": self.sites.ic.sb_remote, "daemons": processes,
                "gateways": [dataclasses.asdict(g) for g in self.sites.gateway_status()],
                "tunnels": [dataclasses.asdict(t) for t in self.sites.tunnel_status()],
                "instances": instances}
