"""The certificates of the links between sites (mTLS, ``[interconnect]
cert, key, ca``): the region's CA, a site's certificate and key, what a
certificate says, and the checks netpeerd makes of them before it uses them.

Made by the ``openssl`` command (Debian's openssl package; no Python crypto
library is a dependency): ECDSA P-256 keys, SHA-256 signatures, and
``OPENSSL_CONF=/dev/null`` so that the machine's openssl.cnf adds nothing.
A site's certificate names the site as its common name (the other sites
refuse a caller whose certificate names another site than it claims) and
the addresses the other sites reach it at as subject alternative names
(their TLS check of the endpoint). Every file is written 0600 and replaced
atomically (a running netpeerd reading it on reload never sees half of
one); keys travel through a pipe, never through a command line, and are
never printed or quoted in an error.

``check_pair`` and ``check_ca`` use Python's ``ssl`` module only: netpeerd
needs no ``openssl`` command.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
import re
import secrets
import shutil
import ssl
import subprocess
from pathlib import Path

from netpeer.core import validate
from netpeer.errors import FailedPrecondition, InvalidArgument

__all__ = ["CA_CERT", "CA_KEY", "site_files", "CertInfo", "make_ca", "issue", "read", "check_pair", "check_ca"]

CA_CERT = "region-ca.crt"
CA_KEY = "region-ca.key"
CA_NAME = "netpeer region CA"
MAX_DAYS = 3650
_HOST = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                   r"[A-Za-z0-9])?)*$")
_KEY = re.compile(rb"-----BEGIN PRIVATE KEY-----.*?-----END PRIVATE KEY-----\n?", re.S)
_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", re.S)
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-sha256"]


def site_files(site: str) -> tuple[str, str]:
    """The file names of a site's certificate and key: ``site-<site>.crt``, ``site-<site>.key``."""
    return f"site-{site}.crt", f"site-{site}.key"


@dataclasses.dataclass(frozen=True)
class CertInfo:
    """What a certificate says (never anything of a key)."""

    path: str
    subject: str
    common_name: str
    issuer: str
    serial: str
    not_before: datetime.datetime
    not_after: datetime.datetime
    dns: tuple[str, ...]
    ips: tuple[str, ...]
    ca: bool
    sha256: str

    def expired(self, now: datetime.datetime | None = None) -> bool:
        return self.not_after <= (now or _now())

    def to_json(self, now: datetime.datetime | None = None) -> dict:
        now = now or _now()
        return {"file": self.path, "subject": self.subject, "common_name": self.common_name, "issuer": self.issuer,
                "serial": self.serial, "not_before": _iso(self.not_before), "not_after": _iso(self.not_after),
                "expires_in_days": int((self.not_after - now).total_seconds() // 86400), "expired": self.expired(now),
                "dns": list(self.dns), "ips": list(self.ips), "ca": self.ca, "sha256": self.sha256}


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def _iso(when: datetime.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------ openssl

def _openssl(args: list[str], what: str, field: str, value: object, stdin: bytes | None = None) -> bytes:
    """Runs ``openssl ARGS`` (``stdin``: its input); its stdout. An error
    names ``field`` and ``value`` with openssl's first line of complaint
    (which never holds key material)."""
    binary = shutil.which("openssl") or shutil.which("openssl", path="/usr/bin:/bin")
    if binary is None:
        raise FailedPrecondition("the openssl command is needed for site certificates and was not found on PATH "
                                 "(Debian package openssl)")
    try:
        proc = subprocess.run([binary, *args], input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                              capture_output=True, timeout=60, env={**os.environ, "OPENSSL_CONF": "/dev/null"})
    except subprocess.TimeoutExpired:
        raise FailedPrecondition(f"openssl took more than 60 s to {what}") from None
    if proc.returncode != 0:
        lines = [x for x in proc.stderr.decode(errors="replace").splitlines() if x.strip() and x.strip("-")]
        raise InvalidArgument.for_field(field, value, f"could not {what}: openssl says "
                                        f"{lines[0].strip() if lines else f'exit status {proc.returncode}'}")
    return proc.stdout


def _write_private(path: Path, data: bytes) -> None:
    """``data`` into ``path``, 0600, replaced atomically."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _out_dir(out: str | os.PathLike, make: bool = False) -> Path:
    """``--out``, checked; with ``make``, made (0700) if missing."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InvalidArgument.for_field("--out", str(out), "is not a directory")
    if make and not path.exists():
        path.mkdir(parents=True, mode=0o700)
    return path


def _split(pem: bytes, what: str) -> tuple[bytes, bytes]:
    key, cert = _KEY.search(pem), _CERT.search(pem)
    if key is None or cert is None:
        raise FailedPrecondition(f"openssl made no {what}")
    return key.group(0), cert.group(0)


def _days(days: int) -> int:
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise InvalidArgument.for_field("--days", days, f"must be a whole number of days from 1 to {MAX_DAYS}")
    return days


def _serial() -> str:
    return hex(secrets.randbits(127) | 1)   # random, positive, fits the 20 octets RFC 5280 allows


# ------------------------------------------------------------------ making

def make_ca(out: str | os.PathLike, days: int = MAX_DAYS) -> tuple[Path, Path]:
    """A new region CA in ``out`` (made 0700 if missing): ``region-ca.crt``
    and ``region-ca.key``, both 0600. Refuses to replace an existing one
    (every site's certificate hangs on it)."""
    _days(days)
    folder = _out_dir(out)
    cert, key = folder / CA_CERT, folder / CA_KEY
    for path in (cert, key):
        if path.exists():
            raise InvalidArgument.for_field("--out", str(out), f"holds a region CA already ({path.name}): every "
                                            "site's certificate depends on it; choose another directory to make a "
                                            "new one")
    pem = _openssl(["req", "-x509", "-new", *_EC, "-keyout", "-", "-out", "-", "-subj", f"/CN={CA_NAME}",
                    "-days", str(days), "-set_serial", _serial(),
                    "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                    "-addext", "subjectKeyIdentifier=hash"], "make a region CA", "--out", str(out))
    key_pem, cert_pem = _split(pem, "region CA")
    _out_dir(out, make=True)
    _write_private(key, key_pem)
    _write_private(cert, cert_pem)
    return cert, key


def issue(site: str, ca: str | os.PathLike, out: str | os.PathLike, dns: tuple[str, ...] = (),
          ips: tuple[str, ...] = (), days: int = 365, now: datetime.datetime | None = None) -> tuple[Path, Path]:
    """A certificate and key for ``site`` signed by the region CA in ``ca``,
    written to ``out`` as ``site-<site>.crt`` and ``site-<site>.key`` (0600,
    replacing those there: that is a rotation), and the CA's certificate
    next to them (``region-ca.crt``, what the site trusts). Common name: the
    site; subject alternative names: ``dns`` and ``ips``, the addresses the
    other sites reach it at (at least one). Nothing is written when a check
    fails."""
    validate.site("SITE", site)
    _days(days)
    names = []
    for name in dns:
        if not _HOST.match(name):
            raise InvalidArgument.for_field("--dns", name, "is not a DNS name (like site-east.example.net)")
        names.append(f"DNS:{name}")
    for address in ips:
        try:
            names.append(f"IP:{ipaddress.ip_address(address)}")
        except ValueError:
            raise InvalidArgument.for_field("--ip", address, "is not an IP address") from None
    if not names:
        raise InvalidArgument.for_field("--ip/--dns", "", f"is required: the address the other sites reach {site} "
                                        "at (its [interconnect] listen), which their TLS check compares")
    folder = Path(ca)
    ca_cert, ca_key = folder / CA_CERT, folder / CA_KEY
    for path in (ca_cert, ca_key):
        if not path.is_file():
            raise InvalidArgument.for_field("--ca", str(ca), f"holds no {path.name}: make a region CA with "
                                            f"`netpeer site cert ca --out {ca}`, or name the directory that has it")
    info = read(ca_cert, field="--ca")
    now = now or _now()
    if not info.ca:
        raise InvalidArgument.for_field("--ca", str(ca_cert), "is not a CA certificate (basicConstraints CA:TRUE)")
    if info.expired(now):
        raise InvalidArgument.for_field("--ca", str(ca_cert), f"expired on {_iso(info.not_after)}: make a new "
                                        "region CA and move the sites to it (docs/runbook-add-site.md)")
    if info.not_after < now + datetime.timedelta(days=days):
        left = int((info.not_after - now).total_seconds() // 86400)
        raise InvalidArgument.for_field("--days", days, f"would outlive the region CA, which expires on "
                                        f"{_iso(info.not_after)}: pass --days {max(left, 1)} or less, or move the "
                                        "sites to a new CA")
    target = _out_dir(out)
    pem = _openssl(["req", "-x509", "-new", *_EC, "-keyout", "-", "-out", "-", "-subj", f"/CN={site}",
                    "-days", str(days), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-set_serial", _serial(),
                    "-addext", "basicConstraints=critical,CA:FALSE",
                    "-addext", "keyUsage=critical,digitalSignature",
                    "-addext", "extendedKeyUsage=serverAuth,clientAuth",
                    "-addext", "subjectAltName=" + ",".join(names)], f"issue a certificate for {site}", "--ca", str(ca))
    key_pem, cert_pem = _split(pem, f"certificate for {site}")
    _out_dir(out, make=True)
    crt_name, key_name = site_files(site)
    _write_private(target / key_name, key_pem)
    _write_private(target / crt_name, cert_pem)
    if (target / CA_CERT).resolve() != ca_cert.resolve():
        _write_private(target / CA_CERT, ca_cert.read_bytes())
    return target / crt_name, target / key_name


# ------------------------------------------------------------------ reading

def read(path: str | os.PathLike, field: str = "FILE") -> CertInfo:
    """What the (first) certificate in ``path`` says. A file without one (a
    key, say) is refused without quoting it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidArgument.for_field(field, str(path), f"cannot be read ({exc.strerror})") from None
    cert = _CERT.search(data)
    if cert is None:
        raise InvalidArgument.for_field(field, str(path), "holds no PEM certificate")
    pem = cert.group(0)
    proc_args = ["x509", "-noout", "-subject", "-issuer", "-serial", "-dates", "-fingerprint", "-sha256",
                 "-nameopt", "RFC2253", "-dateopt", "iso_8601", "-ext", "subjectAltName,basicConstraints"]
    text = _openssl(proc_args, "be read as a certificate", field, str(path), stdin=pem).decode(errors="replace")
    fields: dict[str, str] = {}
    dns: list[str] = []
    ips: list[str] = []
    ca = False
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip() in ("subject", "issuer", "serial", "notBefore", "notAfter", "sha256 Fingerprint"):
            fields[key.strip()] = value.strip()
        elif line.strip().startswith("CA:"):
            ca = line.strip() == "CA:TRUE" or line.strip().startswith("CA:TRUE,")
        elif "DNS:" in line or "IP Address:" in line:
            for item in line.split(","):
                kind, _, value = item.strip().partition(":")
                if kind == "DNS":
                    dns.append(value.strip())
                elif kind == "IP Address":
                    ips.append(str(ipaddress.ip_address(value.strip())))
    common = next((part[3:] for part in _rdns(fields.get("subject", "")) if part.startswith("CN=")), "")
    return CertInfo(str(path), fields.get("subject", ""), common, fields.get("issuer", ""),
                    fields.get("serial", "").lower(), _when(fields.get("notBefore", "")),
                    _when(fields.get("notAfter", "")), tuple(dns), tuple(ips), ca, fields.get("sha256 Fingerprint", ""))


def _rdns(subject: str) -> list[str]:
    """The parts of an RFC 2253 name (commas escaped with a backslash stay inside)."""
    return [p.replace("\\,", ",") for p in re.split(r"(?<!\\),", subject)]


def _when(text: str) -> datetime.datetime:
    """openssl's ``-dateopt iso_8601`` (``2027-11-27 17:26:41Z``)."""
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)


# ------------------------------------------------------------------ checks before use

def check_pair(cert_field: str, cert: Path, key_field: str, key: Path) -> tuple[bytes, bytes]:
    """A certificate and its key, read and checked to belong together (so a
    reload with a wrong pair changes nothing); their bytes."""
    data = []
    for field, path in ((cert_field, cert), (key_field, key)):
        try:
            data.append(Path(path).read_bytes())
        except OSError as exc:
            raise InvalidArgument.for_field(field, str(path), f"cannot be read ({exc.strerror})") from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise InvalidArgument.for_field(key_field, str(key), f"is not the key of the certificate {cert}") from None
        raise InvalidArgument.for_field(cert_field, str(cert), f"and {key_field} {str(key)!r} are not a PEM "
                                        "certificate and its unencrypted key") from None
    return data[0], data[1]


def check_ca(field: str, path: Path) -> bytes:
    """A CA file (one certificate or several: a bundle while the region moves
    to a new CA), read and checked; its bytes."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=str(path))
    except ssl.SSLError:
        raise InvalidArgument.for_field(field, str(path), "holds no PEM certificate") from None
    except OSError as exc:
        raise InvalidArgument.for_field(field, str(path), f"cannot be read ({exc.strerror})") from None
    return path.read_bytes()
