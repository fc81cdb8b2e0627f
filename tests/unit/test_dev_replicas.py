"""``--replicas`` of ``netpeer dev up`` and what refuses it, before anything
runs: each refusal is one line naming the flag and the value, and nothing
is made (the state directory sits under a regular file, so any attempt to
make it would fail with another message). The stack itself, with replicas,
is tested in tests/sites/test_replicas.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from netpeer import errors
from netpeer_dev import region
from netpeer_dev.multisite import MultiSiteStack
from tests.support import short_tmpdir


@pytest.fixture
def nowhere():
    """A state directory that cannot be made: its parent is a regular file."""
    root = short_tmpdir("np-rp-")
    (root / "file").write_text("not a directory\n")
    try:
        yield root / "file" / "state"
        assert sorted(p.name for p in root.iterdir()) == ["file"]
        assert (root / "file").read_text() == "not a directory\n"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("args,message", [
    (("--sites", "east,west", "--replicas", "9"),
     "--replicas: 9 must be from 1 to 5 with --sites (1: one netpeerd per site, on SQLite)"),
    (("--sites", "east,west", "--replicas", "0"),
     "--replicas: 0 must be from 1 to 5 with --sites (1: one netpeerd per site, on SQLite)"),
    (("--ha", "--replicas", "1"),
     "--replicas: 1 must be from 2 to 5 with --ha (one netpeerd: netpeer dev up without --ha)"),
    (("--replicas", "3"),
     "--replicas: 3 needs --ha (replicas of a single site) or --sites (replicas of each site)"),
], ids=["sites-9", "sites-0", "ha-1", "alone"])
def test_replicas_that_make_no_sense_are_refused_in_one_line(nowhere, args, message) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "dev", "up", *args, "--state-dir", str(nowhere)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [f"error: {message}"], proc.stderr
    assert proc.stdout == ""


def test_site_add_and_retire_refuse_a_stack_with_replicas() -> None:
    root = short_tmpdir("np-rp-")
    try:
        multi = MultiSiteStack(root, ["east", "west", "north"], replicas=2)
        with pytest.raises(errors.FailedPrecondition) as exc:
            region.add_site(multi, "south", lambda m: None)
        assert str(exc.value) == (
            f"SITE: 'south': the stack in {root} runs 2 netpeerd replicas per site, and `netpeer dev site add` "
            "takes sites with one netpeerd: `netpeer dev down`, then `netpeer dev up --sites east,west,north,south "
            "--replicas 2`")
        with pytest.raises(errors.FailedPrecondition) as exc:
            region.retire_site(multi, "north", lambda m: None)
        assert str(exc.value) == (
            f"SITE: 'north': the stack in {root} runs 2 netpeerd replicas per site, and `netpeer dev site retire` "
            "takes sites with one netpeerd: `netpeer dev down`, then `netpeer dev up --sites east,west --replicas 2`")
        assert list(root.iterdir()) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)
