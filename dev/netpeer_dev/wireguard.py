"""Userspace WireGuard for the multi-site dev stack: keys, wireguard-go, its UAPI.

The kernel of the machines netpeer is developed on has no WireGuard module,
so each site router runs ``wireguard-go`` (built from the Go module proxy by
``scripts/install-wireguard.sh`` and cached under ``~/.cache/netpeer``).

- Keys: one Curve25519 key pair per site router, made here (RFC 7748 X25519
  in Python, no ``wg`` binary), stored 0600 in a 0700 directory, handed to
  wireguard-go over its UAPI socket, never logged or echoed in an error,
  deleted by :meth:`WireGuard.stop`.
- UAPI: the short text protocol of wireguard-go's control socket
  (``set=1``/``get=1`` ... blank line, hex keys). The socket directory is
  compiled into the binary (the build script records it in ``socket-dir``
  next to ``bin``), so interface names must be unique on the machine.
- Processes: found again by pidfile, and only while the live process is
  wireguard-go for this very interface; stopped by that pid, never by name.

``NETPEER_WG_LOG_LEVEL=verbose`` makes wireguard-go log its handshakes to
``wireguard-go.log`` next to the key (keys are never logged).
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterable

from netpeer_dev.proc import alive, cmdline, find_binary

__all__ = [
    "WireGuardError", "WireGuard", "Peer", "PeerState", "generate_private_key", "x25519_public",
    "find_wireguard_go", "uapi", "DEFAULT_VERSION", "PORT",
]

PORT = 51820
MTU = 1420
DEFAULT_VERSION = "v0.0.0-20260522210424-ecfc5a8d5446"


class WireGuardError(RuntimeError):
    """wireguard-go could not be found, started, configured or read; one line, never a key."""


# ------------------------------------------------------------------ X25519 (RFC 7748)

_P = 2 ** 255 - 19
_A24 = 121665


def _clamp(k: bytes) -> int:
    b = bytearray(k)
    b[0] &= 248
    b[31] &= 127
    b[31] |= 64
    return int.from_bytes(b, "little")


def _x25519(k: bytes, u: bytes) -> bytes:
    """The X25519 function of RFC 7748 section 5 (a Montgomery ladder;
    constant time is not needed for a dev stack)."""
    scalar = _clamp(k)
    x1 = int.from_bytes(u, "little") & ((1 << 255) - 1)
    x2, z2, x3, z3, swap = 1, 0, x1, 1, 0
    for t in reversed(range(255)):
        bit = (scalar >> t) & 1
        swap ^= bit
        if swap:
            x2, x3, z2, z3 = x3, x2, z3, z2
        swap = bit
        a, b = (x2 + z2) % _P, (x2 - z2) % _P
        aa, bb = a * a % _P, b * b % _P
        e = (aa - bb) % _P
        c, d = (x3 + z3) % _P, (x3 - z3) % _P
        da, cb = d * a % _P, c * b % _P
        x3 = (da + cb) ** 2 % _P
        z3 = x1 * (da - cb) ** 2 % _P
        x2 = aa * bb % _P
        z2 = e * (aa + _A24 * e) % _P
    if swap:
        x2, x3, z2, z3 = x3, x2, z3, z2
    return (x2 * pow(z2, _P - 2, _P) % _P).to_bytes(32, "little")


def generate_private_key() -> bytes:
    """A new clamped Curve25519 private key (32 bytes), as ``wg genkey`` makes."""
    return _clamp(secrets.token_bytes(32)).to_bytes(32, "little")


def x25519_public(private: bytes) -> bytes:
    """The public key of a Curve25519 private key (what ``wg pubkey`` prints, as bytes)."""
    return _x25519(private, (9).to_bytes(32, "little"))


# ------------------------------------------------------------------ the binary

def find_wireguard_go() -> tuple[str, str]:
    """(path of wireguard-go, its compiled-in UAPI socket directory).

    ``$NETPEER_WIREGUARD_GO`` if set, else the cache of
    ``scripts/install-wireguard.sh`` (``$NETPEER_CACHE_DIR`` or
    ~/.cache/netpeer, ``$WIREGUARD_GO_VERSION`` or the default version).
    Raises WireGuardError naming what to run when it is missing."""
    explicit = os.environ.get("NETPEER_WIREGUARD_GO")
    if explicit:
        binary = Path(explicit)
    else:
        cache = Path(os.environ.get("NETPEER_CACHE_DIR") or Path.home() / ".cache" / "netpeer")
        version = os.environ.get("WIREGUARD_GO_VERSION") or DEFAULT_VERSION
        binary = cache / "wireguard-go" / version / "bin" / "wireguard-go"
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise WireGuardError(f"wireguard-go not found at {binary}: run scripts/install-wireguard.sh "
                             f"(or set NETPEER_WIREGUARD_GO)")
    marker = binary.parent.parent / "socket-dir"
    if not marker.is_file():
        raise WireGuardError(f"{marker} is missing: rebuild with scripts/install-wireguard.sh, which records "
                             f"the UAPI socket directory compiled into wireguard-go")
    return str(binary), marker.read_text().strip()


def uapi(sock_path: str | os.PathLike, request: str, timeout: float = 5.0) -> str:
    """One UAPI exchange (``set=1``/``get=1`` ... blank line); the answer text.
    Raises WireGuardError on a non-zero ``errno`` (the request, which may hold
    a private key, is never part of the message)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(sock_path))
            s.sendall(request.encode())
            data = b""
            while not data.endswith(b"\n\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        raise WireGuardError(f"wireguard-go UAPI at {sock_path}: {exc.strerror or exc}") from None
    text = data.decode()
    errno = re.search(r"^errno=(-?\d+)$", text, re.M)
    if errno is None or errno.group(1) != "0":
        raise WireGuardError(f"wireguard-go UAPI at {sock_path} answered errno={errno.group(1) if errno else '?'}")
    return text


# ------------------------------------------------------------------ one router

@dataclasses.dataclass(frozen=True)
class Peer:
    """A WireGuard peer of a router: its public key, UDP endpoint and the prefixes behind it."""

    public_key: bytes
    endpoint: str                 # "10.254.0.2:51820"
    allowed_ips: tuple[str, ...]  # CIDRs


@dataclasses.dataclass(frozen=True)
class PeerState:
    """What wireguard-go reports of one peer (``get=1``); never a key."""

    endpoint: str | None
    latest_handshake: float | None   # seconds since the epoch; None: never
    rx_bytes: int
    tx_bytes: int


class WireGuard:
    """One wireguard-go serving interface ``interface`` inside network
    namespace ``netns``; key, pidfile and log in ``directory`` (made 0700).

    ``binary``/``socket_dir`` default to :func:`find_wireguard_go`."""

    def __init__(self, directory: str | os.PathLike, netns: str, interface: str,
                 binary: str | None = None, socket_dir: str | None = None) -> None:
        if len(interface) > 15:
            raise ValueError(f"interface name {interface!r} is longer than 15 characters")
        self.dir = Path(directory).absolute()
        self.netns = netns
        self.interface = interface
        self._binary = binary
        self._socket_dir = socket_dir
        self._proc: subprocess.Popen | None = None

    # ------------------------------------------------------------ paths
    def _tool(self) -> tuple[str, str]:
        if self._binary is None or self._socket_dir is None:
            self._binary, self._socket_dir = find_wireguard_go()
        return self._binary, self._socket_dir

    @property
    def key_file(self) -> Path:
        """The private key (hex, 0600)."""
        return self.dir / "private.key"

    @property
    def pidfile(self) -> Path:
        return self.dir / "wireguard-go.pid"

    @property
    def log_file(self) -> Path:
        return self.dir / "wireguard-go.log"

    @property
    def uapi_socket(self) -> Path:
        """``<compiled-in socket dir>/<interface>.sock``."""
        return Path(self._tool()[1]) / f"{self.interface}.sock"

    # ------------------------------------------------------------ keys
    def public_key(self) -> bytes:
        """The router's public key; the key pair is made (0600) on first use."""
        return x25519_public(self._private_key())

    def _private_key(self) -> bytes:
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        if not self.key_file.exists():
            fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(generate_private_key().hex() + "\n")
        return bytes.fromhex(self.key_file.read_text().strip())

    # ------------------------------------------------------------ process
    @property
    def pid(self) -> int | None:
        """The live pid of this interface's wireguard-go, or None."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if self._proc is not None and self._proc.pid == pid:
            self._proc.poll()   # reap it if it died
        if pid <= 0 or not alive(pid):
            return None
        cmd = cmdline(pid)
        if not cmd or not cmd[0].endswith("wireguard-go") or self.interface not in cmd:
            return None
        return pid

    def start(self, timeout: float = 30.0) -> None:
        """Start wireguard-go (if not running), wait for its UAPI socket, set
        the interface's MTU (1420) and bring it up. Idempotent."""
        binary, _ = self._tool()
        if not Path("/dev/net/tun").exists():
            raise WireGuardError("/dev/net/tun is missing: wireguard-go needs it")
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        if self.pid is None:
            sock = self.uapi_socket
            sock.parent.mkdir(parents=True, exist_ok=True)
            sock.unlink(missing_ok=True)
            env = dict(os.environ, LOG_LEVEL=os.environ.get("NETPEER_WG_LOG_LEVEL", "error"),
                       WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD="1")
            with open(self.log_file, "a") as log:
                self._proc = subprocess.Popen([find_binary("ip"), "netns", "exec", self.netns, binary, "-f",
                                               self.interface], stdin=subprocess.DEVNULL, stdout=log,
                                              stderr=subprocess.STDOUT, env=env, start_new_session=True)
            self.pidfile.write_text(f"{self._proc.pid}\n")
            deadline = time.monotonic() + timeout
            while not sock.exists():
                if self._proc.poll() is not None:
                    raise WireGuardError(f"wireguard-go for {self.interface} exited ({self._proc.returncode}); "
                                         f"see {self.log_file}")
                if time.monotonic() > deadline:
                    raise WireGuardError(f"wireguard-go for {self.interface} made no UAPI socket at {sock}")
                time.sleep(0.01)
        subprocess.run([find_binary("ip"), "-n", self.netns, "link", "set", self.interface, "mtu", str(MTU), "up"],
                       check=True, capture_output=True, timeout=30)

    def configure(self, peers: Iterable[Peer], listen_port: int = PORT) -> None:
        """Private key, listen port and exactly ``peers`` (replacing any others),
        without keepalives (see :meth:`set_keepalive`)."""
        lines = ["set=1", f"private_key={self._private_key().hex()}", f"listen_port={listen_port}",
                 "replace_peers=true"]
        for peer in peers:
            lines += [f"public_key={peer.public_key.hex()}", f"endpoint={peer.endpoint}", "replace_allowed_ips=true"]
            lines += [f"allowed_ip={cidr}" for cidr in peer.allowed_ips]
        uapi(self.uapi_socket, "\n".join(lines) + "\n\n")

    def add_peers(self, peers: Iterable[Peer]) -> None:
        """Adds (or updates) these peers, leaving the others and their
        sessions alone (``wg set IFACE peer KEY endpoint ... allowed-ips ...``)."""
        lines = ["set=1"]
        for peer in peers:
            lines += [f"public_key={peer.public_key.hex()}", f"endpoint={peer.endpoint}", "replace_allowed_ips=true"]
            lines += [f"allowed_ip={cidr}" for cidr in peer.allowed_ips]
        if len(lines) > 1:
            uapi(self.uapi_socket, "\n".join(lines) + "\n\n")

    def remove_peers(self, public_keys: Iterable[bytes]) -> None:
        """Removes these peers (``wg set IFACE peer KEY remove``)."""
        lines = ["set=1"]
        for key in public_keys:
            lines += [f"public_key={key.hex()}", "remove=true"]
        if len(lines) > 1:
            uapi(self.uapi_socket, "\n".join(lines) + "\n\n")

    def set_keepalive(self, public_keys: Iterable[bytes], interval: int) -> None:
        """Persistent keepalive of ``interval`` seconds towards these peers.
        Setting it sends a keepalive at once, which starts a handshake."""
        lines = ["set=1"]
        for key in public_keys:
            lines += [f"public_key={key.hex()}", "update_only=true", f"persistent_keepalive_interval={interval}"]
        if len(lines) > 1:
            uapi(self.uapi_socket, "\n".join(lines) + "\n\n")

    def peers(self) -> list[PeerState]:
        """Per peer: endpoint, latest handshake, bytes (``get=1``; keys are skipped)."""
        text = uapi(self.uapi_socket, "get=1\n\n")
        out: list[PeerState] = []
        current: dict[str, str] | None = None
        for line in text.splitlines() + ["public_key=end"]:
            key, _, value = line.partition("=")
            if key == "public_key":
                if current is not None:
                    sec = int(current.get("last_handshake_time_sec") or 0)
                    nsec = int(current.get("last_handshake_time_nsec") or 0)
                    out.append(PeerState(current.get("endpoint"), sec + nsec / 1e9 if sec else None,
                                         int(current.get("rx_bytes") or 0), int(current.get("tx_bytes") or 0)))
                current = {}
            elif current is not None and key in ("endpoint", "last_handshake_time_sec", "last_handshake_time_nsec",
                                                 "rx_bytes", "tx_bytes"):
                current[key] = value
        return out

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 5 s) by pid; remove the pidfile, UAPI socket and key."""
        pid = self.pid
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 5
            while self.pid is not None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.pid is not None:
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 5
                while self.pid is not None and time.monotonic() < deadline:
                    time.sleep(0.02)
            if self.pid is not None:
                raise WireGuardError(f"wireguard-go of {self.interface} (pid {pid}) did not die after SIGKILL")
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self._proc = None
        self.pidfile.unlink(missing_ok=True)
        try:
            self.uapi_socket.unlink(missing_ok=True)
        except WireGuardError:
            pass   # no binary any more: no socket directory to clean
        self.key_file.unlink(missing_ok=True)
