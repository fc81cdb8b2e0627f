"""The underlay of the multi-site dev stack: namespaces, veths, bridges, routes,
the simulated WAN between the sites, and a capture on it.

Per site S (index i, from 0)::

    chassis namespaces <prefix>-S-<role>   phy0 (veth) on the chassis' br-phy; encap 10.200.<i+1>.<11+n>
    router namespace   <prefix>-S-rt       bridge "lan" 10.200.<i+1>.1/24 joining the chassis' veths,
                                           wan0 10.254.0.<i+1>/24 into the WAN,
                                           wg<id><i> (wireguard-go): the other sites' underlay
    WAN namespace      <prefix>-wan        bridge "wan" joining every site's wan0 (port named S)

The router forwards the other sites' underlay prefixes into its WireGuard
interface (source = its lan address, so locally made connections, such as
the site link of netpeerd, go through the tunnel too), so the WAN carries
nothing but WireGuard UDP. :meth:`Underlay.set_tunnel_bypass` routes the
underlay in clear over the WAN instead (to prove a capture can see
plaintext); :meth:`Underlay.cut` / :meth:`Underlay.heal` take a site's WAN
port down and up (a partition).

Everything this module creates is in the namespaces it lists in the stack's
manifest; deleting those namespaces removes every veth, bridge and tap.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import subprocess
import sys
from pathlib import Path
from typing import Iterable

from netpeer_dev.proc import find_binary

__all__ = ["WanError", "SitePlan", "Underlay", "UNDERLAY", "capture_script", "WG_PORT", "GENEVE_PORT"]

WG_PORT = 51820
GENEVE_PORT = 6081
UNDERLAY = ipaddress.ip_network("10.200.0.0/16")   # site i: 10.200.<i+1>.0/24
_WAN_PREFIXLEN = 24                                 # site i router: 10.254.0.<i+1>
_NO_V6 = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}


class WanError(RuntimeError):
    """A namespace, link or route of the underlay could not be made or changed; one line."""


@dataclasses.dataclass(frozen=True)
class SitePlan:
    """A site's place in the underlay."""

    name: str
    index: int
    roles: tuple[str, ...]     # its chassis: ("gw1", "gw2", "hv") or ("gw",)

    @property
    def lan(self) -> ipaddress.IPv4Network:
        return ipaddress.ip_network(f"10.200.{self.index + 1}.0/24")

    @property
    def router_lan_ip(self) -> str:
        return f"10.200.{self.index + 1}.1"

    @property
    def wan_ip(self) -> str:
        return f"10.254.0.{self.index + 1}"

    def encap_cidr(self, role: str) -> str:
        return f"10.200.{self.index + 1}.{11 + self.roles.index(role)}/24"


def _run(argv: list[str], input: str | None = None, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout,
                          stdin=None if input is not None else subprocess.DEVNULL)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise WanError(f"{' '.join(argv[:6])}: {lines[-1] if lines else f'exit status {proc.returncode}'}")
    return proc


def ip_batch(commands: list[str], netns: str | None = None) -> None:
    """Many ``ip`` commands in one process (``ip -batch -``), inside ``netns``."""
    if commands:
        _run([find_binary("ip")] + (["-n", netns] if netns else []) + ["-batch", "-"],
             input="\n".join(commands) + "\n")


def _sysctl(netns: str, settings: dict[str, str]) -> None:
    script = "\n".join(f"echo {v} > /proc/sys/{k.replace('.', '/')}" for k, v in settings.items())
    _run([find_binary("ip"), "netns", "exec", netns, "sh", "-ec", script])


def netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


class Underlay:
    """The namespaces and links of one multi-site stack (names start with ``prefix-``)."""

    def __init__(self, prefix: str, plans: Iterable[SitePlan], wg_interface) -> None:
        self.prefix = prefix
        self.plans = list(plans)
        self._wg_interface = wg_interface      # site name -> its WireGuard interface name

    # ------------------------------------------------------------ names
    def netns(self, site: str, role: str) -> str:
        """Namespace of ``role`` (gw1, gw2, hv, gw, or rt: the site router) of ``site``."""
        return f"{self.prefix}-{site}-{role}"

    @property
    def wan_netns(self) -> str:
        return f"{self.prefix}-wan"

    def namespaces(self) -> list[str]:
        """Every namespace of the stack, WAN first."""
        out = [self.wan_netns]
        for p in self.plans:
            out.append(self.netns(p.name, "rt"))
            out.extend(self.netns(p.name, role) for role in p.roles)
        return out

    # ------------------------------------------------------------ build
    def site_namespaces(self, p: SitePlan) -> list[str]:
        """The namespaces of one site: its router, then its chassis."""
        return [self.netns(p.name, "rt")] + [self.netns(p.name, role) for role in p.roles]

    def build(self) -> None:
        """Create the namespaces, bridges and veths (not the WireGuard
        interfaces: wireguard-go makes those). Refuses when one exists."""
        for ns in self.namespaces():
            if netns_exists(ns):
                raise WanError(f"network namespace {ns} already exists: stop that stack first (netpeer dev down)")
        wan = self.wan_netns
        ip_batch([f"netns add {wan}"])
        _sysctl(wan, _NO_V6)
        ip_batch(["link set lo up", "link add wan type bridge", "link set wan up"], netns=wan)
        for p in self.plans:
            self.build_site(p)

    def build_site(self, p: SitePlan) -> None:
        """One site's namespaces: its router (with its port on the WAN
        bridge) and chassis; the WAN must exist. Refuses when one exists."""
        for ns in self.site_namespaces(p):
            if netns_exists(ns):
                raise WanError(f"network namespace {ns} already exists: stop that stack first (netpeer dev down)")
        wan = self.wan_netns
        ip_batch([f"netns add {ns}" for ns in self.site_namespaces(p)])
        rt = self.netns(p.name, "rt")
        _sysctl(rt, {**_NO_V6, "net.ipv4.ip_forward": "1"})
        cmds = ["link set lo up", "link add lan type bridge", f"addr add {p.router_lan_ip}/24 dev lan",
                "link set lan up",
                f"link add wan0 type veth peer name {p.name} netns {wan}",
                f"addr add {p.wan_ip}/{_WAN_PREFIXLEN} dev wan0", "link set wan0 up"]
        for role in p.roles:
            cmds += [f"link add {role} type veth peer name phy0 netns {self.netns(p.name, role)}",
                     f"link set {role} master lan", f"link set {role} up"]
        ip_batch(cmds, netns=rt)
        ip_batch([f"link set {p.name} master wan", f"link set {p.name} up"], netns=wan)
        for role in p.roles:
            ip_batch(["link set lo up", "link set phy0 up"], netns=self.netns(p.name, role))

    def forget_routes(self, gone: SitePlan) -> None:
        """Every router of the stack stops routing to ``gone``'s underlay (a
        retired site; its own namespaces are deleted apart)."""
        for p in self.plans:
            if p.name != gone.name and netns_exists(self.netns(p.name, "rt")):
                ip_batch([f"route flush {gone.lan}"], netns=self.netns(p.name, "rt"))

    def delete(self, namespaces: Iterable[str]) -> list[str]:
        """Delete those of ``namespaces`` that carry this stack's prefix; the errors, one line each."""
        errors = []
        for ns in namespaces:
            if ns.startswith(self.prefix + "-") and netns_exists(ns):
                try:
                    _run([find_binary("ip"), "netns", "del", ns])
                except WanError as exc:
                    errors.append(str(exc))
        return errors

    # ------------------------------------------------------------ routes
    def set_tunnel_bypass(self, bypass: bool) -> None:
        """Route the other sites' underlay prefixes through WireGuard (False,
        the normal state) or in clear across the WAN (True: only to prove that
        a WAN capture can see plaintext GENEVE)."""
        for p in self.plans:
            cmds = []
            for q in self.plans:
                if q is p:
                    continue
                if bypass:
                    cmds.append(f"route replace {q.lan} via {q.wan_ip} dev wan0 src {p.router_lan_ip}")
                else:
                    cmds.append(f"route replace {q.lan} dev {self._wg_interface(p.name)} src {p.router_lan_ip}")
            ip_batch(cmds, netns=self.netns(p.name, "rt"))

    def cut(self, site: str) -> None:
        """Take ``site``'s port on the WAN bridge down: nothing crosses between
        it and the other sites (tunnel, site link) until :meth:`heal`."""
        ip_batch([f"link set {site} down"], netns=self.wan_netns)

    def heal(self, site: str) -> None:
        """Bring ``site``'s WAN port back up."""
        ip_batch([f"link set {site} up"], netns=self.wan_netns)

    def is_cut(self, site: str) -> bool:
        out = _run([find_binary("ip"), "-n", self.wan_netns, "-json", "link", "show", site]).stdout
        return "UP" not in json.loads(out)[0].get("flags", [])

    # ------------------------------------------------------------ capture
    def capture_argv(self, seconds: float, interface: str | None = None) -> list[str]:
        """The command that counts frames on a WAN bridge port (default: the
        first site's, which every frame between it and the others passes)."""
        iface = interface or self.plans[0].name
        return [find_binary("ip"), "netns", "exec", self.wan_netns, sys.executable, "-c", capture_script(),
                iface, f"{seconds:g}"]

    def capture(self, seconds: float, interface: str | None = None) -> dict[str, int]:
        """Counts of what crosses the WAN for ``seconds`` (see :func:`capture_script`)."""
        out = _run(self.capture_argv(seconds, interface), timeout=seconds + 30).stdout
        return json.loads(out.split("\n", 1)[1])

    def start_capture(self, seconds: float, interface: str | None = None) -> subprocess.Popen:
        """Like :meth:`capture` in the background, returning once the socket is
        bound (a loaded machine may take a second to start Python):
        ``json.loads(p.communicate()[0])``."""
        proc = subprocess.Popen(self.capture_argv(seconds, interface), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        if proc.stdout.readline().strip() != "capturing":
            proc.kill()
            err = proc.communicate(timeout=10)[1].strip().splitlines()
            raise WanError(f"the WAN capture did not start: {err[-1] if err else 'no output'}")
        return proc


def capture_script() -> str:
    """Python source of the WAN capture (argv: interface, seconds; prints JSON
    counts of ``frames``, ``wireguard`` (UDP 51820), ``geneve`` (UDP 6081),
    ``geneve_icmp`` (ICMP/ICMPv6 inside GENEVE), ``icmp`` (outer), ``arp``,
    ``tcp`` (outer, e.g. a site link bypassing the tunnel), ``link`` (not IP:
    link-layer control frames), ``other`` (any other IP), and ``kinds``, what
    the link and other frames were), read with a raw AF_PACKET socket."""
    return r'''
import json, select, socket, struct, sys, time
iface, seconds = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.bind((iface, 0))
print("capturing", flush=True)   # the caller waits for this line: frames from now on are counted
counts = dict(frames=0, wireguard=0, geneve=0, geneve_icmp=0, icmp=0, arp=0, tcp=0, link=0, other=0)
kinds = set()
def ip_payload(pkt):
    if len(pkt) >= 20 and pkt[0] >> 4 == 4:
        return pkt[9], pkt[(pkt[0] & 15) * 4:]
    if len(pkt) >= 40 and pkt[0] >> 4 == 6:
        return pkt[6], pkt[40:]
    return None
def ethertype_payload(frame):
    if len(frame) < 14:
        return None, b""
    et, off = struct.unpack("!H", frame[12:14])[0], 14
    while et in (0x8100, 0x88a8) and len(frame) >= off + 4:
        et, off = struct.unpack("!H", frame[off + 2:off + 4])[0], off + 4
    return et, frame[off:]
end = time.monotonic() + seconds
while True:
    left = end - time.monotonic()
    if left <= 0:
        break
    if not select.select([s], [], [], left)[0]:
        continue
    frame, addr = s.recvfrom(65535)
    counts["frames"] += 1
    et, payload = ethertype_payload(frame)
    if et == 0x0806:
        counts["arp"] += 1
        continue
    parsed = ip_payload(payload) if et in (0x0800, 0x86dd) else None
    if parsed is None:
        counts["link"] += 1    # not IP: link-layer control (LLDP, STP, ...), carries no traffic
        kinds.add("ethertype 0x%%04x" %% (et or 0))
        continue
    proto, l4 = parsed
    if proto in (1, 58):
        counts["icmp"] += 1
    elif proto == 6:
        counts["tcp"] += 1
    elif proto == 17 and len(l4) >= 8:
        sport, dport = struct.unpack("!HH", l4[:4])
        if %(wg)d in (sport, dport):
            counts["wireguard"] += 1
        elif %(geneve)d in (sport, dport):
            counts["geneve"] += 1
            g = l4[8:]
            if len(g) >= 8:
                inner = g[8 + (g[0] & 63) * 4:]
                iet, ipl = ethertype_payload(inner)
                p = ip_payload(ipl) if iet in (0x0800, 0x86dd) else None
                if p is not None and p[0] in (1, 58):
                    counts["geneve_icmp"] += 1
        else:
            counts["other"] += 1
            kinds.add("udp %%d->%%d" %% (sport, dport))
    else:
        counts["other"] += 1
        kinds.add("ip proto %%d" %% proto)
counts["kinds"] = sorted(kinds)[:10]
print(json.dumps(counts))
''' % {"wg": WG_PORT, "geneve": GENEVE_PORT}
