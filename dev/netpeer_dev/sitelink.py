"""The site link of the multi-site dev stack: netpeerd talks to the other
sites' netpeerd across the simulated WAN, through the WireGuard tunnel.

On one machine every netpeerd listens on a unix socket, which would let the
sites talk past the WAN (and a partition test would prove nothing). So each
site router runs one relay (this module, as a process inside the router's
namespace)::

    east netpeerd --unix--> <state>/east/links/west.sock   [relay in east's router namespace]
                  --TCP 10.200.1.1 -> 10.200.2.1:7100, routed into WireGuard, across the WAN-->
                  [relay in west's router namespace] --unix--> <state>/west/netpeer.sock  west netpeerd

The relay copies bytes (gRPC over HTTP/2 passes through unchanged); it knows
nothing of netpeer. Cutting the WAN (``Sites.cut``) stops the bytes, the
tunnel and the OVN-IC tunnels alike. Run as::

    python -m netpeer_dev.sitelink --pidfile F --serve IP:PORT=UNIX_PATH --forward UNIX_PATH=IP:PORT ...
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from netpeer_dev.daemons import _cmdline, _find_binary, alive

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
    def pid(self) -> int | None:
        """The live relay's pid (its command line names our pidfile), or None."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if alive(pid) and f"--pidfile={self.pidfile}" in _cmdline(pid) else None

    def start(self, netpeerd_socket: Path) -> None:
        """Start the relay unless it runs (it writes its pidfile itself)."""
        if self.pid is not None:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        argv = [_find_binary("ip"), "netns", "exec", self.netns, sys.executable, "-m", "netpeer_dev.sitelink",
                f"--pidfile={self.pidfile}", f"--serve={self.listen}={netpeerd_socket}"]
        argv += [f"--forward={self.socket(site)}={address}" for site, address in self.peers.items()]
        with open(self.dir / "sitelink.log", "a") as log:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)

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


def _handler(connect):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            r2, w2 = await asyncio.wait_for(connect(), _CONNECT_TIMEOUT)
        except (OSError, asyncio.TimeoutError):
            writer.close()
            return
        _keepalive(writer)
        _keepalive(w2)
        await asyncio.gather(_pipe(reader, w2), _pipe(r2, writer))
    return handle


async def _serve(serve: list[tuple[str, int, str]], forward: list[tuple[str, str, int]]) -> None:
    servers = []
    for host, port, path in serve:        # TCP from the other sites -> this site's netpeerd
        servers.append(await asyncio.start_server(
            _handler(lambda path=path: asyncio.open_unix_connection(path)), host, port, reuse_address=True))
    for path, host, port in forward:      # this site's netpeerd -> another site's relay
        Path(path).unlink(missing_ok=True)
        servers.append(await asyncio.start_unix_server(
            _handler(lambda host=host, port=port: asyncio.open_connection(host, port)), path))
        os.chmod(path, 0o600)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for s in servers:
        s.close()
    for path, _, _ in forward:
        Path(path).unlink(missing_ok=True)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="netpeer_dev.sitelink")
    p.add_argument("--pidfile", required=True)
    p.add_argument("--serve", action="append", default=[], metavar="IP:PORT=UNIX_PATH")
    p.add_argument("--forward", action="append", default=[], metavar="UNIX_PATH=IP:PORT")
    args = p.parse_args(argv)
    serve = [(*_address(a.split("=", 1)[0]), a.split("=", 1)[1]) for a in args.serve]
    forward = [(a.split("=", 1)[0], *_address(a.split("=", 1)[1])) for a in args.forward]
    Path(args.pidfile).write_text(f"{os.getpid()}\n")
    try:
        asyncio.run(_serve(serve, forward))
    except OSError as exc:
        sys.stderr.write(f"sitelink: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
