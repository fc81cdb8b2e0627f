"""``netpeer site cert ca|issue|show``: the region CA and the sites'
certificates, made by the real openssl command, read back by it, and the
one-line refusals of bad input (which write nothing)."""

from __future__ import annotations

import json
import re
import stat
import subprocess
from pathlib import Path

import pytest

from netpeer.cli.main import main

OPENSSL_ENV = {"OPENSSL_CONF": "/dev/null", "PATH": "/usr/bin:/bin"}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def show(capsys, path: Path) -> dict:
    code, out, err = run(capsys, "site", "cert", "show", str(path), "-o", "json")
    assert code == 0, err
    return json.loads(out)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def verify(ca: Path, cert: Path) -> str:
    proc = subprocess.run(["openssl", "verify", "-CAfile", str(ca), "-purpose", "sslserver", str(cert)],
                          capture_output=True, text=True, env=OPENSSL_ENV)
    return proc.stdout.strip() or proc.stderr.strip()


@pytest.fixture
def ca(tmp_path, capsys) -> Path:
    code, out, err = run(capsys, "site", "cert", "ca", "--out", str(tmp_path / "ca"))
    assert code == 0, err
    return tmp_path / "ca"


def test_a_region_ca_and_a_site_certificate_signed_by_it(tmp_path, capsys, ca):
    assert mode(ca) == 0o700 and mode(ca / "region-ca.crt") == 0o600 and mode(ca / "region-ca.key") == 0o600
    info = show(capsys, ca / "region-ca.crt")
    assert (info["ca"], info["subject"], info["expired"]) == (True, "CN=netpeer region CA", False)
    assert info["expires_in_days"] in (3649, 3650)   # whole days left: 3650 within the second it was made
    out_dir = tmp_path / "east"
    code, out, err = run(capsys, "site", "cert", "issue", "east", "--ca", str(ca), "--out", str(out_dir),
                         "--ip", "10.200.1.2", "--ip", "fd00::2", "--dns", "east.example.net", "--days", "90")
    assert code == 0, err
    crt, key = out_dir / "site-east.crt", out_dir / "site-east.key"
    assert {p.name: mode(p) for p in out_dir.iterdir()} == {"site-east.crt": 0o600, "site-east.key": 0o600,
                                                             "region-ca.crt": 0o600}
    assert (out_dir / "region-ca.crt").read_bytes() == (ca / "region-ca.crt").read_bytes()
    assert re.search(r"not after: +\S+ \(in (89|90) days\)", out) and "PRIVATE" not in out, out
    info = show(capsys, crt)
    assert (info["common_name"], info["issuer"], info["ca"], info["dns"], info["ips"]) == \
        ("east", "CN=netpeer region CA", False, ["east.example.net"], ["10.200.1.2", "fd00::2"])
    assert verify(ca / "region-ca.crt", crt) == f"{crt}: OK"
    # The key belongs to the certificate (the check netpeerd makes before it uses them).
    from netpeer.certs import check_pair
    check_pair("cert", crt, "key", key)
    # Issued again: a new key and serial over the same files (a rotation).
    before = (crt.read_bytes(), key.read_bytes(), info["serial"])
    code, out, err = run(capsys, "site", "cert", "issue", "east", "--ca", str(ca), "--out", str(out_dir),
                         "--ip", "10.200.1.2")
    assert code == 0, err
    assert crt.read_bytes() != before[0] and key.read_bytes() != before[1] and show(capsys, crt)["serial"] != before[2]
    assert not [p for p in out_dir.iterdir() if p.name.startswith(".")]   # no temporary file left


def test_keys_are_never_printed(tmp_path, capsys, ca):
    run(capsys, "site", "cert", "issue", "west", "--ca", str(ca), "--out", str(tmp_path / "w"), "--ip", "10.0.0.1")
    secret_lines = {line for p in (ca / "region-ca.key", tmp_path / "w" / "site-west.key")
                    for line in p.read_text().splitlines() if "-----" not in line}
    outputs = []
    for argv in (("show", str(ca / "region-ca.key")), ("show", str(tmp_path / "w" / "site-west.key")),
                 ("show", str(tmp_path / "w" / "site-west.crt")), ("show", str(tmp_path / "w" / "site-west.crt"),
                                                                  "-o", "json")):
        outputs.append(run(capsys, "site", "cert", *argv))
    code, out, err = outputs[0]
    assert code == 1 and err == f"error: FILE: '{ca / 'region-ca.key'}' holds no PEM certificate\n" and out == ""
    text = "".join(o + e for _, o, e in outputs)
    assert not [line for line in secret_lines if line in text] and "PRIVATE" not in text


def expired_ca(folder: Path) -> Path:
    """A CA that expired yesterday (openssl x509 -days -1)."""
    folder.mkdir()
    (folder / "ext").write_text("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n")
    for argv in (["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                  "region-ca.key", "-out", "ca.csr", "-subj", "/CN=old region CA"],
                 ["x509", "-req", "-in", "ca.csr", "-key", "region-ca.key", "-days", "-1", "-extfile", "ext",
                  "-out", "region-ca.crt"]):
        subprocess.run(["openssl", *argv], cwd=folder, check=True, capture_output=True, env=OPENSSL_ENV)
    return folder


def test_bad_input_is_refused_in_one_line_and_writes_nothing(tmp_path, capsys, ca):
    out_dir = tmp_path / "out"
    old = expired_ca(tmp_path / "old")
    short = tmp_path / "short"
    assert run(capsys, "site", "cert", "ca", "--out", str(short), "--days", "30")[0] == 0
    cases = [
        (("issue", "East", "--ca", str(ca), "--ip", "10.0.0.1"),
         "SITE: 'East' is not a valid site name"),
        (("issue", "east", "--ca", str(tmp_path / "none"), "--ip", "10.0.0.1"),
         f"--ca: '{tmp_path / 'none'}' holds no region-ca.crt: make a region CA with `netpeer site cert ca --out"),
        (("issue", "east", "--ca", str(old), "--ip", "10.0.0.1"),
         f"--ca: '{old / 'region-ca.crt'}' expired on "),
        (("issue", "east", "--ca", str(ca)),
         "--ip/--dns: '' is required: the address the other sites reach east at"),
        (("issue", "east", "--ca", str(ca), "--ip", "10.0.0.300"), "--ip: '10.0.0.300' is not an IP address"),
        (("issue", "east", "--ca", str(ca), "--dns", "east_1..x"), "--dns: 'east_1..x' is not a DNS name"),
        (("issue", "east", "--ca", str(ca), "--ip", "10.0.0.1", "--days", "3700"),
         "--days: 3700 must be a whole number of days from 1 to 3650"),
        (("issue", "east", "--ca", str(short), "--ip", "10.0.0.1", "--days", "31"),
         "--days: 31 would outlive the region CA, which expires on "),
        (("ca",), f"--out: '{ca}' holds a region CA already (region-ca.crt)"),
    ]
    for argv, words in cases:
        target = ca if argv[0] == "ca" else out_dir
        code, out, err = run(capsys, "site", "cert", *argv, "--out", str(target))
        assert code == 1 and err.startswith(f"error: {words}") and err.count("\n") == 1 and out == "", (argv, err)
    assert not out_dir.exists()
    assert sorted(p.name for p in ca.iterdir()) == ["region-ca.crt", "region-ca.key"]
    # A CA whose key is not its certificate's: openssl's reason, in one line.
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "region-ca.crt").write_bytes((ca / "region-ca.crt").read_bytes())
    (mixed / "region-ca.key").write_bytes((old / "region-ca.key").read_bytes())
    code, out, err = run(capsys, "site", "cert", "issue", "east", "--ca", str(mixed), "--out", str(out_dir),
                         "--ip", "10.0.0.1")
    assert code == 1 and err.count("\n") == 1 and "do not match" in err and not out_dir.exists(), err


def test_show_says_when_a_certificate_expired(tmp_path, capsys):
    old = expired_ca(tmp_path / "old")
    code, out, err = run(capsys, "site", "cert", "show", str(old / "region-ca.crt"))
    assert code == 0 and "subject:     CN=old region CA" in out and "(EXPIRED)" in out, err
    assert show(capsys, old / "region-ca.crt")["expired"] is True
