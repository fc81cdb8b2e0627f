"""The multi-site stack itself (``netpeer_dev.sites.Sites``, no netpeerd):
bring-up, the operator's rows, status, the WireGuard keys, the site link
through the tunnel, a partition, and a teardown that leaves nothing."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from netpeer_dev.operator import transit_switch
from netpeer_dev.sites import Sites
from tests.sites.helpers import leftovers, require_sites
from tests.support import short_tmpdir

pytestmark = pytest.mark.chassis


def _rss_mb(pids: dict[str, int]) -> float:
    total = 0
    for pid in pids.values():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return round(total / 1024, 1)


def _start(names: list[str], ha: bool) -> tuple[Sites, float]:
    require_sites()
    sites = Sites(short_tmpdir("npx-"), names, ha=ha)
    t0 = time.monotonic()
    sites.start(lambda site: [sites.state_dir / site / "site.sock"], timeout=180)
    return sites, time.monotonic() - t0


@pytest.mark.parametrize("names,ha", [(["east", "west"], False), (["east", "west"], True),
                                      (["east", "west", "north"], False)], ids=["one-gateway", "ha", "three-sites"])
def test_bring_up_status_and_clean_stop(names: list[str], ha: bool, measurements) -> None:
    sites, took = _start(names, ha)
    pids = sites.pids()
    try:
        procs = sites.processes()
        per_site = 4 + 3 * (3 if ha else 1) + 2   # nb, sb, northd, ovn-ic; chassis x 3 daemons; wireguard-go, relay
        assert len(procs) == 2 + len(names) * per_site, [p.role for p in procs]
        assert all(p.running for p in procs), [p for p in procs if not p.running]
        namespaces = [n for n in os.listdir("/run/netns") if n.startswith(sites.prefix + "-")]
        assert len(namespaces) == 1 + len(names) * (2 + (2 if ha else 0))
        measurements.add(f"bring-up of the stack without netpeerd: {len(names)} sites"
                         f"{', HA gateways' if ha else ''}", round(took, 2), processes=len(procs),
                         namespaces=len(namespaces), rss_mb=_rss_mb(pids),
                         phases={k: round(v, 2) for k, v in sites.timings.items()})
        # The operator's rows: a transit switch per pair, in IC NB and in both sites' NB.
        switches = set(sites.ic.ic_nbctl("--bare", "--columns=name", "list", "Transit_Switch").split())
        pairs = {transit_switch(a, b) for a in names for b in names if a < b}
        assert switches == pairs
        for site in names:
            nb = sites.central[site]
            assert nb.nbctl("get", "NB_Global", ".", "name").strip().strip('"') == site
            options = nb.nbctl("get", "NB_Global", ".", "options")
            for kv in ('bfd-min-rx="100"', 'bfd-min-tx="100"', 'bfd-mult="3"', 'ic-route-adv="false"',
                       'ic-route-learn="false"'):
                assert kv in options, options
            local = set(nb.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split())
            assert {transit_switch(site, o) for o in names if o != site} <= local
            group = json.loads(nb.nbctl("--format=json", "--columns=name,ha_chassis", "list", "HA_Chassis_Group"))
            assert [row[0] for row in group["data"]] == [f"np-gw-{site}"]
            members = nb.nbctl("--bare", "--columns=chassis_name,priority", "list", "HA_Chassis").split()
            assert dict(zip(members[::2], map(int, members[1::2]))) == (
                {f"{site}-gw1": 20, f"{site}-gw2": 10} if ha else {f"{site}-gw": 10})
        # Gateways are published to IC SB; none active while no transit port exists.
        published = sites.ic.ic_sbctl("--bare", "--columns=name", "list", "Gateway").split()
        assert sorted(published) == sorted(c.system_id for s in names for c in sites.gateways(s))
        assert {g.state for g in sites.gateway_status()} == {"standby"}
        # Tunnels: a handshake with every other site, keys 0600 in a 0700 directory, never logged.
        tunnels = sites.tunnel_status()
        assert len(tunnels) == len(names) * (len(names) - 1)
        for t in tunnels:
            assert t.state == "up" and t.latest_handshake and time.time() - t.latest_handshake < 60, t
        for site in names:
            key = sites.wg[site].key_file
            assert stat.S_IMODE(key.stat().st_mode) == 0o600
            assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
            secret = key.read_text().strip()
            for log in sites.state_dir.rglob("*.log"):
                assert secret not in log.read_text(errors="replace"), f"private key in {log}"
        # A second start is a no-op: same processes.
        sites.start(lambda site: [sites.state_dir / site / "site.sock"], timeout=60)
        assert sites.pids() == pids
    finally:
        try:
            t0 = time.monotonic()
            sites.stop()
            measurements.add(f"teardown of the stack: {len(names)} sites{', HA gateways' if ha else ''}",
                             round(time.monotonic() - t0, 2))
            left = leftovers(sites, pids)
            sites.stop()   # idempotent
        finally:
            shutil.rmtree(sites.state_dir, ignore_errors=True)   # also when the test failed
    assert not left, left


class _Echo:
    """A unix socket server standing in for west's netpeerd site endpoint: answers upper-cased."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(conn.recv(100).upper())

    def close(self) -> None:
        self.sock.close()
        self.path.unlink(missing_ok=True)


def _ask(path: Path, text: bytes, timeout: float = 8.0) -> bytes:
    with socket.socket(socket.AF_UNIX) as c:
        c.settimeout(timeout)
        c.connect(str(path))
        c.sendall(text)
        try:
            return c.recv(100)
        except socket.timeout:
            return b""


def test_site_link_crosses_the_wan_only_inside_wireguard(measurements) -> None:
    """east's netpeerd reaches west's through the relays: across the WAN, the
    capture sees only WireGuard (no TCP); with the tunnel bypassed the same
    capture sees the TCP of the site link (so the check can fail); with the
    WAN cut the link answers nothing, and it works again once healed."""
    sites, _ = _start(["east", "west"], False)
    pids = sites.pids()
    echo = _Echo(sites.state_dir / "west" / "site.sock")
    link = sites.link_socket("east", "west")
    try:
        cap = sites.start_capture(3.0)
        time.sleep(0.3)   # not polling: the capture starts listening
        for _ in range(5):
            assert _ask(link, b"hello") == b"HELLO"
        tunnel = json.loads(cap.communicate(timeout=30)[0])
        measurements.add("WAN capture during 5 site-link exchanges, tunnel up", tunnel, unit="frames")
        assert tunnel["tcp"] == 0 and tunnel["wireguard"] >= 10 and tunnel["other"] == 0, tunnel

        sites.set_tunnel_bypass(True)
        try:
            cap = sites.start_capture(3.0)
            time.sleep(0.3)   # not polling: the capture starts listening
            for _ in range(5):
                assert _ask(link, b"hello") == b"HELLO"
            clear = json.loads(cap.communicate(timeout=30)[0])
            measurements.add("WAN capture during 5 site-link exchanges, tunnel bypassed", clear, unit="frames")
            assert clear["tcp"] >= 10, clear
            assert {t.state for t in sites.tunnel_status()} == {"bypassed"}
        finally:
            sites.set_tunnel_bypass(False)

        sites.cut("east")
        try:
            assert _ask(link, b"hello", timeout=6) == b""
            assert {t.state for t in sites.tunnel_status()} == {"cut"}
        finally:
            sites.heal("east")
        t0 = time.monotonic()
        while _ask(link, b"again", timeout=2) != b"AGAIN":
            assert time.monotonic() - t0 < 20, "the site link did not come back after the WAN was healed"
        measurements.add("site link answers again after the WAN is healed", round(time.monotonic() - t0, 2))
    finally:
        try:
            echo.close()
            sites.stop()
            left = leftovers(sites, pids)
        finally:
            shutil.rmtree(sites.state_dir, ignore_errors=True)   # also when the test failed
    assert not left, left
