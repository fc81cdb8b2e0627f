"""OpenTofu against Pulumi on the same work: root modules / stacks of N netpeer resources (half
networks, half peerings binding them in pairs, as bench/programs/netpeer), applied, checked for
changes and destroyed with the real ``tofu`` and the real ``pulumi`` against one netpeerd, in the same
run, alternating. Plus the plugin's start-up time (exec -> handshake line), which tofu pays several
times per command.

``tofu apply`` is compared with ``pulumi up``; ``tofu plan`` (it refreshes every resource, then
diffs) with ``pulumi preview --refresh``; ``tofu destroy`` with ``pulumi destroy``. Each CLI runs
with its default parallelism (tofu: 10 operations at a time).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.deploy import ADMIN_TOKEN, ROOT, Deployment, load_average
from bench.pulumi_bench import Stack, toolchain

COOKIE = {"TF_PLUGIN_MAGIC_COOKIE": "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
          "PLUGIN_PROTOCOL_VERSIONS": "6"}
OPS = (("create", "apply", "up"), ("no changes", "plan", "preview --refresh"), ("destroy", "destroy", "destroy"))


def _log(text: str) -> None:
    print(f"bench: tofu: {text}", file=sys.stderr, flush=True)


def _script(name: str, env: dict) -> str:
    out = subprocess.run(["bash", str(ROOT / "scripts" / name)], capture_output=True, text=True, timeout=3600,
                         env=env)
    if out.returncode != 0:
        raise RuntimeError(f"scripts/{name} failed: {out.stderr.strip().splitlines()[-1:]}")
    return out.stdout.strip().splitlines()[-1]


def hcl(count: int, namespace: str) -> str:
    """The root module doing what bench/programs/netpeer does for ``count`` resources."""
    nets = count // 2
    out = ['terraform {\n  required_providers {\n    netpeer = { source = "netpeer/netpeer" }\n  }\n}\n']
    for i in range(nets):
        out.append(f'resource "netpeer_network" "n{i}" {{\n  namespace = "{namespace}"\n  name = "n{i}"\n'
                   f'  subnets = ["10.{100 + i // 256}.{i % 256}.0/24"]\n}}\n')
    for k in range(count - nets):
        j = k ^ 1 if (k ^ 1) < nets else (k + 1) % nets
        out.append(f'resource "netpeer_peering" "p{k}" {{\n  namespace = "{namespace}"\n'
                   f'  network = netpeer_network.n{k % nets}.name\n  name = "to-n{j}"\n'
                   f'  remote_network = netpeer_network.n{j}.name\n}}\n')
    return "\n".join(out)


def startup(plugin: Path, env: dict, samples: int) -> dict:
    """Seconds from exec to the handshake line, without and with mutual TLS (as tofu runs it)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:secp521r1",
                        "-nodes", "-keyout", f"{d}/k", "-out", f"{d}/c", "-subj", "/CN=localhost", "-days", "1"],
                       check=True, capture_output=True, env={**os.environ, "OPENSSL_CONF": "/dev/null"})
        client_cert = Path(f"{d}/c").read_text()
    out = {}
    for label, extra in (("plain", {}), ("mutual TLS", {"PLUGIN_CLIENT_CERT": client_cert})):
        times = []
        for _ in range(samples):
            t = time.perf_counter()
            proc = subprocess.Popen([str(plugin)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    env={**env, **COOKIE, **extra})
            line = proc.stdout.readline()
            times.append(time.perf_counter() - t)
            proc.terminate()
            proc.wait(30)
            proc.stdout.close()
            if not line.startswith("1|6|unix|"):
                raise RuntimeError(f"no handshake from {plugin}: {line!r}")
        out[label] = {"p50_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "n": samples}
    return out


class Module:
    def __init__(self, directory: Path, tofu: Path, env: dict, count: int):
        self.dir, self.tofu, self.env = directory, tofu, env
        directory.mkdir(parents=True)
        (directory / "main.tf").write_text(hcl(count, f"tb-tofu-{count}"))

    def run(self, *args: str, ok: tuple[int, ...] = (0,)) -> float:
        t = time.perf_counter()
        proc = subprocess.run([str(self.tofu), *args, "-no-color", "-input=false"], cwd=self.dir, env=self.env,
                              capture_output=True, text=True, timeout=1800)
        elapsed = time.perf_counter() - t
        if proc.returncode not in ok:
            raise RuntimeError(f"tofu {' '.join(args)} in {self.dir} exited {proc.returncode}:\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return elapsed


def run(counts: list[int], reps: int = 1, startup_samples: int = 10) -> dict:
    tofu = Path(_script("install-opentofu.sh", {**os.environ, "PYTHON": sys.executable})) / "tofu"
    pulumi = toolchain()
    out: dict = {"counts": counts, "reps": reps, "runs": {}, "load": {}}
    with Deployment(chassis=False) as d:
        home = d.dir / "tofu-home"
        home.mkdir()
        cache = os.environ.get("NETPEER_CACHE_DIR") or str(Path.home() / ".cache" / "netpeer")
        plugin_dir = _script("install-tofu-provider.sh", {**os.environ, "HOME": str(home), "PYTHON": sys.executable,
                                                          "NETPEER_CACHE_DIR": cache})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "PLUGIN_", "NETPEER_"))}
        env.update(HOME=str(home), TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1", TF_INPUT="0",
                   NETPEER_ENDPOINT="", NETPEER_TOKEN=ADMIN_TOKEN)
        out["startup"] = startup(Path(plugin_dir) / "terraform-provider-netpeer_v0.1.0", env, startup_samples)
        _log(f"plugin start-up: {out['startup']}")
        d.start_ovn()
        d.start_netpeerd()
        env["NETPEER_ENDPOINT"] = d.endpoint
        work = d.dir / "tofu-vs-pulumi"
        for count in counts:
            for rep in range(reps):
                module = Module(work / f"r{rep}" / f"tofu-{count}", tofu, env, count)
                load = [load_average()[0]]
                times = {"init": module.run("init")}
                times["create"] = module.run("apply", "-auto-approve")
                times["no changes"] = module.run("plan", "-detailed-exitcode")
                times["destroy"] = module.run("destroy", "-auto-approve")
                load.append(load_average()[0])
                stack = Stack("netpeer", count, work / f"r{rep}", pulumi, d.endpoint)
                ptimes = {"create": stack.run("up", "--yes", "--skip-preview"),
                          "no changes": stack.run("preview", "--refresh", "--expect-no-changes"),
                          "destroy": stack.run("destroy", "--yes", "--skip-preview")}
                load.append(load_average()[0])
                for tool, ts in (("tofu", times), ("pulumi", ptimes)):
                    for op, secs in ts.items():
                        out["runs"].setdefault(f"{tool}-{count}", {}).setdefault(op, []).append(secs)
                out["load"].setdefault(str(count), []).extend(load)
                _log(f"{count} rep {rep}: tofu " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items())
                     + "; pulumi " + ", ".join(f"{k} {v:.1f}s" for k, v in ptimes.items()) + f"; load {load}")
        shutil.rmtree(work, ignore_errors=True)
    out["ratios"] = {f"{op} {count}": {"tofu_s": min(out["runs"][f"tofu-{count}"][op]),
                                       "pulumi_s": min(out["runs"][f"pulumi-{count}"][op]),
                                       "ratio": min(out["runs"][f"tofu-{count}"][op])
                                       / min(out["runs"][f"pulumi-{count}"][op])}
                     for count in counts for op, _, _ in OPS}
    return out


def markdown(result: dict) -> list[str]:
    """The section of results.md."""
    lines = ["### OpenTofu and Pulumi, same resources (real CLIs, local state)", "",
             "| operation, resources | tofu s | pulumi s | tofu / pulumi |", "|---|---|---|---|"]
    for key, v in result["ratios"].items():
        op, count = key.rsplit(" ", 1)
        label = dict((o, f"`{t}` / `{p}`") for o, t, p in OPS)[op]
        lines.append(f"| {label} {count} | {v['tofu_s']:.2f} | {v['pulumi_s']:.2f} | {v['ratio']:.2f}x |")
    for count in result["counts"]:
        lines.append(f"| `tofu init` {count} | {min(result['runs'][f'tofu-{count}']['init']):.2f} | | |")
    lines += ["", "Plugin start-up (exec to handshake line): " + "; ".join(
        f"{k} p50 {v['p50_s'] * 1000:.0f} ms (min {v['min_s'] * 1000:.0f}, max {v['max_s'] * 1000:.0f}, n={v['n']})"
        for k, v in result["startup"].items()),
        "Load average (1 min) before tofu, between, after pulumi: "
        + "; ".join(f"{c}: {', '.join(f'{x:.2f}' for x in v)}" for c, v in result["load"].items()), ""]
    return lines
