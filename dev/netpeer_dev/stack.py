"""The dev stack on one machine: OVN daemons, netpeerd, a state directory.

A state directory holds everything: the OVN databases, sockets and logs
(``ovn/``), netpeerd's SQLite store, configuration, admin token, pidfile and
log. ``up`` is idempotent; ``down`` stops every daemon it started by its pid.
"""

from __future__ import annotations

import os
import shlex
import secrets
import socket
from pathlib import Path

from netpeer import errors
from netpeer.core import validate
from netpeer.config import Config
from netpeer_dev.daemons import OvnDaemons
from netpeer_dev.process import NetpeerdProcess

DEFAULT_STATE_DIR = os.path.join(
    os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "netpeer", "dev")


def port_in(path: Path) -> int:
    """The loopback port recorded in ``path``, or a free one, recorded there."""
    try:
        return int(path.read_text())
    except (FileNotFoundError, ValueError):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        path.write_text(f"{port}\n")
        return port


class DevStack:
    def __init__(self, state_dir: str | os.PathLike | None):
        self.dir = Path(state_dir or os.environ.get("NETPEER_DEV_DIR") or DEFAULT_STATE_DIR).absolute()
        self.ovn = OvnDaemons(self.dir / "ovn")

    @property
    def socket(self) -> Path:
        return self.dir / "netpeer.sock"

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pidfile(self) -> Path:
        return self.dir / "netpeerd.pid"

    @property
    def token_file(self) -> Path:
        return self.dir / "admin.token"

    @property
    def config_file(self) -> Path:
        return self.dir / "netpeerd.toml"

    @property
    def log_file(self) -> Path:
        return self.dir / "netpeerd.log"

    @property
    def chassis_marker(self) -> Path:
        """Present when the stack was started with --chassis: later `up`s keep
        the chassis and `status` counts its daemons."""
        return self.dir / "chassis"

    @property
    def wants_chassis(self) -> bool:
        return self.chassis_marker.exists()

    @property
    def metrics_port_file(self) -> Path:
        return self.dir / "metrics.port"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port()}/metrics"

    def metrics_port(self) -> int:
        """A loopback port for netpeerd's metrics, chosen once per state dir."""
        return port_in(self.metrics_port_file)

    @property
    def console_url(self) -> str:
        """The web console (docs/console.md), on a loopback port chosen once per state dir."""
        return f"http://127.0.0.1:{port_in(self.dir / 'console.port')}"

    def config(self, sweep_interval: str = "5s") -> Config:
        return Config(listen=self.endpoint, store=self.dir / "netpeer.db", ovn_nb=self.ovn.nb_remote,
                      admin_token_file=self.token_file, sweep_interval=validate.ttl("--sweep-interval",
                                                                                    sweep_interval),
                      metrics_listen=f"127.0.0.1:{self.metrics_port()}" if self.dir.exists() else None,
                      console_listen=self.console_url[len("http://"):] if self.dir.exists() else None)

    def netpeerd(self, sweep_interval: str = "5s") -> NetpeerdProcess:
        token = self.admin_token() if self.token_file.exists() else ""
        return NetpeerdProcess(self.config(sweep_interval), self.dir, token)

    def netpeerd_pid(self) -> int | None:
        return self.netpeerd().pid

    def up(self, chassis: bool, sweep_interval: str, say, serve_args: tuple[str, ...] = ()) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        if len(str(self.socket)) > 100:
            raise errors.InvalidArgument.for_field("--state-dir", str(self.dir),
                                                   "is too long for unix sockets; choose a shorter path")
        chassis = chassis or self.wants_chassis
        self.ovn.start(chassis=chassis, progress=say)
        if chassis:
            self.chassis_marker.write_text("ovs-vswitchd (userspace datapath) and ovn-controller\n")
        self.ensure_admin_token()
        netpeerd = self.netpeerd(sweep_interval)
        if netpeerd.pid is None:
            say("starting netpeerd")
            netpeerd.start(timeout=30, args=serve_args)
        else:
            say(f"netpeerd already running (pid {netpeerd.pid})")

    def ensure_admin_token(self) -> None:
        """Mint the admin token (0600) unless the state dir has one."""
        if not self.token_file.exists():
            token = f"np_admin{secrets.token_hex(3)}_{secrets.token_urlsafe(32).replace('_', '-')}"
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token + "\n")

    def admin_token(self) -> str:
        return self.token_file.read_text().strip()

    def down(self, purge: bool, say) -> None:
        netpeerd = self.netpeerd()
        if netpeerd.pid is not None:
            say(f"stopping netpeerd (pid {netpeerd.pid})")
        netpeerd.stop()
        failure = None
        try:
            from netpeer_dev import instances
            instances.delete_all(self, say)
        except ImportError:
            pass
        except errors.NetpeerError as exc:   # still stop the daemons; report at the end
            failure = exc
        self.ovn.stop()
        if failure is not None:
            raise failure
        if purge and self.dir.exists():
            import shutil
            shutil.rmtree(self.dir)
            say(f"removed {self.dir}")

    def status_rows(self) -> list[list[str]]:
        rows = [[s.name, str(s.pid or ""), "running" if s.running else "stopped", s.detail]
                for s in self.ovn.status()]
        pid = self.netpeerd_pid()
        rows.append(["netpeerd", str(pid or ""), "running" if pid else "stopped", self.endpoint])
        return rows

    def required_daemons(self) -> tuple[str, ...]:
        central = ("ovsdb-server-nb", "ovsdb-server-sb", "ovn-northd", "netpeerd")
        return central + (("ovsdb-server", "ovs-vswitchd", "ovn-controller") if self.wants_chassis else ())


def load_hint(state_dir: Path, *flags: str) -> str:
    """The line that loads a running stack's settings into a shell: the
    flags it was made with, and its state directory unless it is the default
    one (without them the same command would make or find another stack)."""
    words = ["netpeer", "dev", "up", *flags]
    if Path(state_dir).absolute() != Path(DEFAULT_STATE_DIR).absolute():
        words += ["--state-dir", str(state_dir)]
    return f'load the settings with: eval "$({shlex.join(words)})"'
