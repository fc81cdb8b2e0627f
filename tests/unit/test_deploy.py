"""What an operator deploys per site (deploy/): the systemd units of
netpeerd, ovn-ic and the WireGuard gateway, and the example files they read.
No systemd runs them here; instead ``systemd-analyze verify`` checks them,
every command and flag they run is checked against this tree's CLI and the
tools' own help, and every path against the runbook that installs them
(docs/runbook-add-site.md) and against what the unit lets netpeerd write."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from netpeer.cli.main import build_parser
from netpeer.config import Config

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
ETC = ROOT / "deploy" / "etc" / "netpeer"
RUNBOOK = ROOT / "docs" / "runbook-add-site.md"
INSTANCE = "wg-region"
#: What the runbook installs that a test machine need not have.
INSTALLED = ("/opt/netpeer/bin/netpeer", "/usr/local/bin/wireguard-go", "/usr/bin/wg")
#: wg(8)'s commands and the keys of its configuration format (wireguard-tools), when wg is not installed.
WG_COMMANDS = ("show", "showconf", "set", "setconf", "addconf", "syncconf", "genkey", "genpsk", "pubkey")
WG_KEYS = {"Interface": {"PrivateKey", "ListenPort", "FwMark"},
           "Peer": {"PublicKey", "PresharedKey", "AllowedIPs", "Endpoint", "PersistentKeepalive"}}


def unit_files() -> list[Path]:
    return sorted(UNITS.glob("*.service"))


def entries(path: Path) -> list[tuple[str, str, str]]:
    """(section, key, value) of a unit file, in order (keys may repeat)."""
    out, section, pending = [], "", ""
    for raw in path.read_text().splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        out.append((section, key.strip(), value.strip()))
    return out


def env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as systemd reads them (a comment takes a line of its own)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        key, eq, value = line.partition("=")
        assert eq and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key), f"{path}: {line!r}"
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        assert "#" not in value, f"{path}: {key}: systemd keeps an inline comment in the value: {value!r}"
        out[key] = value
    return out


def local(path: str) -> Path:
    """Where this tree keeps the example of an installed /etc/netpeer file."""
    assert path.startswith("/etc/netpeer/"), path
    return ETC / path[len("/etc/netpeer/"):]


def environment(path: Path) -> dict[str, str]:
    env = {"MAINPID": "4242"}
    for section, key, value in entries(path):
        if key == "Environment":
            env.update(dict(item.split("=", 1) for item in shlex.split(value)))
        elif key == "EnvironmentFile":
            env.update(env_file(local(value.lstrip("-").replace("%i", INSTANCE))))
    return env


def commands(path: Path) -> list[tuple[str, list[str]]]:
    """(key, argv) of every Exec* line, with specifiers and variables
    substituted as systemd does (``$X`` alone: split into words; ``${X}``: in place)."""
    env = environment(path)
    out = []
    for section, key, value in entries(path):
        if not key.startswith("Exec"):
            continue
        value = value.lstrip("-@+!:").replace("%i", INSTANCE).replace("%%", "%")
        argv = []
        for word in shlex.split(value.replace("$$", "\0")):
            whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
            if whole:
                assert whole.group(1) in env, f"{path.name}: {key} uses ${whole.group(1)}, which nothing sets"
                argv += env[whole.group(1)].split()
                continue
            for name in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", word):
                assert name in env, f"{path.name}: {key} uses ${{{name}}}, which nothing sets"
            argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env[m.group(1)], word).replace("\0", "$"))
        out.append((key, argv))
    return out


def test_the_units_pass_systemd_analyze_verify(tmp_path):
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze is missing (Debian package systemd)"
    copies = []
    for path in unit_files():
        text = path.read_text()
        for installed in INSTALLED:   # the unit as it is, but with what this machine has at those paths
            if not os.access(installed, os.X_OK):
                text = text.replace(installed, "/bin/true")
        name = path.name.replace("@.service", f"@{INSTANCE}.service")
        (tmp_path / name).write_text(text)
        copies.append(str(tmp_path / name))
    proc = subprocess.run([tool, "verify", *copies], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc.stdout + proc.stderr


def test_every_command_and_flag_exists():
    seen = set()
    for path in unit_files():
        for key, argv in commands(path):
            tool = argv[0]
            seen.add(tool)
            assert tool.startswith("/"), f"{path.name}: {key}: {tool} is not an absolute path"
            if tool not in INSTALLED:
                assert os.access(tool, os.X_OK), f"{path.name}: {key}: {tool} is not on this machine"
            if tool.endswith("/netpeer"):
                try:
                    args = build_parser().parse_args(argv[1:])
                except SystemExit:
                    pytest.fail(f"{path.name}: {key}: `netpeer {' '.join(argv[1:])}` is refused by this tree's CLI")
                assert args.command == "serve"
                Config.load(local(args.config))   # the example it names is a valid configuration
            elif tool.endswith("/ovn-ic"):
                usage = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=30).stdout
                for word in argv[1:]:
                    assert word.startswith("-"), f"{path.name}: ovn-ic takes options only, not {word!r}"
                    name, eq, value = word.partition("=")
                    known = "-vSPEC" in usage if name.startswith("-v") else re.search(rf"\s{re.escape(name)}\b", usage)
                    assert known, f"{path.name}: ovn-ic has no option {name}"
                    assert not eq or value, f"{path.name}: ovn-ic {name}= is empty"
            elif tool.endswith("/wireguard-go"):
                assert len(argv) == 2 and re.fullmatch(r"[a-z0-9-]{1,15}", argv[1]), argv   # wireguard-go INTERFACE
            elif tool.endswith("/wg"):
                found = shutil.which("wg")
                known = subprocess.run([found, "--help"], capture_output=True, text=True).stdout.split() if found \
                    else WG_COMMANDS
                assert argv[1] in known and argv[2] == INSTANCE, argv
                conf = local(argv[3])
                section = ""
                for line in conf.read_text().splitlines():
                    line = line.split("#", 1)[0].strip()
                    if line.startswith("["):
                        section = line.strip("[]")
                    elif line:
                        assert line.split("=")[0].strip() in WG_KEYS[section], f"{conf}: wg setconf refuses {line!r}"
            elif tool == "/bin/sh":
                assert argv[1] == "-ec"
                check = subprocess.run(["/bin/sh", "-n", "-c", argv[2]], capture_output=True, text=True)
                assert check.returncode == 0, f"{path.name}: {key}: {check.stderr}"
    assert {"/opt/netpeer/bin/netpeer", "/usr/bin/ovn-ic", "/usr/local/bin/wireguard-go", "/usr/bin/wg"} <= seen


def test_paths_agree_with_the_runbook_and_with_what_netpeerd_may_write():
    runbook = RUNBOOK.read_text()
    for path in unit_files():
        assert f"deploy/systemd/{path.name}" in runbook, f"the runbook does not install {path.name}"
        values = " ".join(value for section, key, value in entries(path))
        for found in re.findall(r"(/(?:etc|var/lib|run|opt|usr/local)/[\w.@%/-]*\w)", values):
            found = found.replace("%i", INSTANCE)
            assert found in runbook, f"{path.name} names {found}, which the runbook never mentions"
            if found.startswith("/etc/netpeer/") and "." in found.rsplit("/", 1)[-1]:
                assert local(found).exists() or found.endswith((".crt", ".key", ".secret", ".token")), found
    unit = {key: value for section, key, value in entries(UNITS / "netpeerd.service")}
    assert (unit["User"], unit["ProtectSystem"], unit["NoNewPrivileges"]) == ("netpeer", "strict", "yes")
    assert unit["ExecReload"] == "/bin/kill -HUP $MAINPID"
    writable = [Path(p) for p in unit["ReadWritePaths"].split()]
    assert Path("/var/lib") / unit["StateDirectory"] in writable and Path("/run") / unit["RuntimeDirectory"] in writable
    config = Config.load(ETC / "netpeerd.toml")
    socket = Path(config.listen.removeprefix("unix://"))
    for what in (Path(config.store), socket):
        assert any(what.is_relative_to(w) for w in writable), f"netpeerd.service does not let netpeerd write {what}"
    for name in ("site_cert", "site_key", "site_ca", "admin_token_file"):
        assert str(getattr(config, name)).startswith("/etc/netpeer/") and str(getattr(config, name)) in runbook
