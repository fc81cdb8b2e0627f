"""The nouns other packages contribute to ``netpeer`` (netpeer/cli/commands.py):
``netpeer dev`` comes from the dev tools through an entry point, and without
them it says in one line what to install."""

from __future__ import annotations

import subprocess
import sys

#: Runs the CLI as a process in which the dev tools cannot be imported.
WITHOUT_DEV = ("import sys\n"
               "sys.modules['netpeer_dev'] = None\n"
               "from netpeer.cli.main import main\n"
               "sys.exit(main(sys.argv[1:]))\n")


def netpeer(*args: str, prelude: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", prelude, *args] if prelude else [sys.executable, "-m", "netpeer.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_the_dev_tools_contribute_netpeer_dev():
    proc = netpeer("dev", "--help")
    assert proc.returncode == 0, proc.stderr
    for action in ("up", "down", "status", "site", "instance"):
        assert action in proc.stdout


def test_without_the_dev_tools_netpeer_dev_says_what_to_install():
    proc = netpeer("dev", "up", "--sites", "east,west", prelude=WITHOUT_DEV)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: netpeer dev: the dev tools (netpeer_dev) are not installed: "
                               "run `pip install -e .` in netpeer's source tree"), lines[0]


def test_without_the_dev_tools_the_other_commands_work():
    proc = netpeer("network", "--help", prelude=WITHOUT_DEV)
    assert proc.returncode == 0, proc.stderr
    assert "watch" in proc.stdout
    listed = netpeer("--help", prelude=WITHOUT_DEV)
    assert "{dev,serve,db,status,site,token,network,peering}" in listed.stdout
