"""Host-side helpers for "instances": Linux network namespaces on br-int.

Longer than 400 lines: everything that touches network namespaces and veths
(create, address, route, checksum offload, ping, counters, delete) sits
together so that the cleanup rules (only what carries our alias) are in one
place.

An instance is a network namespace holding one end of a veth pair (renamed
``eth0``); the other end (the "host end", :func:`host_ifname`) lives in the
chassis namespace where ovs-vswitchd runs (``OvnDaemons.chassis_netns``, so
the host's root namespace is never touched and several chassis can coexist)
and is added to br-int with ``external_ids:iface-id=<logical switch port>``,
which is how ovn-controller binds it. The logical switch port itself is
created by the caller.

Ownership: both veth ends carry the alias ``netpeer:<netns>``; only
namespaces whose ``eth0`` has that alias (or namespaces with nothing but
``lo``, i.e. an instance whose creation was interrupted) are ever deleted,
and only veths with that alias.

Userspace datapath trap: a veth leaves TCP/UDP checksums to "hardware"
(CHECKSUM_PARTIAL); ovs-vswitchd with ``datapath_type=netdev`` reads and
forwards those packets through AF_PACKET without completing the checksum,
so TCP and UDP arrive corrupt and are dropped while ping works. Instances
therefore get TX checksum offload turned off on eth0 (what
``ethtool -K eth0 tx off`` does), done here with the SIOCETHTOOL ioctl so no
ethtool binary is needed.

Needs root and iproute2 (``ip``); ``ping`` (iputils-ping) is used when
installed, otherwise a small raw-socket ICMP echo written in Python.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import ipaddress
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from netpeer_dev.daemons import OvnDaemonError, OvnDaemons

__all__ = [
    "NetnsError", "add_instance", "delete_instance", "wait_instance_up", "ping", "list_instances", "host_ifname",
    "netns_exists", "exec_in", "echo_requests_received", "add_address", "tx_checksum_enabled",
]

_ALIAS_PREFIX = "netpeer:"
_NETNS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_IFNAME_MAX = 15
_NETNS_DIR = Path("/run/netns")

# ethtool ioctl numbers (linux/sockios.h, linux/ethtool.h)
_SIOCETHTOOL = 0x8946
_ETHTOOL_GTXCSUM = 0x00000016
_ETHTOOL_STXCSUM = 0x00000017


class NetnsError(RuntimeError):
    """A namespace or veth operation failed; the message is one line."""


# ----------------------------------------------------------------- commands

def _ip_binary() -> str:
    path = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if path is None:
        raise NetnsError("ip not found: install the Debian package iproute2")
    return path


def _run(argv: list[str], check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip().splitlines()
        shown = " ".join("<script>" if "\n" in arg else arg for arg in argv)
        raise NetnsError(f"{shown}: {message[-1] if message else f'exit status {proc.returncode}'}")
    return proc


def _ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [_ip_binary()]
    if netns is not None:
        argv += ["-n", netns]
    return _run([*argv, *args], check=check)


def exec_in(netns: str, *argv: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` inside ``netns`` (``ip netns exec``) and return the finished process."""
    return _run([_ip_binary(), "netns", "exec", netns, *argv], check=check, timeout=timeout)


# ------------------------------------------------------------------- naming

def _validate_netns(netns: str) -> None:
    if not _NETNS_RE.match(netns):
        raise ValueError(f"invalid namespace name {netns!r}: use letters, digits, '_', '.', '-' (max 64)")


def _digest(netns: str) -> str:
    return hashlib.sha256(netns.encode()).hexdigest()


def host_ifname(netns: str) -> str:
    """The host end of ``netns``'s veth (in the chassis namespace, and the OVS
    port name): ``vh-<netns>`` when that fits in 15 characters, else ``vh`` +
    13 hex digits of a hash of the name."""
    name = f"vh-{netns}"
    return name if len(name) <= _IFNAME_MAX else f"vh{_digest(netns)[:13]}"


def _temp_ifname(netns: str) -> str:
    """Name of the namespace end while it is still in the root namespace."""
    return f"vt{_digest(netns)[:13]}"


def _alias(netns: str) -> str:
    return f"{_ALIAS_PREFIX}{netns}"


# ------------------------------------------------------------------ queries

def netns_exists(netns: str) -> bool:
    """True when the named namespace exists (``/run/netns/<netns>``)."""
    return (_NETNS_DIR / netns).exists()


def _link_alias(ifname: str, netns: str | None = None) -> str | None:
    """The alias of a link, '' when it has none, None when it does not exist."""
    proc = _ip("-d", "-o", "link", "show", "dev", ifname, netns=netns, check=False)
    if proc.returncode != 0:
        return None
    match = re.search(r"\balias (\S+)", proc.stdout)
    return match.group(1) if match else ""


def _links(netns: str) -> list[str]:
    proc = _ip("-o", "link", "show", netns=netns, check=False)
    names = []
    for line in proc.stdout.splitlines():
        # "2: eth0@if7: <...>"
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@", 1)[0])
    return names


def _owned_netns(netns: str) -> bool:
    """A namespace is ours when its eth0 carries our alias, or when it holds
    nothing but lo (an instance whose creation was interrupted)."""
    if _link_alias("eth0", netns) == _alias(netns):
        return True
    return _links(netns) in ([], ["lo"])


def list_instances(prefix: str = "") -> list[str]:
    """Names of the namespaces created by :func:`add_instance` whose name starts with ``prefix``."""
    if not _NETNS_DIR.is_dir():
        return []
    names = []
    for entry in sorted(os.listdir(_NETNS_DIR)):
        if entry.startswith(prefix) and _NETNS_RE.match(entry) and _link_alias("eth0", entry) == _alias(entry):
            names.append(entry)
    return names


# ------------------------------------------------------------ tx checksum

def _set_tx_checksum(ifname: str, enabled: bool) -> None:
    """``ethtool -K <ifname> tx on|off`` for a link in this process's namespace."""
    value = ctypes.create_string_buffer(struct.pack("II", _ETHTOOL_STXCSUM, 1 if enabled else 0))
    ifreq = struct.pack("16sP", ifname.encode(), ctypes.addressof(value))
    ifreq += b"\0" * (40 - len(ifreq))   # sizeof(struct ifreq) on 64-bit Linux
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            fcntl.ioctl(sock.fileno(), _SIOCETHTOOL, ifreq)
        except OSError as exc:
            raise NetnsError(f"cannot turn tx checksum offload {'on' if enabled else 'off'} "
                             f"on {ifname}: {exc.strerror}") from None


def _tx_checksum_script(ifname: str) -> str:
    """Python source that prints 0/1 for ETHTOOL_GTXCSUM of ``ifname`` (run inside a namespace)."""
    return (
        "import ctypes,fcntl,socket,struct\n"
        f"v=ctypes.create_string_buffer(struct.pack('II',{_ETHTOOL_GTXCSUM},0))\n"
        f"r=struct.pack('16sP',{ifname!r}.encode(),ctypes.addressof(v));r+=b'\\0'*(40-len(r))\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        f"fcntl.ioctl(s.fileno(),{_SIOCETHTOOL},r)\n"
        "print(struct.unpack('II',v.raw[:8])[1])\n"
    )


def tx_checksum_enabled(netns: str, ifname: str = "eth0") -> bool:
    """Whether TX checksum offload is on for ``ifname`` inside ``netns``."""
    out = exec_in(netns, sys.executable, "-c", _tx_checksum_script(ifname)).stdout.strip()
    return out == "1"


# --------------------------------------------------------------- instances

def _parse_addresses(addresses: list[str]) -> list[ipaddress.IPv4Interface | ipaddress.IPv6Interface]:
    parsed = []
    for text in addresses:
        if "/" not in text:
            raise ValueError(f"address {text!r} needs a prefix length (CIDR, e.g. 10.0.0.10/24)")
        parsed.append(ipaddress.ip_interface(text))
    return parsed


def add_address(netns: str, address: str) -> None:
    """Add one more address (CIDR; IPv6 with nodad) to eth0 of ``netns``, e.g. to
    send from a spoofed source with ``ping(..., source=...)``. Idempotent."""
    iface = ipaddress.ip_interface(address)
    extra = ["nodad"] if iface.version == 6 else []
    _ip("addr", "replace", str(iface), "dev", "eth0", *extra, netns=netns)


def add_instance(daemons: OvnDaemons, netns: str, iface_id: str, mac: str, addresses: list[str],
                 gateways: list[str], mtu: int = 1400) -> None:
    """Create network namespace ``netns`` attached to br-int as logical port ``iface_id``.

    Creates the namespace and a veth pair (host end :func:`host_ifname`,
    <= 15 chars), moves one end into the namespace as ``eth0`` with ``mac``
    and TX checksum offload off, assigns ``addresses`` (CIDR strings, IPv4
    and/or IPv6; IPv6 with nodad), brings up lo and eth0, adds default routes
    via ``gateways`` (one per IP version at most), and adds the host end to
    br-int with ``external_ids:iface-id=<iface_id>``. Idempotent: an existing
    instance of the same name is brought to this state (extra addresses are
    kept), and one whose veth was cut (chassis restarted) is re-attached.
    Refuses to adopt a namespace that was not created here. Needs the chassis
    running (``daemons.start(chassis=True)``).
    """
    _validate_netns(netns)
    if not _MAC_RE.match(mac):
        raise ValueError(f"invalid MAC address {mac!r}")
    parsed = _parse_addresses(addresses)
    gws = [ipaddress.ip_address(gw) for gw in gateways]
    if len({gw.version for gw in gws}) != len(gws):
        raise ValueError("at most one gateway per IP version")
    if not 68 <= mtu <= 65535:
        raise ValueError(f"invalid MTU {mtu}")
    host = host_ifname(netns)
    temp = _temp_ifname(netns)
    alias = _alias(netns)
    chassis = daemons.chassis_netns
    if not netns_exists(chassis) or not daemons.running(chassis=True):
        raise NetnsError(f"the chassis of {daemons.state_dir} is not running: start(chassis=True) first")

    created_netns = False
    if netns_exists(netns):
        if not _owned_netns(netns):
            raise NetnsError(f"network namespace {netns} exists and was not created by netpeer; refusing to use it")
    else:
        _ip("netns", "add", netns)
        created_netns = True
    try:
        if _link_alias("eth0", netns) != alias:
            # Leftovers of an interrupted attempt.
            if _link_alias(temp) == alias:
                _ip("link", "del", "dev", temp)
            if _link_alias(host, chassis) == alias:
                _ip("link", "del", "dev", host, netns=chassis)
            if _link_alias(host, chassis) is not None:
                raise NetnsError(f"a link named {host} already exists in {chassis} and is not netpeer's")
            _ip("link", "add", host, "netns", chassis, "mtu", str(mtu),
                "type", "veth", "peer", "name", temp, "mtu", str(mtu))
            _ip("link", "set", "dev", host, "alias", alias, netns=chassis)
            _ip("link", "set", "dev", temp, "alias", alias)
            _set_tx_checksum(temp, False)
            _ip("link", "set", "dev", temp, "netns", netns)
            _ip("link", "set", "dev", temp, "name", "eth0", netns=netns)
        _ip("link", "set", "dev", "lo", "up", netns=netns)
        _ip("link", "set", "dev", "eth0", "address", mac, "mtu", str(mtu), netns=netns)
        for iface in parsed:
            extra = ["nodad"] if iface.version == 6 else []
            _ip("addr", "replace", str(iface), "dev", "eth0", *extra, netns=netns)
        _ip("link", "set", "dev", "eth0", "up", netns=netns)
        for gw in gws:
            _ip(f"-{gw.version}", "route", "replace", "default", "via", str(gw), "dev", "eth0", netns=netns)
        # The host end only carries frames for OVS: no IPv6 link-local chatter.
        _ip("link", "set", "dev", host, "addrgenmode", "none", netns=chassis)
        _ip("link", "set", "dev", host, "mtu", str(mtu), "up", netns=chassis)
        daemons.vsctl("--may-exist", "add-port", daemons.bridge, host, "--",
                      "set", "Interface", host, f"external_ids:iface-id={iface_id}",
                      f"external_ids:netpeer-netns={netns}")
    except BaseException:
        if created_netns:
            _delete_links_and_netns(netns, chassis)
        raise


def wait_instance_up(daemons: OvnDaemons, netns: str, timeout: float = 15.0) -> None:
    """Block until ovn-controller has claimed the instance's port and installed
    its flows (``external_ids:ovn-installed=true`` on the OVS interface).

    ``--wait=hv sync`` alone is not enough right after an attach: it tracks NB
    changes, not the local OVS interface appearing. Needs the logical switch
    port to exist."""
    host = host_ifname(netns)
    try:
        daemons.vsctl("wait-until", "Interface", host,
                      "external_ids:ovn-installed=true", timeout=timeout)
    except OvnDaemonError as exc:
        raise NetnsError(f"instance {netns} ({host}) not up after {timeout:.0f}s: is there a logical switch "
                         f"port named by its iface-id? ({exc})") from None


def _delete_links_and_netns(netns: str, chassis: str) -> None:
    alias = _alias(netns)
    host = host_ifname(netns)
    if netns_exists(chassis) and _link_alias(host, chassis) == alias:
        _ip("link", "del", "dev", host, netns=chassis, check=False)
    if _link_alias(_temp_ifname(netns)) == alias:
        _ip("link", "del", "dev", _temp_ifname(netns), check=False)
    if netns_exists(netns) and _owned_netns(netns):
        _ip("netns", "del", netns, check=False)
        for _ in range(50):   # the namespace's links go away asynchronously
            if not netns_exists(netns):
                break
            time.sleep(0.02)


def delete_instance(daemons: OvnDaemons, netns: str) -> None:
    """Remove the br-int port, the veth pair and the namespace of ``netns``.

    Safe when any of them is absent or the chassis is not running. Only
    removes what :func:`add_instance` created (checked by alias); raises
    NetnsError for a namespace of that name that is not netpeer's.
    """
    _validate_netns(netns)
    host = host_ifname(netns)
    if daemons.running(chassis=True):
        owner = daemons.vsctl("--bare", "--columns=external_ids", "find", "Interface", f"name={host}").strip()
        if owner and f"netpeer-netns={netns}" in owner:
            daemons.vsctl("--if-exists", "del-port", daemons.bridge, host)
    if netns_exists(netns) and not _owned_netns(netns):
        raise NetnsError(f"network namespace {netns} was not created by netpeer; not deleting it")
    _delete_links_and_netns(netns, daemons.chassis_netns)


# -------------------------------------------------------------------- ping

_PY_PING = r"""
import ipaddress, os, select, socket, struct, sys, time
dst, count, timeout, src, size = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
v6 = ipaddress.ip_address(dst).version == 6
if v6:
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    if size >= 0:
        s.setsockopt(socket.IPPROTO_IPV6, 23, 2)  # IPV6_MTU_DISCOVER = IPV6_PMTUDISC_DO
        s.setsockopt(socket.IPPROTO_IPV6, 62, 1)  # IPV6_DONTFRAG
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    if size >= 0:
        s.setsockopt(socket.IPPROTO_IP, 10, 2)    # IP_MTU_DISCOVER = IP_PMTUDISC_DO
if src:
    s.bind((src, 0))
ident = os.getpid() & 0xFFFF
def csum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF
ok = 0
for seq in range(count):
    payload = b"netpeer-ping" if size < 0 else bytes(i & 0xFF for i in range(size))
    kind = 128 if v6 else 8
    header = struct.pack("!BBHHH", kind, 0, 0, ident, seq)
    if not v6:  # the kernel fills in the ICMPv6 checksum
        header = struct.pack("!BBHHH", kind, 0, csum(header + payload), ident, seq)
    s.sendto(header + payload, (dst, 0))
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([s], [], [], left)[0]:
            break
        data, addr = s.recvfrom(65536)
        if not v6:
            data = data[(data[0] & 0x0F) * 4:]
        if ipaddress.ip_address(addr[0].split("%")[0]) != ipaddress.ip_address(dst) or len(data) < 8:
            continue
        rtype, _, _, rid, rseq = struct.unpack("!BBHHH", data[:8])
        if rtype == (129 if v6 else 0) and rid == ident and rseq == seq:
            ok += 1
            break
sys.exit(0 if ok else 1)
"""


def ping(netns: str, address: str, count: int = 1, timeout: float = 2.0, source: str | None = None,
         size: int | None = None) -> bool:
    """True when at least one of ``count`` ICMP echo requests from ``netns`` to
    ``address`` gets a reply within ``timeout`` seconds each. ``source`` picks
    the source address (``ping -I``), e.g. a secondary, spoofed address;
    ``size`` sets the ICMP payload length and forbids fragmentation (``ping
    -M do -s``), to probe the MTU (payload = MTU - 28 for IPv4, - 48 for IPv6)."""
    ip = ipaddress.ip_address(address)
    ping_bin = shutil.which("ping") or shutil.which("ping", path="/usr/bin:/bin")
    limit = count * (timeout + 1) + 10
    if ping_bin:
        argv = [ping_bin, f"-{ip.version}", "-n", "-q", "-c", str(count), "-W", f"{timeout:g}"]
        if count > 1:
            argv += ["-i", "0.2"]
        if source:
            argv += ["-I", source]
        if size is not None:
            argv += ["-M", "do", "-s", str(size)]
        argv.append(str(ip))
    else:
        argv = [sys.executable, "-c", _PY_PING, str(ip), str(count), f"{timeout:g}", source or "",
                str(-1 if size is None else size)]
    return exec_in(netns, *argv, check=False, timeout=limit).returncode == 0


def echo_requests_received(netns: str, version: int = 4) -> int:
    """How many ICMP (``version=4``) or ICMPv6 (``6``) echo requests the kernel of
    ``netns`` has received so far (from /proc/net/snmp{,6}, which are per
    namespace): a way to tell that a packet arrived even when no reply can
    make it back."""
    if version == 4:
        text = exec_in(netns, "cat", "/proc/net/snmp").stdout
        rows = [line.split()[1:] for line in text.splitlines() if line.startswith("Icmp:")]
        if len(rows) < 2:
            raise NetnsError(f"no Icmp counters in /proc/net/snmp of {netns}")
        return int(dict(zip(rows[0], rows[1]))["InEchos"])
    text = exec_in(netns, "cat", "/proc/net/snmp6").stdout
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "Icmp6InEchos":
            return int(parts[1])
    raise NetnsError(f"no Icmp6InEchos counter in /proc/net/snmp6 of {netns}")


class Pinger:
    """``ping -D -i 0.01`` from inside a namespace; tells when the first reply came."""

    def __init__(self, netns: str, address: str):
        ping = shutil.which("ping") or "/usr/bin/ping"
        self.proc = subprocess.Popen([_ip_binary(), "netns", "exec", netns, ping, "-D", "-n", "-i", "0.01", "-W", "1",
                                      address], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def first_reply(self, timeout: float) -> float | None:
        """Wall-clock time (time.time()) of the first echo reply."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            line = fd.readline()
            if not line:
                break
            if "bytes from" in line and line.startswith("["):
                return float(line[1:line.index("]")])
        return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
