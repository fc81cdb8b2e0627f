"""netpeerd's configuration file (TOML): reading it with one clear line per
mistake, and writing it (the dev stack, the benchmarks and the tests write
theirs with ``Config.write``).

    listen = "unix:///run/netpeer/netpeer.sock"   # or host:port (TLS unless loopback)
    store = "/var/lib/netpeer/netpeer.db"  # or "postgresql://netpeer@db1/netpeer" (replicas)
    leader_lease = "3s"                  # replicas: how long the sweeping replica's lease lasts
    ovn_nb = "tcp:10.0.0.5:6641,tcp:10.0.0.6:6641"
    admin_token_file = "/etc/netpeer/admin.token"
    owner = "netpeer"
    sweep_interval = "30s"
    full_sweep_interval = "1h"           # every network compared with OVN at least this often
    ovn_timeout = "10s"
    repair_max_delete_share = 0.25
    log_level = "INFO"
    log_format = "text"                  # or "json"
    metrics_listen = "127.0.0.1:9464"    # Prometheus: http://127.0.0.1:9464/metrics (TLS unless loopback or unix)
    console_listen = "127.0.0.1:8443"    # the web console (docs/console.md): TLS ([tls]) unless loopback
    console_assets = "~/.cache/netpeer/console"   # where set-up put the graph library
    attachment_grace = "60s"             # a network's unused slot on a site link is released after this
    [tls]
    cert = "..."  key = "..."  client_ca = "..."
    [metrics]                            # optional: the endpoint's own cert and key (default: [tls]'s), and
    cert = "..."  key = "..."            # bearer_token_file, or basic_auth_username + basic_auth_password_file
    [quotas]
    networks_per_namespace = 1000  peerings_per_network = 500  pending_peerings_per_namespace = 2000
    site_attachments_per_namespace = 250
    [limits]                             # per token (netpeer.service.budget)
    validate_only_lock_share = 0.1  validate_only_burst = "2s"  conflict_disclosures_per_minute = 5

Cross-site peering (docs/cross-site.md): the site this netpeerd serves,
where the other sites' netpeerds reach it, and one table per other site:

    site = "east"
    [interconnect]
    listen = "10.200.1.2:7443"            # SiteService only; TLS unless loopback or unix
    gateway_group = "np-gw-east"          # this site's HA_Chassis_Group
    ovn_sb = "tcp:10.0.0.5:6642"          # optional: this site's SB, for the gateways' state in GetStatus
    cert = "site.crt"  key = "site.key"  ca = "region-ca.crt"   # mTLS between sites
    [sites.west]
    endpoint = "10.200.2.2:7443"          # west's [interconnect] listen
    secret_file = "east-west.secret"      # shared by the two sites, 0600
    transit_ipv4 = "169.254.0.0/16"       # the link's IPv4 block, the same on both sides

Every setting is read and checked here or in ``netpeer.config_tables``
(the tables, the cross-site settings), so that one mistake is one line
naming it, whatever section it is in.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from datetime import timedelta
from pathlib import Path

from netpeer.core import validate
from netpeer import config_tables
from netpeer.config_tables import SiteLink
from netpeer.core.models import Quotas, TokenLimits, WatchLimits
from netpeer.errors import InvalidArgument
from netpeer.listen import check_listen, host_port
from netpeer.ovn.connection import parse_remotes
from netpeer.store.base import is_url

__all__ = ["LOG_LEVELS", "Config", "SiteLink"]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


@dataclasses.dataclass(frozen=True)
class Config:
    listen: str
    store: Path | str                     # an SQLite file, or a postgresql:// URL
    ovn_nb: str
    admin_token_file: Path | None = None
    owner: str = "netpeer"
    sweep_interval: timedelta = timedelta(seconds=30)
    #: Between comparisons prompted by OVN's change reports, every network
    #: is compared with OVN at least this often, a slice per sweep.
    full_sweep_interval: timedelta = timedelta(hours=1)
    ovn_timeout: timedelta = timedelta(seconds=10)
    #: A repair sweep that would delete more than this share of netpeer's
    #: OVN rows stops and reports instead (a lost or rolled-back store).
    repair_max_delete_share: float = 0.25
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    log_level: str = "INFO"
    log_format: str = "text"          # or "json": one object per line, with request ids
    metrics_listen: str | None = None  # host:port or unix:///path of the Prometheus endpoint (/metrics); None: off
    #: [metrics]: the endpoint's certificate and key (default: [tls]'s), and
    #: who may scrape: a bearer token, or a user name and password (basic).
    metrics_cert: Path | None = None
    metrics_key: Path | None = None
    metrics_bearer_token_file: Path | None = None
    metrics_basic_auth_username: str | None = None
    metrics_basic_auth_password_file: Path | None = None
    #: The web console (``netpeer.console``): host:port; TLS with [tls]'s
    #: cert and key unless loopback. None: off.
    console_listen: str | None = None
    #: The directory holding the graph library the console serves
    #: (``cytoscape.min.js``, put there by scripts/setup.sh).
    console_assets: Path | None = None
    quotas: Quotas = Quotas()
    limits: TokenLimits = TokenLimits()
    #: A network's slot on the link to another site (its transit port) is
    #: released this long after its last half towards that site went
    #: (docs/cross-site.md); a new half meanwhile keeps the same slot.
    attachment_grace: timedelta = timedelta(seconds=60)
    #: Watch streams per token (admin tokens apart) and in all.
    watch: WatchLimits = WatchLimits()
    #: Replicas (PostgreSQL store): the sweeping replica renews a lease of this
    #: length; another one takes over at most this long after it died.
    leader_lease: timedelta = timedelta(seconds=3)
    #: This netpeerd's site ("" : no sites) and its links to the others.
    site: str = ""
    site_listen: str | None = None
    gateway_group: str = ""
    #: This site's OVN SB (optional): which gateway chassis is active, for GetStatus.
    ovn_sb: str = ""
    site_cert: Path | None = None
    site_key: Path | None = None
    site_ca: Path | None = None
    sites: tuple[SiteLink, ...] = ()

    # ------------------------------------------------------------ writing
    def to_toml(self) -> str:
        """The configuration file that ``load`` reads back as this Config."""
        def q(value) -> str:
            return json.dumps(str(value))  # a TOML basic string

        lines = [f"listen = {q(self.listen)}", f"store = {q(self.store)}", f"ovn_nb = {q(self.ovn_nb)}"]
        if self.admin_token_file is not None:
            lines.append(f"admin_token_file = {q(self.admin_token_file)}")
        lines += [f"owner = {q(self.owner)}",
                  f"sweep_interval = {q(validate.format_duration(self.sweep_interval))}",
                  f"ovn_timeout = {q(validate.format_duration(self.ovn_timeout))}",
                  f"repair_max_delete_share = {self.repair_max_delete_share!r}",
                  f"log_level = {q(self.log_level)}", f"log_format = {q(self.log_format)}"]
        if self.full_sweep_interval != Config.full_sweep_interval:   # so an older netpeerd reads the default
            lines.append(f"full_sweep_interval = {q(validate.format_duration(self.full_sweep_interval))}")
        if self.metrics_listen:
            lines.append(f"metrics_listen = {q(self.metrics_listen)}")
        if self.console_listen:
            lines.append(f"console_listen = {q(self.console_listen)}")
        if self.console_assets is not None:
            lines.append(f"console_assets = {q(self.console_assets)}")
        if self.leader_lease != timedelta(seconds=3):
            lines.append(f"leader_lease = {q(validate.format_duration(self.leader_lease))}")
        if self.attachment_grace != Config.attachment_grace:
            lines.append(f"attachment_grace = {q(validate.format_duration(self.attachment_grace))}")
        tls = [(k, v) for k, v in (("cert", self.tls_cert), ("key", self.tls_key),
                                   ("client_ca", self.tls_client_ca)) if v is not None]
        if tls:
            lines += ["[tls]"] + [f"{k} = {q(v)}" for k, v in tls]
        metrics = [(f.name[len("metrics_"):], getattr(self, f.name)) for f in dataclasses.fields(self)
                   if f.name.startswith("metrics_") and f.name != "metrics_listen"]
        if any(v is not None for _, v in metrics):
            lines += ["[metrics]"] + [f"{k} = {q(v)}" for k, v in metrics if v is not None]
        if self.site:
            lines.insert(0, f"site = {q(self.site)}")
            ic = [(k, v) for k, v in (("listen", self.site_listen), ("gateway_group", self.gateway_group),
                                      ("ovn_sb", self.ovn_sb),
                                      ("cert", self.site_cert), ("key", self.site_key), ("ca", self.site_ca)) if v]
            lines += ["[interconnect]"] + [f"{k} = {q(v)}" for k, v in ic]
        # Settings at their defaults added since a release are left out, so an older netpeerd reads the file.
        lines += ["[quotas]"] + [f"{f.name} = {getattr(self.quotas, f.name)}" for f in dataclasses.fields(Quotas)
                                 if f.name != "site_attachments_per_namespace"
                                 or getattr(self.quotas, f.name) != f.default]
        if self.limits != TokenLimits():
            lines += ["[limits]", f"validate_only_lock_share = {self.limits.validate_only_lock_share!r}",
                      f"validate_only_burst = {q(validate.format_duration(self.limits.validate_only_burst))}",
                      f"conflict_disclosures_per_minute = {self.limits.conflict_disclosures_per_minute}"]
        if self.watch != WatchLimits():   # so an older netpeerd reads the default
            lines += ["[watch]"] + [f"{f.name} = {getattr(self.watch, f.name)}"
                                    for f in dataclasses.fields(WatchLimits)]
        for link in self.sites:
            lines += [f"[sites.{link.name}]", f"endpoint = {q(link.endpoint)}", f"secret_file = {q(link.secret_file)}",
                      f"transit_ipv4 = {q(link.transit_ipv4)}"]
            if link.ca_cert is not None:
                lines.append(f"ca_cert = {q(link.ca_cert)}")
        return "\n".join(lines) + "\n"

    def write(self, path: str | os.PathLike) -> Path:
        """Writes the configuration file (0600: it names the admin token file)."""
        path = Path(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.to_toml())
        return path

    # ------------------------------------------------------------ reading
    @classmethod
    def load(cls, path: str | os.PathLike) -> "Config":
        """Reads a TOML file; relative paths are relative to the file."""
        path = Path(path)
        try:
            raw = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise InvalidArgument.for_field("--config", str(path), "does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise InvalidArgument.for_field("--config", str(path), f"is not valid TOML: {exc}") from None
        base = path.parent

        def p(value, field):
            if value is None:
                return None
            if not isinstance(value, str) or not value:
                raise InvalidArgument.for_field(field, value, "must be a path")
            return (base / os.path.expanduser(value)).resolve()

        config_tables.check_known(raw, {"listen", "store", "ovn_nb", "admin_token_file", "owner", "sweep_interval", "ovn_timeout",
                     "full_sweep_interval", "repair_max_delete_share", "tls", "log_level", "log_format",
                     "metrics_listen", "metrics", "console_listen", "console_assets", "quotas", "limits", "watch", "leader_lease", "attachment_grace",
                     "site", "interconnect", "sites"}, "")
        for key in ("listen", "store", "ovn_nb"):
            if not raw.get(key):
                raise InvalidArgument.for_field(key, raw.get(key, ""), f"is required in {path}")
            if not isinstance(raw[key], str):
                raise InvalidArgument.for_field(key, raw[key], "must be a string")
        try:
            parse_remotes(raw["ovn_nb"])
        except ValueError as exc:
            raise InvalidArgument.for_field("ovn_nb", raw["ovn_nb"], str(exc)) from None
        tls = config_tables.read_table(raw, "tls", {"cert", "key", "client_ca"})
        if ("cert" in tls) != ("key" in tls):
            raise InvalidArgument.for_field("tls", "cert/key", "needs both [tls] cert and [tls] key")
        listen = raw["listen"]
        if listen.startswith("unix:") and not listen.startswith("unix:///"):
            listen = "unix://" + str(p(listen[len("unix:"):], "listen"))
        level = str(raw.get("log_level", "INFO")).upper()
        if level not in LOG_LEVELS:
            raise InvalidArgument.for_field("log_level", raw.get("log_level"), f"must be one of {', '.join(LOG_LEVELS)}")
        log_format = raw.get("log_format", "text")
        if log_format not in ("text", "json"):
            raise InvalidArgument.for_field("log_format", log_format, "must be text or json")
        metrics = config_tables.metrics(raw, p)
        share = raw.get("repair_max_delete_share", 0.25)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise InvalidArgument.for_field("repair_max_delete_share", share, "must be a number above 0 and at most 1")
        store = raw["store"]
        if is_url(store):
            config_tables.check_url(store)
        else:
            store = p(store, "store")
        sweep = validate.ttl("sweep_interval", raw.get("sweep_interval", "30s"))
        full = validate.ttl("full_sweep_interval", raw.get("full_sweep_interval", "1h"))
        if full < sweep:
            raise InvalidArgument.for_field("full_sweep_interval", raw.get("full_sweep_interval", "1h"),
                                            f"must be at least sweep_interval ({validate.format_duration(sweep)})")
        grace = validate.ttl("attachment_grace", raw.get("attachment_grace", "60s"))
        lease = validate.ttl("leader_lease", raw.get("leader_lease", "3s"))
        if not timedelta(seconds=1) <= lease <= timedelta(minutes=5):
            raise InvalidArgument.for_field("leader_lease", raw.get("leader_lease"), "must be from 1s to 5m")
        config = cls(
            listen=listen, store=store, ovn_nb=raw["ovn_nb"], leader_lease=lease,
            admin_token_file=p(raw.get("admin_token_file"), "admin_token_file"),
            owner=validate.name("owner", raw.get("owner", "netpeer")),
            sweep_interval=sweep, full_sweep_interval=full,
            ovn_timeout=validate.ttl("ovn_timeout", raw.get("ovn_timeout", "10s")),
            repair_max_delete_share=float(share),
            tls_cert=p(tls.get("cert"), "tls.cert"), tls_key=p(tls.get("key"), "tls.key"),
            tls_client_ca=p(tls.get("client_ca"), "tls.client_ca"),
            log_level=level, log_format=log_format, quotas=config_tables.quotas(raw), limits=config_tables.limits(raw),
            watch=config_tables.counts(raw, "watch", WatchLimits, 1_000_000), attachment_grace=grace, **metrics,
            console_listen=config_tables.console_listen(raw.get("console_listen")),
            console_assets=p(raw.get("console_assets"), "console_assets"), **config_tables.sites(raw, p))
        config.check_metrics()
        config.check_console()
        return config

    def check_console(self) -> None:
        """The console follows ``listen``'s rule (plaintext on loopback
        only, TLS with [tls]'s cert and key otherwise); it is refused where
        the API asks callers for a client certificate, which a browser's
        session could not present. One line naming the setting."""
        if self.console_listen is None:
            return
        host_port("console_listen", self.console_listen, any_port=True)
        check_listen(self.console_listen, tls=self.tls_cert is not None, field="console_listen")
        if self.tls_client_ca is not None:
            raise InvalidArgument.for_field("console_listen", self.console_listen,
                                            "cannot be used with [tls] client_ca: the API asks every caller for a "
                                            "client certificate, which the console's sessions do not have")

    def check_metrics(self) -> None:
        """The metrics endpoint follows ``listen``'s rule: plaintext only on
        loopback or a unix socket, TLS otherwise (``[metrics]`` cert and key,
        or ``[tls]``'s); its settings make sense together. One line naming
        the setting and its value when not."""
        if self.metrics_listen is None:
            named = [f.name for f in dataclasses.fields(self) if f.name.startswith("metrics_")
                     and getattr(self, f.name) is not None]
            if named:
                raise InvalidArgument.for_field(named[0].replace("metrics_", "metrics.", 1),
                                                str(getattr(self, named[0])), "needs metrics_listen")
            return
        if not self.metrics_listen.startswith("unix:"):
            host_port("metrics_listen", self.metrics_listen)
        if (self.metrics_cert is None) != (self.metrics_key is None):
            raise InvalidArgument.for_field("metrics", "cert/key", "needs both [metrics] cert and [metrics] key")
        if self.metrics_bearer_token_file is not None and (self.metrics_basic_auth_username is not None
                                                           or self.metrics_basic_auth_password_file is not None):
            raise InvalidArgument.for_field("metrics.bearer_token_file", str(self.metrics_bearer_token_file),
                                            "cannot be combined with basic_auth_*: choose one way to authenticate")
        if (self.metrics_basic_auth_username is None) != (self.metrics_basic_auth_password_file is None):
            raise InvalidArgument.for_field("metrics", "basic_auth_username/basic_auth_password_file",
                                            "needs both [metrics] basic_auth_username and basic_auth_password_file")
        user = self.metrics_basic_auth_username
        if user is not None and (not user or ":" in user or not user.isprintable()):
            raise InvalidArgument.for_field("metrics.basic_auth_username", user,
                                            "must be a printable name without ':'")
        check_listen(self.metrics_listen, tls=self.metrics_tls is not None, field="metrics_listen",
                     remedy="configure [metrics] cert and key, or [tls] cert and key")

    @property
    def metrics_tls(self) -> tuple[str, Path, Path] | None:
        """(setting, cert, key) the metrics endpoint serves TLS with, if any."""
        if self.metrics_cert is not None and self.metrics_key is not None:
            return "metrics.cert", self.metrics_cert, self.metrics_key
        if self.tls_cert is not None and self.tls_key is not None:
            return "tls.cert", self.tls_cert, self.tls_key
        return None


