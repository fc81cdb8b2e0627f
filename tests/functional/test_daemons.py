"""Real OVN daemons started and stopped in a private state directory."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from netpeer_dev import proc as proc_mod
from netpeer_dev.daemons import OvnDaemonError, OvnDaemons
from tests.support import require_ovn, wait_until


CENTRAL = ("ovsdb-server-nb", "ovsdb-server-sb", "ovn-northd")
CHASSIS = ("ovsdb-server", "ovs-vswitchd", "ovn-controller")


def alive(pid: int) -> bool:
    """Exists and is not a zombie (PID 1 here reaps lazily)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZXx"


def _wait_dead(pid: int, timeout: float = 5.0) -> None:
    wait_until(lambda: not alive(pid), timeout, f"pid {pid} still alive")


def _running(d: OvnDaemons) -> dict[str, int]:
    return {s.name: s.pid for s in d.status() if s.running}


def _sb_has_datapath_for(d: OvnDaemons, switch: str) -> bool:
    out = d.sbctl("--bare", "--columns=external_ids", "list", "Datapath_Binding")
    return f"name={switch}" in out


def test_central_starts_and_answers(ovn: OvnDaemons) -> None:
    d = ovn
    assert set(_running(d)) == set(CENTRAL)
    for status in d.status():
        assert status.running == (status.name in CENTRAL)
        assert status.detail.startswith(str(d.state_dir))
    assert d.nb_remote == f"unix:{d.nb_socket}"
    assert d.nb_socket.is_socket() and d.sb_socket.is_socket()
    # NB and SB answer.
    assert d.nbctl("show") == ""
    d.sbctl("show")
    # northd is connected: an NB change reaches SB.
    d.nbctl("ls-add", "sw0")
    d.wait_sb_sync(timeout=10)
    assert _sb_has_datapath_for(d, "sw0")
    # ... and says it is the active northd.
    out = subprocess.run(["ovn-appctl", "-t", "ovn-northd", "status"], env=d.env(),
                         capture_output=True, text=True, timeout=10, check=True).stdout
    assert "active" in out
    # env() makes the plain tools talk to this instance without --db.
    plain = subprocess.run(["ovn-nbctl", "ls-list"], env=d.env(), capture_output=True, text=True,
                           timeout=10, check=True).stdout
    assert "sw0" in plain
    # Logs are in the state dir.
    for name in CENTRAL:
        assert d.log_file(name).parent == d.state_dir and d.log_file(name).exists()


def test_start_is_idempotent(ovn: OvnDaemons) -> None:
    d = ovn
    before = _running(d)
    d.nbctl("ls-add", "keep-me")
    d.start()
    assert _running(d) == before
    # A second object on the same state dir sees the same daemons and keeps them too.
    other = OvnDaemons(d.state_dir)
    other.start()
    assert _running(other) == before
    assert "keep-me" in d.nbctl("ls-list")


def test_stop_leaves_nothing(ovn: OvnDaemons) -> None:
    d = ovn
    pids = _running(d)
    assert len(pids) == 3
    d.stop()
    for pid in pids.values():
        assert not alive(pid), f"pid {pid} survived stop()"
    leftovers = sorted(p.name for p in d.state_dir.iterdir() if p.suffix in (".pid", ".sock", ".ctl"))
    assert leftovers == []
    assert all(not s.running for s in d.status())
    d.stop()  # safe when nothing runs
    OvnDaemons(d.state_dir / "never-created").stop()  # ... or the dir does not exist


def test_start_after_kill9_of_nb_recovers(ovn: OvnDaemons) -> None:
    d = ovn
    d.nbctl("ls-add", "survivor")
    d.wait_sb_sync(timeout=10)
    old = _running(d)
    os.kill(old["ovsdb-server-nb"], signal.SIGKILL)
    _wait_dead(old["ovsdb-server-nb"])
    # Stale pidfile and socket are left behind...
    assert (d.state_dir / "ovnnb_db.pid").exists() and d.nb_socket.exists()
    assert "ovsdb-server-nb" not in _running(d)
    started = time.monotonic()
    d.start(timeout=30)
    elapsed = time.monotonic() - started
    new = _running(d)
    assert set(new) == set(CENTRAL)
    assert new["ovsdb-server-nb"] != old["ovsdb-server-nb"]
    assert new["ovsdb-server-sb"] == old["ovsdb-server-sb"]
    assert new["ovn-northd"] == old["ovn-northd"]
    # The data survived and northd reconnected: a new change reaches SB.
    assert "survivor" in d.nbctl("ls-list")
    d.nbctl("ls-add", "after-restart")
    d.wait_sb_sync(timeout=10)
    assert _sb_has_datapath_for(d, "after-restart")
    assert elapsed < 30


def test_start_after_kill9_of_everything_recovers(ovn: OvnDaemons) -> None:
    d = ovn
    d.nbctl("ls-add", "survivor")
    old = _running(d)
    for pid in old.values():
        os.kill(pid, signal.SIGKILL)
    for pid in old.values():
        _wait_dead(pid)
    assert _running(d) == {}
    d.start(timeout=30)
    assert set(_running(d)) == set(CENTRAL)
    assert "survivor" in d.nbctl("ls-list")


def test_stale_pidfile_of_a_foreign_process_is_never_signalled(ovn: OvnDaemons) -> None:
    d = ovn
    d.stop()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (d.state_dir / "ovnnb_db.pid").write_text(f"{sleeper.pid}\n")
        assert "ovsdb-server-nb" not in _running(d)
        d.stop()
        assert sleeper.poll() is None, "stop() signalled a process that is not its daemon"
        d.start()
        assert set(_running(d)) == set(CENTRAL)
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_long_state_dir_is_rejected() -> None:
    with pytest.raises(OvnDaemonError, match="too long for unix sockets"):
        OvnDaemons("/tmp/" + "x" * 100)


def test_missing_binary_names_the_package(ovn_daemons: OvnDaemons, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(proc_mod, "_EXTRA_BIN_DIRS", ())
    with pytest.raises(OvnDaemonError, match=r"^ovsdb-tool not found: install the Debian package openvswitch-common$"):
        ovn_daemons.start()


def test_nbctl_error_is_one_clear_line(ovn: OvnDaemons) -> None:
    with pytest.raises(OvnDaemonError) as info:
        ovn.nbctl("lsp-add", "no-such-switch", "p0")
    assert "no-such-switch" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.chassis
def test_chassis_starts_registers_and_stops(ovn_daemons: OvnDaemons) -> None:
    require_ovn(chassis=True)
    d = ovn_daemons
    had_br_int = Path("/sys/class/net/br-int").exists()
    d.start(chassis=True)
    assert set(_running(d)) == set(CENTRAL + CHASSIS)
    assert d.system_id and d.system_id in d.sbctl("--bare", "--columns=name", "list", "Chassis")
    assert d.vsctl("get", "Bridge", "br-int", "datapath_type").strip() == "netdev"
    ids = d.vsctl("get", "Open_vSwitch", ".", "external_ids")
    for expected in (f'ovn-remote="{d.sb_remote}"', "ovn-encap-type=geneve", 'ovn-encap-ip="127.0.0.1"',
                     "ovn-bridge-datapath-type=netdev", f"system-id={d.system_id}"):
        assert expected in ids
    d.wait_hv_sync(timeout=10)
    # ovs-vswitchd and its taps live in the chassis namespace, not in the host's.
    assert d.chassis_netns_exists()
    links = subprocess.run(["ip", "-n", d.chassis_netns, "-o", "link"], capture_output=True, text=True,
                           check=True).stdout
    assert "br-int" in links and "ovs-netdev" in links
    # Idempotent with the chassis too; the chassis name is stable.
    before, name = _running(d), d.system_id
    d.start(chassis=True)
    assert _running(d) == before and d.system_id == name
    d.stop()
    for pid in before.values():
        assert not alive(pid)
    assert not [p for p in d.state_dir.iterdir() if p.suffix in (".pid", ".sock", ".ctl", ".mgmt", ".snoop")]
    assert not d.chassis_netns_exists(), "stop() left the chassis namespace behind"
    if not had_br_int:
        assert not Path("/sys/class/net/br-int").exists(), "a br-int tap appeared in the host namespace"
    # Restart after stop keeps the chassis name.
    d.start(chassis=True)
    assert d.system_id == name
    assert OvnDaemons(d.state_dir).system_id == name


@pytest.mark.chassis
def test_chassis_recovers_after_kill9_of_vswitchd_and_controller(ovn_daemons: OvnDaemons) -> None:
    require_ovn(chassis=True)
    d = ovn_daemons
    d.start(chassis=True)
    old = _running(d)
    for name in ("ovs-vswitchd", "ovn-controller"):
        os.kill(old[name], signal.SIGKILL)
        _wait_dead(old[name])
    d.start(chassis=True, timeout=30)
    new = _running(d)
    assert set(new) == set(CENTRAL + CHASSIS)
    assert new["ovs-vswitchd"] != old["ovs-vswitchd"] and new["ovn-controller"] != old["ovn-controller"]
    d.wait_hv_sync(timeout=10)


@pytest.mark.chassis
def test_two_chassis_coexist_on_one_host(ovn_daemons: OvnDaemons) -> None:
    """The userspace datapath's taps (ovs-netdev, br-int) would collide in one
    network namespace; each chassis has its own."""
    require_ovn(chassis=True)
    other_dir = tempfile.mkdtemp(prefix="np-", dir="/tmp")
    other = OvnDaemons(other_dir)
    try:
        ovn_daemons.start(chassis=True)
        other.start(chassis=True)
        assert ovn_daemons.chassis_netns != other.chassis_netns
        for d in (ovn_daemons, other):
            assert set(_running(d)) == set(CENTRAL + CHASSIS)
            assert d.vsctl("get", "Bridge", "br-int", "datapath_type").strip() == "netdev"
            d.wait_hv_sync(timeout=10)
        other.stop()
        # Stopping one leaves the other alone.
        assert set(_running(ovn_daemons)) == set(CENTRAL + CHASSIS)
        ovn_daemons.wait_hv_sync(timeout=10)
    finally:
        other.stop()
        shutil.rmtree(other_dir, ignore_errors=True)
