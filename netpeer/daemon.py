"""netpeerd: the service process (``netpeer serve --config FILE``)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import tomllib
from datetime import timedelta
from pathlib import Path

from netpeer.core import validate
from netpeer.errors import InvalidArgument

LOG = logging.getLogger("netpeerd")


@dataclasses.dataclass(frozen=True)
class Config:
    listen: str
    store: Path
    ovn_nb: str
    admin_token_file: Path | None = None
    owner: str = "netpeer"
    sweep_interval: timedelta = timedelta(seconds=30)
    ovn_timeout: timedelta = timedelta(seconds=10)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    log_level: str = "INFO"

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
                  f"log_level = {q(self.log_level)}"]
        tls = [(k, v) for k, v in (("cert", self.tls_cert), ("key", self.tls_key),
                                   ("client_ca", self.tls_client_ca)) if v is not None]
        if tls:
            lines += ["[tls]"] + [f"{k} = {q(v)}" for k, v in tls]
        return "\n".join(lines) + "\n"

    def write(self, path: str | os.PathLike) -> Path:
        """Writes the configuration file (0600: it names the admin token file)."""
        path = Path(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.to_toml())
        return path

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

        known = {"listen", "store", "ovn_nb", "admin_token_file", "owner", "sweep_interval", "ovn_timeout",
                 "tls", "log_level"}
        for key in raw:
            if key not in known:
                raise InvalidArgument.for_field(key, raw[key], f"is not a known setting ({', '.join(sorted(known))})")
        for key in ("listen", "store", "ovn_nb"):
            if not raw.get(key):
                raise InvalidArgument.for_field(key, raw.get(key, ""), f"is required in {path}")
        tls = raw.get("tls", {})
        listen = raw["listen"]
        if listen.startswith("unix:") and not listen.startswith("unix:///"):
            listen = "unix://" + str(p(listen[len("unix:"):], "listen"))
        return cls(
            listen=listen, store=p(raw["store"], "store"), ovn_nb=raw["ovn_nb"],
            admin_token_file=p(raw.get("admin_token_file"), "admin_token_file"),
            owner=validate.name("owner", raw.get("owner", "netpeer")),
            sweep_interval=validate.ttl("sweep_interval", raw.get("sweep_interval", "30s")),
            ovn_timeout=validate.ttl("ovn_timeout", raw.get("ovn_timeout", "10s")),
            tls_cert=p(tls.get("cert"), "tls.cert"), tls_key=p(tls.get("key"), "tls.key"),
            tls_client_ca=p(tls.get("client_ca"), "tls.client_ca"),
            log_level=str(raw.get("log_level", "INFO")).upper())


class Daemon:
    """netpeerd in this process: store, OVN backend, service, gRPC server and
    the reconciler's sweep thread. ``serve`` runs one until a signal; tests
    start one in-process (``service_factory`` lets them wrap the Service)."""

    def __init__(self, config: Config, service_factory=None, workers: int = 16):
        from netpeer.api.server import build_server
        from netpeer.ovn.backend import OvnBackend
        from netpeer.service import Service
        from netpeer.store.sqlite import SqliteStore

        if (config.tls_cert is None) != (config.tls_key is None):
            raise InvalidArgument.for_field("tls", "cert/key", "needs both cert and key")
        self.config = config
        self.store = SqliteStore(config.store)
        self.backend = OvnBackend(config.ovn_nb, owner=config.owner, timeout=config.ovn_timeout.total_seconds())
        self.service = (service_factory or Service)(self.store, self.backend, owner=config.owner)
        if config.admin_token_file is not None:
            self.service.bootstrap_admin(config.admin_token_file.read_text().strip())
        self.server, self.port = build_server(
            self.service, config.listen,
            tls_cert=config.tls_cert.read_bytes() if config.tls_cert else None,
            tls_key=config.tls_key.read_bytes() if config.tls_key else None,
            client_ca=config.tls_client_ca.read_bytes() if config.tls_client_ca else None, workers=workers)
        self.stopping = threading.Event()
        self._sweeper = threading.Thread(target=self.service.reconciler.run, name="sweeper", daemon=True,
                                         args=(self.stopping, config.sweep_interval.total_seconds()))

    def start(self) -> "Daemon":
        self.server.start()
        LOG.info("netpeerd listening on %s%s (OVN NB %s, store %s)", self.config.listen,
                 f" port {self.port}" if self.port and not self.config.listen.startswith("unix:") else "",
                 self.config.ovn_nb, self.config.store)
        self._sweeper.start()
        return self

    def stop(self, grace: float = 2.0) -> None:
        self.stopping.set()
        self.server.stop(grace=grace).wait()
        self._sweeper.join(timeout=5)
        self.backend.close()
        self.store.close()
        LOG.info("netpeerd stopped")


def serve(config: Config) -> int:
    """Runs netpeerd until SIGTERM/SIGINT. Returns an exit code."""
    logging.basicConfig(level=config.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    daemon = Daemon(config)

    def on_signal(signum, frame):
        LOG.info("signal %d: shutting down", signum)
        daemon.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    daemon.start()
    daemon.stopping.wait()
    daemon.stop()
    return 0
