"""``netpeer dev up|down|status``: the embedded default on one machine.

A state directory holds everything: the OVN databases, sockets and logs
(``ovn/``), netpeerd's SQLite store, configuration, admin token, pidfile and
log. ``up`` is idempotent; ``down`` stops every daemon it started by its pid.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from netpeer import errors

DEFAULT_STATE_DIR = os.path.join(
    os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "netpeer", "dev")


def add_parsers(sub, g: argparse.ArgumentParser) -> None:
    up = sub.add_parser("up", parents=[g], help="start OVN and netpeerd; print export lines")
    up.add_argument("--state-dir", default=None, help=f"default $NETPEER_DEV_DIR or {DEFAULT_STATE_DIR}")
    up.add_argument("--chassis", action="store_true",
                    help="also start ovs-vswitchd (userspace datapath) and ovn-controller for real packets")
    up.add_argument("--sweep-interval", default="5s", help="how often netpeerd expires and repairs (default 5s)")
    for name, text in (("down", "stop everything the dev stack started"), ("status", "show the dev stack")):
        p = sub.add_parser(name, parents=[g], help=text)
        p.add_argument("--state-dir", default=None)
        if name == "down":
            p.add_argument("--purge", action="store_true", help="also delete the state directory")
    inst = sub.add_parser("instance", help="instances: network namespaces attached to a network (needs --chassis)")
    isub = inst.add_subparsers(dest="instance_action", required=True, parser_class=sub._parser_class)
    a = isub.add_parser("add", parents=[g], help="create (or re-use) an instance on NETWORK's switch")
    a.add_argument("network", metavar="[NS/]NETWORK")
    a.add_argument("name", metavar="NAME")
    a.add_argument("--ip", action="append", default=[], metavar="ADDR",
                   help="an address inside one of the network's subnets (repeatable; "
                        "default: the next free one from .10 in each subnet)")
    a.add_argument("--state-dir", default=None)
    ls = isub.add_parser("list", parents=[g], help="list the instances of the dev stack")
    ls.add_argument("--state-dir", default=None)
    d = isub.add_parser("delete", parents=[g], help="delete an instance (switch port, veth, namespace)")
    d.add_argument("name", metavar="NAME")
    d.add_argument("--state-dir", default=None)


class DevStack:
    def __init__(self, state_dir: str | os.PathLike | None):
        self.dir = Path(state_dir or os.environ.get("NETPEER_DEV_DIR") or DEFAULT_STATE_DIR).absolute()
        from netpeer.ovn.daemons import OvnDaemons
        self.ovn = OvnDaemons(self.dir / "ovn")

    @property
    def socket(self) -> Path:
        return self.dir / "netpeer.sock"

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pidfile(self) -> Path:
        return self.dir / "netpeerd.pid"

    @property
    def token_file(self) -> Path:
        return self.dir / "admin.token"

    @property
    def config_file(self) -> Path:
        return self.dir / "netpeerd.toml"

    @property
    def log_file(self) -> Path:
        return self.dir / "netpeerd.log"

    @property
    def chassis_marker(self) -> Path:
        """Present when the stack was started with --chassis: later `up`s keep
        the chassis and `status` counts its daemons."""
        return self.dir / "chassis"

    @property
    def wants_chassis(self) -> bool:
        return self.chassis_marker.exists()

    def netpeerd_pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        try:  # a recycled pid is not ours
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        if str(self.config_file).encode() not in cmdline:
            return None
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        return None if state == "Z" else pid

    def up(self, chassis: bool, sweep_interval: str, say) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        if len(str(self.socket)) > 100:
            raise errors.InvalidArgument.for_field("--state-dir", str(self.dir),
                                                   "is too long for unix sockets; choose a shorter path")
        chassis = chassis or self.wants_chassis
        self.ovn.start(chassis=chassis, progress=say)
        if chassis:
            self.chassis_marker.write_text("ovs-vswitchd (userspace datapath) and ovn-controller\n")
        if not self.token_file.exists():
            token = f"np_admin{secrets.token_hex(3)}_{secrets.token_urlsafe(32).replace('_', '-')}"
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token + "\n")
        self.config_file.write_text(
            f'listen = "{self.endpoint}"\n'
            f'store = "{self.dir / "netpeer.db"}"\n'
            f'ovn_nb = "{self.ovn.nb_remote}"\n'
            f'admin_token_file = "{self.token_file}"\n'
            f'sweep_interval = "{sweep_interval}"\n')
        if self.netpeerd_pid() is None:
            say("starting netpeerd")
            if self.socket.exists():
                self.socket.unlink()
            with open(self.log_file, "ab") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "netpeer.cli.main", "serve", "--config", str(self.config_file)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
            self.pidfile.write_text(f"{proc.pid}\n")
            self._wait_ready(proc)
        else:
            say(f"netpeerd already running (pid {self.netpeerd_pid()})")

    def _wait_ready(self, proc: subprocess.Popen, timeout: float = 30.0) -> None:
        from netpeer.api.client import Client
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = self.log_file.read_text().strip().splitlines()[-1:] or ["(no output)"]
                raise errors.Unavailable(f"netpeerd exited with {proc.returncode}: {tail[0]} (log: {self.log_file})")
            if self.socket.exists():
                try:
                    with Client(self.endpoint, self.admin_token(), timeout=2) as c:
                        c.caller()
                    return
                except errors.NetpeerError:
                    pass
            time.sleep(0.1)
        raise errors.Unavailable(f"netpeerd did not answer within {timeout:.0f}s (log: {self.log_file})")

    def admin_token(self) -> str:
        return self.token_file.read_text().strip()

    def down(self, purge: bool, say) -> None:
        pid = self.netpeerd_pid()
        if pid is not None:
            say(f"stopping netpeerd (pid {pid})")
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.netpeerd_pid() == pid:
                time.sleep(0.1)
            if self.netpeerd_pid() == pid:
                os.kill(pid, signal.SIGKILL)
        self.pidfile.unlink(missing_ok=True)
        failure = None
        try:
            from netpeer.dev import instances
            instances.delete_all(self, say)
        except ImportError:
            pass
        except errors.NetpeerError as exc:   # still stop the daemons; report at the end
            failure = exc
        self.ovn.stop()
        if failure is not None:
            raise failure
        if purge and self.dir.exists():
            import shutil
            shutil.rmtree(self.dir)
            say(f"removed {self.dir}")

    def status_rows(self) -> list[list[str]]:
        rows = [[s.name, str(s.pid or ""), "running" if s.running else "stopped", s.detail]
                for s in self.ovn.status()]
        pid = self.netpeerd_pid()
        rows.append(["netpeerd", str(pid or ""), "running" if pid else "stopped", self.endpoint])
        return rows

    def required_daemons(self) -> tuple[str, ...]:
        central = ("ovsdb-server-nb", "ovsdb-server-sb", "ovn-northd", "netpeerd")
        return central + (("ovsdb-server", "ovs-vswitchd", "ovn-controller") if self.wants_chassis else ())


def run(ctx, args) -> int:
    from netpeer.cli import output
    stack = DevStack(args.state_dir)
    say = (lambda msg: sys.stderr.write(f"netpeer dev: {msg}\n"))
    if args.action == "up":
        stack.up(args.chassis, args.sweep_interval, say)
        print(f"export NETPEER_ENDPOINT={stack.endpoint}")
        print(f"export NETPEER_TOKEN={stack.admin_token()}")
        say(f"ready. OVN NB: ovn-nbctl --db={stack.ovn.nb_remote} show")
        say('load the settings with: eval "$(netpeer dev up)"')
        return 0
    if args.action == "down":
        stack.down(args.purge, say)
        return 0
    if args.action == "instance":
        return _instance(ctx, args, stack)
    rows = stack.status_rows()
    fleet = _fleet(stack)
    states = fleet.states() if stack.dir.exists() else {}
    data = {"state_dir": str(stack.dir), "endpoint": stack.endpoint, "nb_remote": stack.ovn.nb_remote,
            "sb_remote": stack.ovn.sb_remote, "nb_socket": str(stack.ovn.nb_socket),
            "chassis": stack.wants_chassis, "chassis_netns": stack.ovn.chassis_netns,
            "daemons": [{"name": r[0], "pid": int(r[1]) if r[1] else None, "state": r[2], "detail": r[3]}
                        for r in rows],
            "instances": [i.to_json(states.get(i.name)) for i in fleet.list()] if stack.dir.exists() else []}

    def render(d):
        lines = [f"state dir:  {d['state_dir']}", f"endpoint:   {d['endpoint']}", f"OVN NB:     {d['nb_remote']}",
                 f"OVN SB:     {d['sb_remote']}", f"inspect:    ovn-nbctl --db={d['nb_remote']} show"]
        if d["chassis"]:
            lines.append(f"chassis:    ovs-vswitchd in netns {d['chassis_netns']} "
                         f"(ovs-vsctl --db=unix:{stack.ovn.ovs_socket} show)")
        lines.append(output.table(["DAEMON", "PID", "STATE", "DETAIL"], rows))
        if d["instances"]:
            lines.append(_instances_table(d["instances"]))
        return "\n".join(lines)

    output.emit(data, ctx.output, render)
    required = stack.required_daemons()
    running = all(r[2] == "running" for r in rows if r[0] in required)
    return 0 if running else 3


def _fleet(stack: DevStack):
    from netpeer.dev import instances
    return instances.fleet_of(stack)


def _instances_table(items: list[dict]) -> str:
    from netpeer.cli import output
    return output.table(["INSTANCE", "NETWORK", "IPS", "NETNS", "STATE"],
                        [[i["name"], f"{i['namespace']}/{i['network']}", "\n".join(i["ips"]), i["netns"],
                          i.get("state", "")] for i in items])


def _instance(ctx, args, stack: DevStack) -> int:
    """``netpeer dev instance add|list|delete``."""
    from netpeer.cli import output
    from netpeer.core import validate
    fleet = _fleet(stack)
    action = args.instance_action
    if action == "list":
        states = fleet.states()
        items = [i.to_json(states.get(i.name)) for i in fleet.list()]
        output.emit(items, ctx.output, _instances_table)
        return 0
    if action == "delete":
        fleet.validate_name(args.name)
        fleet.delete(args.name)
        if ctx.output == "json":
            output.emit({"deleted": args.name}, "json", None)
        return 0
    # add: the network's uid and subnets come from netpeerd (this dev stack's by default).
    if not stack.ovn.running():
        raise errors.Unavailable(f"the dev stack in {stack.dir} is not running: netpeer dev up --chassis")
    fleet.validate_name(args.name)
    ns, _, net = args.network.rpartition("/")
    if "/" in ns:
        raise errors.InvalidArgument.for_field("NETWORK", args.network, "must be NETWORK or NS/NETWORK")
    validate.name("NETWORK", net)
    ctx.endpoint = ctx.endpoint or stack.endpoint
    ctx.token = ctx.token or (stack.admin_token() if stack.token_file.exists() else "")
    ns = validate.name("NETWORK", ns) if ns else ctx.namespace
    network = ctx.client.get_network(ns, net)
    inst = fleet.add(network, args.name, args.ip)
    states = fleet.states()
    output.emit(inst.to_json(states.get(inst.name)), ctx.output, lambda i: _instances_table([i]))
    return 0
