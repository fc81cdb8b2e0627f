"""``netpeer dev up --ha``: the replicated deployment on one machine.

A private PostgreSQL cluster (``netpeer_dev.postgres``), the OVN NB database
as a three-member Raft cluster with SB and ovn-northd
(``netpeer_dev.nbcluster``), and N netpeerd replicas sharing both, each on
its own unix socket. No systemd; every process is found again by its
pidfile and stopped by its pid. Layout of the state directory::

    ha                  marker: the number of replicas
    admin.token         the admin token every replica shares
    ovn/                nb1..3.*, sb.*, northd.*
    pg                  -> the PostgreSQL directory (netpeer_dev.postgres says where)
    netpeerd-1/ ...     netpeerd.toml netpeerd.log netpeerd.pid netpeer.sock
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Callable

from netpeer import errors
from netpeer.api.client import Client
from netpeer.config import Config
from netpeer.core import validate
from netpeer_dev.nbcluster import NbCluster
from netpeer_dev.postgres import PgCluster
from netpeer_dev.process import NetpeerdProcess


class HaStack:
    """The replicated dev stack in ``directory``."""

    def __init__(self, directory: Path):
        self.dir = Path(directory).absolute()
        self.nb = NbCluster(self.dir / "ovn")
        self.pg = PgCluster(self.dir)

    @property
    def marker(self) -> Path:
        return self.dir / "ha"

    @property
    def enabled(self) -> bool:
        return self.marker.exists()

    @property
    def replicas(self) -> int:
        try:
            return int(self.marker.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    @property
    def token_file(self) -> Path:
        return self.dir / "admin.token"

    def admin_token(self) -> str:
        return self.token_file.read_text().strip()

    def socket(self, i: int) -> Path:
        return self.dir / f"netpeerd-{i}" / "netpeer.sock"

    @property
    def endpoint(self) -> str:
        """Every replica, comma-separated (what NETPEER_ENDPOINT takes)."""
        return ",".join(f"unix://{self.socket(i)}" for i in range(1, self.replicas + 1))

    def config(self, i: int, sweep_interval: str = "5s", lease: str = "3s") -> Config:
        return Config(listen=f"unix://{self.socket(i)}", store=self.pg.url("netpeer"), ovn_nb=self.nb.nb_remote,
                      admin_token_file=self.token_file,
                      sweep_interval=validate.ttl("--sweep-interval", sweep_interval),
                      leader_lease=validate.ttl("leader_lease", lease))

    def netpeerd(self, i: int, sweep_interval: str = "5s") -> NetpeerdProcess:
        token = self.admin_token() if self.token_file.exists() else ""
        return NetpeerdProcess(self.config(i, sweep_interval), self.dir / f"netpeerd-{i}", token)

    # ------------------------------------------------------------ up / down
    def up(self, replicas: int, sweep_interval: str, say: Callable[[str], None],
           serve_args: tuple[str, ...] = ()) -> None:
        if not 2 <= replicas <= 5:
            raise errors.InvalidArgument.for_field("--replicas", replicas, "must be from 2 to 5 with --ha (one "
                                                   "netpeerd: netpeer dev up without --ha)")
        if self.enabled and self.replicas != replicas:
            raise errors.FailedPrecondition(f"the dev stack in {self.dir} runs {self.replicas} replicas: "
                                            "`netpeer dev down` first to change their number")
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        if len(str(self.socket(replicas))) > 100 or len(str(self.dir / "ovn" / "northd.ctl")) > 100:
            raise errors.InvalidArgument.for_field("--state-dir", str(self.dir),
                                                   "is too long for unix sockets; choose a shorter path")
        self.marker.write_text(f"{replicas} netpeerd replicas on PostgreSQL, NB Raft cluster of 3\n")
        say(f"PostgreSQL already running ({self.pg.dir})" if self.pg.pid is not None
            else f"starting PostgreSQL ({self.pg.dir})")
        self.pg.start()
        link = self.dir / "pg"
        if not link.exists() and self.pg.dir != link:
            link.symlink_to(self.pg.dir)
        parts = [self.nb.member(i) for i in self.nb.members()] + [self.nb.sb, self.nb.northd]
        down = [m.name for m in parts if m.pid() is None]
        say("starting OVN: NB Raft cluster of 3, SB, northd" if len(down) == len(parts)
            else f"starting {', '.join(down)} (the rest of OVN already running)" if down
            else "OVN already running: NB Raft cluster of 3, SB, northd")
        self.nb.start()
        if not self.token_file.exists():
            token = f"np_admin{secrets.token_hex(3)}_{secrets.token_urlsafe(32).replace('_', '-')}"
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token + "\n")
        for i in range(1, replicas + 1):
            d = self.netpeerd(i, sweep_interval)
            if d.pid is None:
                say(f"starting netpeerd-{i}")
                d.start(timeout=60, args=serve_args)
            else:
                say(f"netpeerd-{i} already running (pid {d.pid})")

    def down(self, purge: bool, say: Callable[[str], None]) -> None:
        failures = []
        for i in range(1, max(self.replicas, 1) + 1):
            d = self.netpeerd(i)
            if d.pid is not None:
                say(f"stopping netpeerd-{i} (pid {d.pid})")
            d.stop()
        for step in (self.nb.stop, self.pg.stop):
            try:
                step()
            except Exception as exc:   # stop the rest; report at the end
                failures.append(str(exc))
        if purge:
            import shutil
            self.pg.remove()
            shutil.rmtree(self.dir, ignore_errors=True)
            say(f"removed {self.dir}")
        if failures:
            raise errors.Unavailable("; ".join(failures))

    # ------------------------------------------------------------ status
    def status(self) -> list[dict]:
        """Each process: name, role, pid, state, detail."""
        rows = [{"name": "postgres", "role": "database", "pid": self.pg.pid, "detail": str(self.pg.dir)}]
        for i in self.nb.members():
            pid = self.nb.member(i).pid()
            rows.append({"name": f"ovsdb-server-nb-{i}", "role": (self.nb.role(i) if pid else None) or "",
                         "pid": pid, "detail": str(self.nb.dir / f"nb{i}.sock")})
        rows.append({"name": "ovsdb-server-sb", "role": "database", "pid": self.nb.sb.pid(),
                     "detail": str(self.nb.dir / "sb.sock")})
        rows.append({"name": "ovn-northd", "role": "northd", "pid": self.nb.northd.pid(),
                     "detail": str(self.nb.northd.log)})
        for i in range(1, self.replicas + 1):
            d = self.netpeerd(i)
            pid, role = d.pid, ""
            if pid is not None:
                try:
                    with Client(d.endpoint, d.admin_token, timeout=3) as c:
                        role = "leader" if c.status()["leading"] else "replica"
                except errors.NetpeerError:
                    role = "not answering"
            rows.append({"name": f"netpeerd-{i}", "role": role, "pid": pid, "detail": d.endpoint})
        for row in rows:
            row["state"] = "running" if row["pid"] else "stopped"
        return rows
