"""``make demo`` / ``make demo-down``: the whole product on one machine.

Longer than 400 lines: it is a script, read top to bottom like the README's
walk-through it prints; its steps are methods of one class.

``python -m netpeer_dev.demo up`` starts the dev stack with a chassis
(``netpeer dev up --chassis``), applies the two tenants' Pulumi stacks
(``examples/tenant-a``, then ``examples/tenant-b``) with the real ``pulumi``
engine, shows the peering Pending after the first and Bound after the second,
attaches one instance (a network namespace) to each network, pings across
the peering both ways over IPv4 and IPv6, and prints a summary with the time
from the second consent to the first successful ping.

Everything lives in the dev state directory (``$NETPEER_DEV_DIR`` or
``~/.local/state/netpeer/dev``): the Pulumi file backend, the stacks'
configuration and a copy of each example program (so nothing is written
into the repository), the tenants' tokens. Re-running is safe: existing
stacks are updated, tokens and instances re-used.

``python -m netpeer_dev.demo down`` destroys both stacks (when netpeerd is
still running), deletes the instances, stops every daemon by pid, removes
the state directory, and checks that no process or namespace is left.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

STACK = "demo"
TENANTS = (("a", "team-a", "tenant-a", "net-a", "to-b", "vm-a"),
           ("b", "team-b", "tenant-b", "net-b", "to-a", "vm-b"))
TTY = sys.stdout.isatty()


def step(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if TTY else f"\n== {text}", flush=True)


def note(text: str) -> None:
    print(f"   {text}", flush=True)


def show(command: str) -> None:
    print(f"$ {command}", flush=True)


class DemoError(RuntimeError):
    pass


@dataclass
class Tenant:
    key: str
    namespace: str
    example: str
    network: str
    peering: str
    instance: str
    token: str = ""


def checkout(path: str | os.PathLike) -> Path:
    """The netpeer checkout whose ``examples/`` (the tenants' programs) and
    ``scripts/`` (the Pulumi CLI build) the demo uses."""
    root = Path(path).absolute()
    for need in ("examples/tenant-a/__main__.py", "examples/tenant-b/__main__.py", "scripts/install-pulumi.sh"):
        if not (root / need).is_file():
            raise DemoError(f"--checkout: {str(root)!r} is not a netpeer checkout (no {need}); "
                            "run the demo from the repository (make demo) or pass --checkout DIR")
    return root


class Demo:
    def __init__(self, root: Path) -> None:
        self.root = root
        from netpeer_dev.stack import DevStack
        self.stack = DevStack(None)
        self.dir = self.stack.dir / "demo"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
        self.env["NETPEER_DEV_DIR"] = str(self.stack.dir)
        self.env.pop("NETPEER_NAMESPACE", None)
        self.tenants = [Tenant(*t) for t in TENANTS]

    # ---------------------------------------------------------------- tools

    def netpeer(self, *args: str, token: str | None = None, quiet: bool = False,
                check: bool = True) -> subprocess.CompletedProcess:
        env = dict(self.env)
        if token:
            env["NETPEER_TOKEN"] = token
        if not quiet:
            show(("NETPEER_TOKEN=$TOKEN_" + self._who(token) + " " if token and self._who(token) else "")
                 + "netpeer " + " ".join(args))
        proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", *args], env=env, text=True,
                              capture_output=True, timeout=300)
        if not quiet:
            sys.stdout.write(proc.stdout)
            sys.stdout.flush()
        if check and proc.returncode != 0:
            raise DemoError(f"netpeer {' '.join(args)} failed: {proc.stderr.strip().splitlines()[-1:]}")
        return proc

    def _who(self, token: str | None) -> str:
        for t in self.tenants:
            if token and token == t.token:
                return t.key.upper()
        return ""

    def pulumi_env(self) -> dict[str, str]:
        out = subprocess.run(["bash", str(self.root / "scripts/install-pulumi.sh")], capture_output=True, text=True,
                             timeout=1800)
        if out.returncode != 0:
            raise DemoError("the Pulumi CLI is not available (scripts/install-pulumi.sh): "
                            + (out.stderr.strip().splitlines() or ["no output"])[-1])
        bin_dir = out.stdout.strip().splitlines()[-1]
        passphrase_file = self.dir / "pulumi-passphrase"
        if not passphrase_file.exists():
            fd = os.open(passphrase_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(24) + "\n")
        (self.dir / "pulumi-home").mkdir(exist_ok=True)
        (self.dir / "pulumi-state").mkdir(exist_ok=True)
        env = dict(self.env)
        env.update(PATH=f"{bin_dir}:{env.get('PATH', '')}", PULUMI_HOME=str(self.dir / "pulumi-home"),
                   PULUMI_BACKEND_URL=f"file://{self.dir / 'pulumi-state'}",
                   PULUMI_CONFIG_PASSPHRASE=passphrase_file.read_text().strip(),
                   PULUMI_SKIP_UPDATE_CHECK="true", PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
                   PULUMI_SKIP_CONFIRMATIONS="true", NO_COLOR="1",
                   PULUMI_PYTHON_CMD=sys.executable)
        for k in ("NETPEER_ENDPOINT", "NETPEER_TOKEN"):
            env.pop(k, None)   # the stacks' own configuration says where and who
        keys = ("PULUMI_HOME", "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_SKIP_UPDATE_CHECK",
                "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION", "PULUMI_PYTHON_CMD")
        lines = [f"export PATH={bin_dir}:$PATH"] + [f"export {k}={env[k]}" for k in keys]
        fd = os.open(self.dir / "pulumi.env", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("# source this to run pulumi on the demo's stacks (make demo)\n" + "\n".join(lines) + "\n")
        return env

    def project(self, t: Tenant) -> Path:
        """A fresh copy of examples/<tenant> whose virtualenv is this one."""
        src, dst = self.root / "examples" / t.example, self.dir / t.example
        dst.mkdir(parents=True, exist_ok=True)
        venv = Path(sys.prefix)
        text = (src / "Pulumi.yaml").read_text().replace("virtualenv: ../../.venv", f"virtualenv: {venv}")
        (dst / "Pulumi.yaml").write_text(text)
        shutil.copyfile(src / "__main__.py", dst / "__main__.py")
        return dst

    def pulumi(self, t: Tenant, *args: str, stream: bool = False, quiet: bool = False,
               check: bool = True) -> subprocess.CompletedProcess:
        cwd = self.dir / t.example
        argv = ["pulumi", *args, "--non-interactive", "--color", "never"]
        if not quiet:
            show(f"pulumi {' '.join(args)}    # {t.example}")
        if stream:
            proc = subprocess.Popen(argv, cwd=cwd, env=self.penv, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            lines = []
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                sys.stdout.write("    " + line)
                sys.stdout.flush()
            proc.wait(timeout=600)
            result = subprocess.CompletedProcess(argv, proc.returncode, "".join(lines), "")
        else:
            result = subprocess.run(argv, cwd=cwd, env=self.penv, capture_output=True, text=True, timeout=600)
        if check and result.returncode != 0:
            tail = (result.stdout + result.stderr).strip().splitlines()[-15:]
            raise DemoError(f"pulumi {' '.join(args)} ({t.example}) failed:\n" + "\n".join(tail))
        return result

    def outputs(self, t: Tenant) -> dict:
        return json.loads(self.pulumi(t, "stack", "output", "--json", "--show-secrets", quiet=True).stdout)

    # -------------------------------------------------------------------- up

    def tokens(self, admin: str) -> None:
        from netpeer import errors
        from netpeer.api.client import Client
        path = self.dir / "tokens.json"
        saved = json.loads(path.read_text()) if path.exists() else {}
        changed = False
        for t in self.tenants:
            token = saved.get(t.namespace, "")
            if token:
                try:
                    with Client(self.stack.endpoint, token, timeout=10) as c:
                        if c.caller()["namespaces"] != [t.namespace]:
                            token = ""
                except errors.NetpeerError:
                    token = ""
            if not token:
                with Client(self.stack.endpoint, admin, timeout=10) as c:
                    token = c.create_token([t.namespace], description="make demo")["token"]
                saved[t.namespace] = token
                changed = True
            t.token = token
        if changed:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(saved, f)

    def apply(self, t: Tenant) -> dict:
        project = self.project(t)
        project_name = next(line.split(":", 1)[1].strip() for line in (project / "Pulumi.yaml").read_text().splitlines()
                            if line.startswith("name:"))
        if not (self.dir / "pulumi-state" / ".pulumi" / "stacks" / project_name / f"{STACK}.json").exists():
            self.pulumi(t, "stack", "init", STACK, quiet=True)
        # The stack's settings, unless a previous run set these very values.
        stamp = project / f".{STACK}.configured"
        wanted = hashlib.sha256(f"{self.stack.endpoint}\n{t.token}".encode()).hexdigest()
        if not (stamp.exists() and stamp.read_text() == wanted and (project / f"Pulumi.{STACK}.yaml").exists()):
            self.pulumi(t, "config", "set", "--stack", STACK, "--plaintext", "netpeer:endpoint",
                        self.stack.endpoint, quiet=True)
            self.pulumi(t, "config", "set", "--stack", STACK, "--secret", "netpeer:token", t.token, quiet=True)
            stamp.write_text(wanted)
        # --refresh: on a re-run the outputs show the phase now, not the one of the last update.
        self.pulumi(t, "up", "--refresh", "--yes", "--skip-preview", "--stack", STACK, stream=True)
        return self.outputs(t)

    def up(self) -> int:
        from netpeer.api.client import Client
        from netpeer_dev import instances as inst_mod
        from netpeer_dev import netns as nsx
        started = time.monotonic()
        a, b = self.tenants

        step("start the dev stack with a chassis: OVN NB + SB + northd, ovs-vswitchd (userspace), "
             "ovn-controller, netpeerd")
        show("netpeer dev up --chassis")
        proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "dev", "up", "--chassis"], env=self.env,
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise DemoError(f"netpeer dev up --chassis failed: {proc.stderr.strip().splitlines()[-1:]}")
        admin = self.stack.admin_token()
        self.env["NETPEER_ENDPOINT"] = self.stack.endpoint
        self.netpeer("dev", "status")
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)

        step("the admin gives each tenant a token for its own namespace")
        self.tokens(admin)
        note(f"TOKEN_A grants team-a, TOKEN_B grants team-b (kept in {self.dir / 'tokens.json'})")
        self.penv = self.pulumi_env()
        note(f"pulumi: local file backend {self.penv['PULUMI_BACKEND_URL']}, offline; stack '{STACK}' of "
             f"examples/tenant-a and -b, run from copies in {self.dir}")

        step("tenant A applies its stack: network net-a and its half of the peering")
        out_a = self.apply(a)
        rerun = out_a.get("phase") == "Bound"
        note(f"tenant A's peering to-b: {out_a.get('phase')} ({out_a.get('reason')})"
             + ("   <- already Bound: tenant B's stack is up from an earlier run" if rerun else ""))

        step("tenant A attaches an instance to net-a")
        self.netpeer("dev", "instance", "add", "net-a", a.instance, token=a.token)
        fleet = inst_mod.fleet_of(self.stack)
        vm_a = fleet.get(a.instance)
        assert vm_a is not None
        if not rerun:
            nsx_ok = nsx.ping(vm_a.netns, "10.2.0.10", count=1, timeout=0.5)
            note(f"{a.instance} -> 10.2.0.10 before tenant B consents: "
                 f"{'reachable?!' if nsx_ok else 'no route (not peered)'}")

        step("tenant B applies its stack: network net-b and the second half of the peering")
        bound_at: list[float] = []
        stop = threading.Event()

        watching = threading.Event()

        def watch() -> None:   # the moment A's peering turns Bound = the second consent, from Watch
            with Client(self.stack.endpoint, a.token, timeout=5) as c:
                for event in c.watch(a.namespace, a.network):
                    watching.set()   # the first event is the bookmark: watching from here on
                    if stop.is_set():
                        return
                    if event.get("name") == a.peering and event.get("phase") == "Bound":
                        bound_at.append(time.monotonic())
                        return

        watcher = threading.Thread(target=watch, daemon=True)
        if not rerun:
            watcher.start()
            watching.wait(10)
        try:
            out_b = self.apply(b)
            b_done = time.monotonic()
            if watcher.is_alive():
                watcher.join(5)   # it sees Bound before `pulumi up` returns; this only bounds a failure
        finally:
            stop.set()
        note(f"tenant B's peering to-a: {out_b.get('phase')} ({out_b.get('reason')})")
        if out_b.get("phase") != "Bound":
            raise DemoError(f"tenant B's peering is {out_b.get('phase')} ({out_b.get('reason')}), not Bound")
        self.netpeer("peering", "list", "net-a", token=a.token)

        step("tenant B attaches an instance to net-b; ping across the peering")
        self.netpeer("dev", "instance", "add", "net-b", b.instance, token=b.token)
        attached = time.monotonic()
        vm_b = fleet.get(b.instance)
        assert vm_b is not None
        target4 = vm_b.address(4)
        first_ping = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if nsx.ping(vm_a.netns, target4, count=1, timeout=0.2):
                first_ping = time.monotonic()
                break
        if first_ping is None:
            raise DemoError(f"{a.instance} could not ping {target4} within 30 s of the peering being Bound")
        results = {}
        for src, dst in ((vm_a, vm_b), (vm_b, vm_a)):
            for version in (4, 6):
                addr = dst.address(version)
                if addr is None:
                    continue
                ok = nsx.ping(src.netns, addr, count=3, timeout=1.0)
                results[(src.name, dst.name, version)] = ok
        for version in (4, 6):
            addr = vm_b.address(version)
            if addr:
                show(f"ip netns exec {vm_a.netns} ping -c 2 {addr}")
                p = subprocess.run(["ip", "netns", "exec", vm_a.netns, "ping", "-c", "2", "-i", "0.2", addr],
                                   capture_output=True, text=True, timeout=30)
                sys.stdout.write("".join(f"    {line}\n" for line in p.stdout.strip().splitlines()[-2:]))
        failed = [k for k, ok in results.items() if not ok]

        if not rerun:
            step("tenant A's stack sees the other side's consent (drift): pulumi up --refresh")
            self.pulumi(a, "up", "--refresh", "--yes", "--skip-preview", "--stack", STACK, stream=True)
            out_a2 = self.outputs(a)
            note(f"tenant A's peering to-b: {out_a2.get('phase')} ({out_a2.get('reason')}), "
                 f"remote_uid {out_a2.get('remote_uid')}")

        total = time.monotonic() - started
        step("summary")
        print(f"  tenant A  examples/tenant-a  team-a/net-a  peering to-b: "
              f"{'Bound (from an earlier run)' if rerun else 'Pending after its pulumi up, Bound once B applied'}")
        print(f"  tenant B  examples/tenant-b  team-b/net-b  peering to-a: {out_b.get('phase')}")
        for vm in (vm_a, vm_b):
            print(f"  {vm.name:<5} {vm.namespace}/{vm.network}  {' '.join(vm.addresses):<24} netns {vm.netns}")
        marks = "  ".join(f"{s}->{d} IPv{v} {'ok' if ok else 'FAILED'}" for (s, d, v), ok in results.items())
        print(f"  ping      {marks}")
        if bound_at:
            t0 = bound_at[0]
            print(f"  second consent (peering Bound) -> first ping {target4}: {first_ping - t0:.2f} s "
                  f"(B's pulumi up returned +{b_done - t0:.2f} s, {b.instance} attached +{attached - t0:.2f} s)")
        else:
            print(f"  B's pulumi up returned -> first ping {target4}: {first_ping - b_done:.2f} s "
                  f"(peering already Bound; `make demo-down` then `make demo` to watch it bind)")
        print(f"  demo took {total:.1f} s")
        print(f"\n  try:      sudo ip netns exec {vm_a.netns} ping {vm_b.address(6) or target4}")
        print("            .venv/bin/netpeer dev status;  .venv/bin/netpeer dev instance list")
        print(f"            ovn-nbctl --db={self.stack.ovn.nb_remote} show")
        print(f"            . {self.dir / 'pulumi.env'} && cd {self.dir / a.example} && pulumi stack output")
        print(f"  console:  {self.stack.console_url}  (sign in with tenant A's token: "
              f"jq -r '.\"team-a\"' {self.dir / 'tokens.json'}; the admin's: {self.stack.token_file})")
        print("  stop:     make demo-down")
        (self.dir / "last-run.json").write_text(json.dumps({
            "rerun": rerun, "consent_to_first_ping_s": (first_ping - bound_at[0]) if bound_at else None,
            "b_up_to_first_ping_s": first_ping - b_done, "pings": {f"{s}->{d}/v{v}": ok for (s, d, v), ok
                                                                   in results.items()},
            "total_s": total}, indent=2) + "\n")
        if failed:
            raise DemoError("some pings failed: " + ", ".join(f"{s}->{d} IPv{v}" for s, d, v in failed))
        return 0

    # ------------------------------------------------------------------ down

    def down(self) -> int:
        if not self.stack.dir.exists():
            print(f"nothing to tear down: {self.stack.dir} does not exist")
            return 0
        pids = {s.name: s.pid for s in self.stack.ovn.status() if s.pid}
        if self.stack.netpeerd_pid():
            pids["netpeerd"] = self.stack.netpeerd_pid()
        chassis_netns = self.stack.ovn.chassis_netns
        problems = []
        state = self.dir / "pulumi-state"
        if state.exists() and self.stack.netpeerd_pid() is not None:
            step("pulumi destroy: both tenants' stacks")
            self.penv = self.pulumi_env()
            for t in reversed(self.tenants):
                if not (self.dir / t.example).exists():
                    continue
                self.project(t)
                if self.pulumi(t, "stack", "select", STACK, quiet=True, check=False).returncode != 0:
                    continue
                r = self.pulumi(t, "destroy", "--yes", "--skip-preview", "--stack", STACK, check=False)
                if r.returncode != 0:
                    problems.append(f"pulumi destroy of {t.example} failed")
                    print(r.stdout[-2000:], r.stderr[-2000:])
                else:
                    counts = re.findall(r"^\s*-\s*(\d+) deleted\s*$", r.stdout, re.M)
                    note(f"{t.example}: {counts[-1] if counts else 0} resources deleted; stack removed")
                    self.pulumi(t, "stack", "rm", "--yes", "--stack", STACK, check=False)
        elif state.exists():
            note("netpeerd is not running: skipping pulumi destroy (its state goes with the state directory)")
        step("instances, daemons and state: netpeer dev down --purge")
        fleet_prefix = None
        try:
            from netpeer_dev import instances as inst_mod
            fleet_prefix = inst_mod.fleet_of(self.stack).prefix
        except Exception:
            pass
        proc = self.netpeer("dev", "down", "--purge", check=False, quiet=True)
        show("netpeer dev down --purge")
        sys.stdout.write("".join(f"    {line}\n" for line in proc.stderr.strip().splitlines()))
        if proc.returncode != 0:
            problems.append("netpeer dev down failed")

        parent = self.stack.dir.parent   # ~/.local/state/netpeer when `dev up` created it
        if parent.name == "netpeer" and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()

        step("check: nothing left behind")
        from netpeer_dev import netns as nsx
        from netpeer_dev.proc import alive
        survivors = {name: pid for name, pid in pids.items() if alive(pid)}
        left_ns = [n for n in ([chassis_netns] if nsx.netns_exists(chassis_netns) else [])]
        if fleet_prefix:
            left_ns += nsx.list_instances(f"{fleet_prefix}-")
        note(f"processes still alive: {survivors or 'none'} (of {len(pids)} stopped: "
             f"{', '.join(f'{k} {v}' for k, v in pids.items()) or '-'})")
        note(f"namespaces left: {left_ns or 'none'}; state dir {self.stack.dir}: "
             f"{'still there' if self.stack.dir.exists() else 'removed'}")
        if survivors or left_ns or self.stack.dir.exists():
            problems.append("something was left behind")
        if problems:
            raise DemoError("; ".join(problems))
        return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m netpeer_dev.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("up", "down"))
    p.add_argument("--checkout", default=".", help="the netpeer checkout with examples/ and scripts/ (default: .)")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        sys.stderr.write("demo: needs root (network namespaces, Open vSwitch)\n")
        return 1
    try:
        demo = Demo(checkout(args.checkout))
        return demo.up() if args.action == "up" else demo.down()
    except DemoError as exc:
        sys.stderr.write(f"\ndemo: error: {exc}\n")
        return 1
    except Exception as exc:  # one line for people; NETPEER_DEBUG=1 for the traceback
        if os.environ.get("NETPEER_DEBUG"):
            raise
        sys.stderr.write(f"\ndemo: error: {exc.__class__.__name__}: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
