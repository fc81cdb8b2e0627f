"""A region of simulated sites on one machine: a netpeerd per site with the
in-memory dataplane (``netpeer serve --dataplane memory``), its own SQLite
store, and real gRPC links between the sites over unix sockets.

Used by the tests of the simulation mode and by ``python -m bench --only
region``. ``SimulatedRegion`` writes each site's configuration (links,
secrets, transit blocks), starts and stops the netpeerds as child
processes, by pid. With ``cuttable``, each site reaches the others through
a ``LinkCutter``, an in-process relay that can cut a link (both
directions: open connections dropped, new ones refused) and heal it: a
partition of chosen links while the sites keep running.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import shutil
import socket
import threading
from pathlib import Path
from typing import Iterable

from netpeer.config import Config, SiteLink
from netpeer.core import validate
from netpeer.ovn import ic_rows
from netpeer_dev.process import NetpeerdProcess
from netpeer_dev.sitelink import _pipe

ADMIN_TOKEN = "np_admin_" + "s" * 40


def link_blocks(links: Iterable[tuple[str, str]], prefixlen: int = 19) -> dict[frozenset, str]:
    """A transit block of 169.254.0.0/16 per link (``/prefixlen``), the same
    on both ends, no two links of one site overlapping: a greedy colouring
    of the links (at most 2 x the most links of one site - 1 blocks)."""
    count = 1 << (prefixlen - 16)
    used: dict[str, set[int]] = {}
    out = {}
    for a, b in links:
        free = [i for i in range(count) if i not in used.get(a, set()) | used.get(b, set())]
        if not free:
            raise ValueError(f"too many links at {a} or {b} for /{prefixlen} blocks: use a longer prefix")
        i = free[0]
        used.setdefault(a, set()).add(i)
        used.setdefault(b, set()).add(i)
        size = 1 << (32 - prefixlen)
        base = i * size
        out[frozenset((a, b))] = f"169.254.{base >> 8}.{base & 255}/{prefixlen}"
    return out


def free_port() -> int:
    """A TCP port of loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class SimulatedSite:
    name: str
    dir: Path
    config: Config
    process: NetpeerdProcess

    @property
    def capacities(self) -> dict[str, int]:
        """Room on each link, as netpeerd computes it (``Service.link_sites``)."""
        return {link.name: ic_rows.capacity(link.transit_ipv4) for link in self.config.sites}

    def client(self, timeout: float = 30.0):
        return self.process.client(timeout)

    def metric(self, name: str, labels: str = "") -> float | None:
        """One sample of its Prometheus metrics (``metrics``), e.g.
        ``metric("netpeer_peerings", 'phase="Bound"')``; None if absent."""
        import urllib.request
        with urllib.request.urlopen(f"http://{self.config.metrics_listen}/metrics", timeout=10) as r:
            text = r.read().decode()
        want = f"{name}{{{labels}}} " if labels else f"{name} "
        for line in text.splitlines():
            if line.startswith(want):
                return float(line.split()[-1])
        return None


class SimulatedRegion:
    """Sites ``names`` joined by ``links`` (pairs of names), under ``root``."""

    def __init__(self, root: str | os.PathLike, names: Iterable[str], links: Iterable[tuple[str, str]], *,
                 sweep_interval: str = "1s", prefixlen: int = 19, cuttable: bool = False, log_level: str = "INFO",
                 metrics: bool = False):
        self.root = Path(root)
        self.links = [tuple(sorted(link)) for link in links]
        blocks = link_blocks(self.links, prefixlen)
        self.cutter = LinkCutter(self.root / "relay") if cuttable else None
        neighbours: dict[str, list[str]] = {n: [] for n in names}
        for a, b in self.links:
            neighbours[a].append(b)
            neighbours[b].append(a)
        self.sites: dict[str, SimulatedSite] = {}
        for name in neighbours:
            d = self.root / name
            d.mkdir(parents=True, exist_ok=True)
            token = d / "admin.token"
            token.write_text(ADMIN_TOKEN + "\n")
            sites = tuple(SiteLink(o, self._endpoint(name, o), self._secret(name, o), blocks[frozenset((name, o))])
                          for o in sorted(neighbours[name]))
            linked = {}
            if sites:
                linked = dict(site=name, site_listen=f"unix://{d / 'site.sock'}", gateway_group=f"np-gw-{name}",
                              sites=sites)
            config = Config(listen=f"unix://{d / 'np.sock'}", store=d / "netpeer.db",
                            ovn_nb=f"unix:{d / 'no-ovn.sock'}",   # not contacted with the memory dataplane
                            admin_token_file=token, sweep_interval=validate.ttl("sweep_interval", sweep_interval),
                            log_level=log_level, metrics_listen=f"127.0.0.1:{free_port()}" if metrics else None,
                            **linked)
            self.sites[name] = SimulatedSite(name, d, config, NetpeerdProcess(config, d, ADMIN_TOKEN))

    def _endpoint(self, here: str, other: str) -> str:
        target = self.root / other / "site.sock"
        if self.cutter is None:
            return f"unix://{target}"
        return f"unix://{self.cutter.add(here, other, target)}"

    def _secret(self, a: str, b: str) -> Path:
        path = self.root / "secrets" / ("-".join(sorted((a, b))) + ".secret")
        if not path.exists():
            path.parent.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, secrets.token_urlsafe(32).encode())
            os.close(fd)
        return path

    def __getitem__(self, name: str) -> SimulatedSite:
        return self.sites[name]

    def start(self, names: Iterable[str] | None = None, timeout: float = 120.0) -> None:
        """Starts the netpeerds (all, or ``names``) and waits until each has
        completed its first sweep."""
        if self.cutter is not None:
            self.cutter.start()
        chosen = list(names) if names is not None else list(self.sites)
        for name in chosen:
            self.sites[name].process.spawn(args=("--dataplane", "memory"))
        for name in chosen:
            self.sites[name].process.wait_ready(timeout, sweep=True, poll=0.1)

    def wait_linked(self, names: Iterable[str] | None = None, timeout: float = 120.0) -> None:
        """Until every link of these sites (all by default) answers on both
        ends with no change left unacknowledged (a site started before the
        other's listener existed retries within its backoff)."""
        import time
        chosen = set(names) if names is not None else set(self.sites)
        deadline = time.monotonic() + timeout
        while True:
            waiting = []
            for name in sorted(chosen):
                for link in self.sites[name].process.status()["sites"]:
                    if not link["reachable"] or link["pending_changes"]:
                        waiting.append(f"{name}->{link['site']}")
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"links not settled within {timeout:.0f} s: {', '.join(waiting[:10])}")
            time.sleep(0.1)

    def wait_sweeps(self, count: int, timeout: float = 120.0) -> None:
        """Until every site's netpeerd has completed ``count`` sweeps (the
        first compares every network)."""
        for site in self.sites.values():
            site.process.wait_sweep(count - 1, timeout)

    def stop(self) -> None:
        """Every netpeerd stopped by its pid, the relay ended."""
        errors = []
        for site in self.sites.values():
            try:
                site.process.stop()
            except Exception as exc:   # stop the others all the same
                errors.append(f"{site.name}: {exc}")
        if self.cutter is not None:
            self.cutter.stop()
        if errors:
            raise RuntimeError("; ".join(errors))

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def pids(self) -> dict[str, int]:
        return {n: s.process.pid for n, s in self.sites.items() if s.process.pid is not None}


class LinkCutter:
    """An in-process relay between the sites (one unix socket per caller and
    callee), whose links can be cut and healed, for partitions."""

    def __init__(self, directory: Path):
        self.dir = directory
        self._routes: dict[Path, tuple[frozenset, Path]] = {}
        self._cut: set[frozenset] = set()
        self._open: dict[frozenset, set] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list = []

    def add(self, here: str, other: str, target: Path) -> Path:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.dir / f"{here}-{other}.sock"
        self._routes[path] = (frozenset((here, other)), target)
        return path

    def start(self) -> None:
        if self._thread is not None:
            return
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._listen())
            ready.set()
            self._loop.run_forever()
        self._thread = threading.Thread(target=run, name="link-cutter", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the link relay did not start")

    async def _listen(self) -> None:
        for path, (link, target) in self._routes.items():
            path.unlink(missing_ok=True)
            self._servers.append(await asyncio.start_unix_server(
                lambda r, w, link=link, target=target: self._handle(r, w, link, target), str(path)))

    async def _handle(self, reader, writer, link: frozenset, target: Path) -> None:
        if link in self._cut:
            writer.close()
            return
        try:
            r2, w2 = await asyncio.open_unix_connection(str(target))
        except OSError:
            writer.close()
            return
        held = self._open.setdefault(link, set())
        held.update((writer, w2))
        try:
            await asyncio.gather(_pipe(reader, w2), _pipe(r2, writer))
        finally:
            held.difference_update((writer, w2))

    def _call(self, fn) -> None:
        done = threading.Event()

        def run():
            try:
                fn()
            finally:
                done.set()
        self._loop.call_soon_threadsafe(run)
        done.wait(10)

    def cut(self, links: Iterable[tuple[str, str]]) -> None:
        """Cuts these links both ways: open connections closed, new ones refused."""
        chosen = {frozenset(link) for link in links}

        def fn():
            self._cut |= chosen
            for link in chosen:
                for w in list(self._open.get(link, ())):
                    w.transport.abort()
        self._call(fn)

    def heal(self, links: Iterable[tuple[str, str]] | None = None) -> None:
        chosen = {frozenset(link) for link in links} if links is not None else set(self._cut)

        def fn():
            self._cut -= chosen
        self._call(fn)

    def stop(self) -> None:
        if self._loop is None:
            return

        def fn():
            for s in self._servers:
                s.close()
            for held in self._open.values():
                for w in list(held):
                    w.transport.abort()
        self._call(fn)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        for path in self._routes:
            path.unlink(missing_ok=True)
        self._loop = self._thread = None
