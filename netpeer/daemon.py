"""netpeerd: the service process (``netpeer serve --config FILE``)."""

from __future__ import annotations

import dataclasses
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


def serve(config: Config, ready: threading.Event | None = None, stop: threading.Event | None = None) -> int:
    """Runs netpeerd until SIGTERM/SIGINT (or ``stop``). Returns an exit code."""
    from netpeer.api.server import build_server
    from netpeer.ovn.backend import OvnBackend
    from netpeer.service import Service
    from netpeer.store.sqlite import SqliteStore

    logging.basicConfig(level=config.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if (config.tls_cert is None) != (config.tls_key is None):
        raise InvalidArgument.for_field("tls", "cert/key", "needs both cert and key")
    store = SqliteStore(config.store)
    backend = OvnBackend(config.ovn_nb, owner=config.owner, timeout=config.ovn_timeout.total_seconds())
    service = Service(store, backend, owner=config.owner)
    if config.admin_token_file is not None:
        service.bootstrap_admin(config.admin_token_file.read_text().strip())
    server, port = build_server(
        service, config.listen,
        tls_cert=config.tls_cert.read_bytes() if config.tls_cert else None,
        tls_key=config.tls_key.read_bytes() if config.tls_key else None,
        client_ca=config.tls_client_ca.read_bytes() if config.tls_client_ca else None)
    stop = stop or threading.Event()

    def on_signal(signum, frame):
        LOG.info("signal %d: shutting down", signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def sweeper():
        # Repair at start: a crash between an OVN commit and a store commit
        # leaves rows the store does not know; they go here.
        first = True
        while not stop.is_set():
            if backend.connected:
                report = service.sweep()
                if first or report.expired or report.repaired_rows or report.errors:
                    LOG.info("sweep: %d expired, %d OVN rows repaired, %d errors",
                             report.expired, report.repaired_rows, report.errors)
                first = False
            stop.wait(config.sweep_interval.total_seconds() if not first else 0.2)

    server.start()
    LOG.info("netpeerd listening on %s%s (OVN NB %s, store %s)", config.listen,
             f" port {port}" if port and not config.listen.startswith("unix:") else "", config.ovn_nb, config.store)
    thread = threading.Thread(target=sweeper, name="sweeper", daemon=True)
    thread.start()
    if ready is not None:
        ready.set()
    stop.wait()
    server.stop(grace=2).wait()
    thread.join(timeout=5)
    backend.close()
    store.close()
    LOG.info("netpeerd stopped")
    return 0
