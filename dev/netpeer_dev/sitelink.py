"""The site link of the multi-site dev stack: netpeerd talks to the other
sites' netpeerd across the simulated WAN, through the WireGuard tunnel.

On one machine every netpeerd listens on a unix socket, which would let the
sites talk past the WAN (and a partition test would prove nothing). So each
site router runs one relay (this module, as a process inside the router's
namespace)::

    east netpeerd --unix--> <state>/east/links/west.sock   [relay in east's router namespace]
                  --TCP 10.200.1.1 -> 10.200.2.1:7100, routed into WireGuard, across the WAN-->
                  [relay in west's router namespace] --unix--> <state>/west/site.sock  west netpeerd

The relay copies bytes (gRPC over HTTP/2 and TLS pass through unchanged); it
knows nothing of netpeer. Cutting the WAN (``Sites.cut``) stops the bytes,
the tunnel and the OVN-IC tunnels alike. A site that runs its netpeerd as
replicas has one ``[interconnect] listen`` socket per replica: the relay
forwards each connection from the other sites to the replica that last
accepted one, and to the next in turn when it does not accept (a dead
replica's socket refuses at once), so the other sites name one endpoint
and never see a replica die. Run as::

    python -m netpeer_dev.sitelink --pidfile F --serve IP:PORT=UNIX_PATH[,UNIX_PATH...] --forwards FILE

``FILE`` maps each unix socket to the address of another site's relay
(JSON, ``{"UNIX_PATH": "IP:PORT"}``); SIGHUP makes the relay read it again
(a site added to or retired from a running stack: ``Relay.update``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from netpeer_dev.proc import alive, cmdline, find_binary

__all__ = ["PORT", "Relay", "main"]

#: TCP port of every site router's relay (inside its own namespace).
PORT = 7100
_CONNECT_TIMEOUT = 3.0


class Relay:
    """The relay process of one site: serves ``listen`` (IP:PORT in namespace
    ``netns``) towards this site's netpeerd, and one unix socket per other site
    (``<directory>/<site>.sock``) towards that site's relay at ``peers[site]``."""

    def __init__(self, directory: Path, netns: str, listen: str, peers: dict[str, str]) -> None:
        self.dir, self.netns, self.listen, self.peers = Path(directory), netns, listen, peers

    def socket(self, site: str) -> Path:
        return self.dir / f"{site}.sock"

    @property
    def pidfile(self) -> Path:
        return self.dir / "sitelink.pid"

    @property
    def forwards_file(self) -> Path:
        return self.dir / "forwards.json"

    def _write_forwards(self) -> None:
        tmp = self.forwards_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({str(self.socket(site)): address for site, address in self.peers.items()}) + "\n")
        tmp.replace(self.forwards_file)

    @property
    def pid(self) -> int | None:
        """The live relay's pid (its command line names our pidfile), or None."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if alive(pid) and f"--pidfile={self.pidfile}" in cmdline(pid) else None

    def start(self, netpeerd_sockets: Sequence[Path]) -> None:
        """Start the relay unless it runs (it writes its pidfile itself);
        ``netpeerd_sockets``: this site's netpeerd, or each of its replicas."""
        if self.pid is not None:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        self._write_forwards()
        targets = ",".join(str(p) for p in netpeerd_sockets)
        argv = [find_binary("ip"), "netns", "exec", self.netns, sys.executable, "-m", "netpeer_dev.sitelink",
                f"--pidfile={self.pidfile}", f"--serve={self.listen}={targets}", f"--forwards={self.forwards_file}"]
        with open(self.dir / "sitelink.log", "a") as log:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)

    def update(self, deadline: float) -> None:
        """The running relay forwards to exactly ``peers`` (SIGHUP after the
        file is rewritten); returns once the sockets of the others are gone
        and those of ``peers`` exist. RuntimeError after ``deadline``."""
        pid = self.pid
        if pid is None:
            raise RuntimeError(f"the site link relay in {self.dir} is not running")
        self._write_forwards()
        os.kill(pid, signal.SIGHUP)
        wanted = {self.socket(site) for site in self.peers}
        while True:
            present = {p for p in self.dir.glob("*.sock")}
            if present == wanted:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the site link relay in {self.dir} did not take its new forwards; see "
                                   f"{self.dir / 'sitelink.log'}")
            time.sleep(0.02)

    def wait(self, deadline: float) -> None:
        """Until it runs and every socket exists; RuntimeError after ``deadline`` (monotonic)."""
        while not (self.pid and all(self.socket(site).exists() for site in self.peers)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the site link relay in {self.dir} did not start; see {self.dir / 'sitelink.log'}")
            time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM, SIGKILL after 5 s, by pid; sockets and pidfile removed."""
        pid = self.pid
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 5
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
                time.sleep(0.1)
            if alive(pid):
                raise RuntimeError(f"the site link relay (pid {pid}) did not die after SIGKILL")
        for site in self.peers:
            self.socket(site).unlink(missing_ok=True)
        self.pidfile.unlink(missing_ok=True)
        self.forwards_file.unlink(missing_ok=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


def _keepalive(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 2)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 5000)


class _Failover:
    """Unix sockets of one site's netpeerd replicas: a connection goes to
    the one that last accepted, or to the next that does. Sticking to one
    keeps a site's calls on one replica while it lives."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)
        self.current = 0

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        failed: list[str] = []
        for k in range(len(self.paths)):
            i = (self.current + k) % len(self.paths)
            try:
                conn = await asyncio.wait_for(asyncio.open_unix_connection(self.paths[i]), _CONNECT_TIMEOUT)
            except (OSError, asyncio.TimeoutError) as exc:
                failed.append(f"{self.paths[i]}: {exc or 'timed out'}")
                continue
            if i != self.current:
                sys.stderr.write(f"sitelink: {'; '.join(failed)}: now forwarding to {self.paths[i]}\n")
                sys.stderr.flush()
                self.current = i
            return conn
        raise OSError(f"no replica accepts: {'; '.join(failed)}")


def _handler(connect):
    """``connect()``: the other end of each connection (it bounds its own wait)."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            r2, w2 = await connect()
        except (OSError, asyncio.TimeoutError):
            writer.close()
            return
        _keepalive(writer)
        _keepalive(w2)
        await asyncio.gather(_pipe(reader, w2), _pipe(r2, writer))
    return handle


async def _serve(serve: list[tuple[str, int, list[str]]], forwards: Path) -> None:
    servers = []
    for host, port, paths in serve:       # TCP from the other sites -> this site's netpeerd (or its replicas)
        servers.append(await asyncio.start_server(_handler(_Failover(paths).connect), host, port,
                                                  reuse_address=True))
    forwarding: dict[str, tuple[str, asyncio.AbstractServer]] = {}   # this site's netpeerd -> another site's relay

    async def reload() -> None:
        wanted = json.loads(forwards.read_text())
        for path in [p for p, (address, _) in forwarding.items() if wanted.get(p) != address]:
            _, server = forwarding.pop(path)
            server.close()
            Path(path).unlink(missing_ok=True)
        for path, address in wanted.items():
            if path in forwarding:
                continue
            host, port = _address(address)
            Path(path).unlink(missing_ok=True)
            forwarding[path] = (address, await asyncio.start_unix_server(_handler(
                lambda host=host, port=port: asyncio.wait_for(asyncio.open_connection(host, port), _CONNECT_TIMEOUT)),
                path))
            os.chmod(path, 0o600)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(reload()))   # before any socket is seen
    await reload()
    await stop.wait()
    for s in servers:
        s.close()
    for path, (_, server) in forwarding.items():
        server.close()
        Path(path).unlink(missing_ok=True)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="netpeer_dev.sitelink")
    p.add_argument("--pidfile", required=True)
    p.add_argument("--serve", action="append", default=[], metavar="IP:PORT=UNIX_PATH[,UNIX_PATH...]",
                   help="forward connections to IP:PORT to the first of these sockets that accepts")
    p.add_argument("--forwards", required=True, metavar="FILE", help='{"UNIX_PATH": "IP:PORT"}; SIGHUP reads it again')
    args = p.parse_args(argv)
    serve = [(*_address(a.split("=", 1)[0]), a.split("=", 1)[1].split(",")) for a in args.serve]
    Path(args.pidfile).write_text(f"{os.getpid()}\n")
    try:
        asyncio.run(_serve(serve, Path(args.forwards)))
    except OSError as exc:
        sys.stderr.write(f"sitelink: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
