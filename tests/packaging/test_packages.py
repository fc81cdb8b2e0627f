"""The packages of `make packages` (scripts/build-packages.sh), installed and used as a team would: the
Pulumi plugin tarball with `pulumi plugin install --file`, two versions side by side while a `pulumi up`
runs, the OpenTofu provider from a filesystem mirror with the lock file's checksums and into another
HOME, the npm tarball of the TypeScript SDK in a fresh program, the wheel."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from tests.support import ROOT, short_tmpdir
from tests.tofu.harness import Home, Module, tofu_bin

VERSION = re.search(r'^version = "(.*)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
PLUGIN = f"pulumi-resource-netpeer-v{VERSION}-linux-amd64.tar.gz"


def build(tree: Path, *parts: str) -> Path:
    """dist/ of ``tree``, built by its own scripts/build-packages.sh (cached by content)."""
    out = subprocess.run(["bash", str(tree / "scripts/build-packages.sh"), *parts], capture_output=True, text=True,
                         timeout=900, env={**os.environ, "PYTHON": sys.executable})
    assert out.returncode == 0, f"build-packages failed:\n{out.stderr[-3000:]}"
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def dist() -> Path:
    return build(ROOT)


@pytest.fixture
def other_checkout():
    """A second checkout of this tree at another path, its version bumped to VERSION's next patch."""
    root = short_tmpdir("np-checkout-")
    try:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.splitlines()
        for f in files:
            if (ROOT / f).is_file():
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, root / f)
        major, minor, patch = VERSION.split(".")
        bumped = f"{major}.{minor}.{int(patch) + 1}"
        for name, old, new in (("pyproject.toml", f'version = "{VERSION}"', f'version = "{bumped}"'),
                               ("schema/pulumi/schema.json", f'"version": "{VERSION}"', f'"version": "{bumped}"')):
            text = (root / name).read_text()
            assert old in text, name
            (root / name).write_text(text.replace(old, new, 1))
        yield root, bumped
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_wheel_holds_the_cli_daemon_and_sdk(dist, tmp_path):
    wheel = dist / f"netpeer-{VERSION}-py3-none-any.whl"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(tmp_path / "t"),
                    str(wheel)], check=True, timeout=300)
    # From the wheel alone (-I: not this checkout): the CLI runs, the daemon and the SDK import.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import netpeer, netpeer.daemon, pulumi_netpeer, "
            "netpeer_provider.tofu; from netpeer.cli.main import main; "
            "print(netpeer.__file__); sys.argv[1:] = ['--help']; main()")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path / "t")], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.splitlines()[0].startswith(str(tmp_path / "t")), out.stdout + out.stderr
    assert "usage: netpeer" in out.stdout, out.stdout + out.stderr


@pytest.mark.pulumi
def test_plugin_versions_side_by_side_while_pulumi_up_runs(dist, other_checkout, stacks, netpeerd, pulumi_bin):
    """0.1.0 from this checkout (the stacks fixture installs it), then, while a `pulumi up` of a YAML
    stack runs on it, the next version from another checkout and this checkout's install again: the up
    succeeds, and `pulumi plugin ls` lists both versions."""
    tree, bumped = other_checkout
    b = stacks("yaml-tenant", netpeerd.token("team-b"))
    home = Path(b.env["PULUMI_HOME"])
    installed = home / "plugins" / f"resource-netpeer-v{VERSION}"
    launcher = (installed / "pulumi-resource-netpeer").read_text()
    assert str(ROOT) not in launcher and ".venv" not in launcher, launcher  # nothing points into a checkout
    other_dist = build(tree, "plugin")  # before the up: building takes longer than the up
    before = (installed / ".netpeer-build").stat().st_ino

    results: dict[str, subprocess.CompletedProcess] = {}

    def install(name: str, argv: list[str]) -> None:
        results[name] = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                                       env={**b.env, "NETPEER_PYTHON": sys.executable})

    up = subprocess.Popen(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--color", "never"],
                          cwd=b.dir, env=b.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    threads = [threading.Thread(target=install, args=(
                   "other", ["pulumi", "plugin", "install", "resource", "netpeer", bumped, "--file",
                             str(other_dist / f"pulumi-resource-netpeer-v{bumped}-linux-amd64.tar.gz")])),
               threading.Thread(target=install, args=(
                   "again", ["bash", str(ROOT / "scripts/install-pulumi-plugin.sh")]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    output, _ = up.communicate(timeout=600)
    assert up.returncode == 0, output
    for name, r in results.items():
        assert r.returncode == 0, f"{name}: {r.stderr[-2000:]}"
    assert "already installed" in results["again"].stderr  # the same build: left alone
    assert (installed / ".netpeer-build").stat().st_ino == before
    assert b.outputs()["phase"] == "Pending"
    listed = {tuple(line.split()[:3]) for line in b.run("plugin", "ls").stdout.splitlines()}
    assert {("netpeer", "resource", VERSION), ("netpeer", "resource", bumped)} <= listed, listed
    # The other version's plugin is its own package: it reports its own version to the engine.
    other = (home / "plugins" / f"resource-netpeer-v{bumped}" / "pulumi-resource-netpeer").read_text()
    assert str(tree) not in other


@pytest.mark.pulumi
def test_plugin_ignores_the_callers_python_environment(stacks, netpeerd, tmp_path):
    """The plugin runs on its own copy of its dependencies: a protobuf that breaks on import in the
    caller's environment (as installing pulumi-policy into the project's venv once did, by downgrading
    protobuf) changes nothing for it."""
    broken = tmp_path / "broken"
    (broken / "google" / "protobuf").mkdir(parents=True)
    (broken / "google" / "__init__.py").write_text("")
    (broken / "google" / "protobuf" / "__init__.py").write_text("raise ImportError('a protobuf that breaks')\n")
    b = stacks("yaml-tenant", netpeerd.token("team-b"))
    out = b.run("preview", env={"PYTHONPATH": str(broken), "PYTHONNOUSERSITE": ""})
    assert "netpeer:index:NetworkPeering" in out.stdout and "a protobuf that breaks" not in out.stdout + out.stderr


@pytest.mark.tofu
def test_tofu_filesystem_mirror_and_lock_file(dist, netpeerd):
    """A team's set-up: dist's filesystem mirror in the CLI configuration, the provider installed into the
    plugin cache (scripts/install-tofu-provider.sh with TF_PLUGIN_CACHE_DIR), dist's lock file in the
    root module. `tofu init` checks the package against the lock file's h1:/zh: checksums and keeps them,
    with no "unauthenticated" package; the provider works. A mirror whose zip is not the one the lock
    file names is refused."""
    lock = (dist / "opentofu" / ".terraform.lock.hcl").read_text()
    hashes = re.compile(r'"(?:h1:[A-Za-z0-9+/=]+|zh:[0-9a-f]{64})"')
    assert [h[1:3] for h in hashes.findall(lock)] == ["h1", "zh"], lock
    root = short_tmpdir("np-mirror-")
    try:
        home = Home(root, tofu_bin(), install=False)
        cache = root / "plugin-cache"
        out = subprocess.run(["bash", str(ROOT / "scripts/install-tofu-provider.sh")], capture_output=True,
                             text=True, timeout=900, env={**home.env(), "PYTHON": sys.executable,
                                                          "TF_PLUGIN_CACHE_DIR": str(cache)})
        assert out.returncode == 0, out.stderr

        def module(name: str, mirror: Path, plugin_cache: Path | None) -> Module:
            config = root / f"{name}.tfrc"
            config.write_text((f'plugin_cache_dir = "{plugin_cache}"\n' if plugin_cache else "")
                              + 'provider_installation {\n  filesystem_mirror {\n'
                              f'    path = "{mirror}"\n    include = ["netpeer/netpeer"]\n  }}\n'
                              '  direct { exclude = ["netpeer/netpeer"] }\n}\n')
            m = Module(home, root / name, example="tenant-a", NETPEER_ENDPOINT=netpeerd.endpoint,
                       NETPEER_TOKEN=netpeerd.token("team-a"), TF_CLI_CONFIG_FILE=str(config))
            (m.dir / ".terraform.lock.hcl").write_text(lock)
            return m

        good = module("good", dist / "opentofu" / "mirror", cache)
        init = good.init()
        assert f"Using netpeer/netpeer v{VERSION} from the shared cache directory" in init.stdout, init.stdout
        assert "unauthenticated" not in init.stdout + init.stderr, init.stdout
        assert hashes.findall((good.dir / ".terraform.lock.hcl").read_text()) == hashes.findall(lock)
        good.apply()
        assert good.outputs()["phase"] == "Pending"
        good.run("destroy", "-auto-approve", "-input=false")
        # Running the provider wrote nothing into the installed package: its h1: checksum still holds.
        again = module("again", dist / "opentofu" / "mirror", cache)
        assert "from the shared cache directory" in again.init().stdout

        # A mirror whose package is not the one the lock file names (one line added to its launcher):
        # refused at init.
        forged = root / "forged"
        shutil.copytree(dist / "opentofu" / "mirror", forged)
        for z in forged.rglob("*.zip"):
            with zipfile.ZipFile(z) as src, zipfile.ZipFile(z.with_suffix(".new"), "w") as dst:
                for info in src.infolist():
                    data = src.read(info)
                    dst.writestr(info, data + b"# changed\n" if info.filename.startswith("terraform-") else data)
            z.with_suffix(".new").replace(z)
        bad = module("bad", forged, None)
        refused = bad.run("init", "-input=false", ok=(1,))
        assert "checksum" in refused.stderr + refused.stdout, refused.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.tofu
def test_tofu_provider_installs_into_another_home(netpeerd):
    """`HOME=/another/home scripts/install-tofu-provider.sh` (docs/opentofu.md), with nothing of the
    account's caches in that HOME: the provider carries its protocol stubs, and works there."""
    root = short_tmpdir("np-home-")
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("NETPEER_CACHE_DIR", "NETPEER_TOFU_STUBS")}
        out = subprocess.run(["bash", str(ROOT / "scripts/install-tofu-provider.sh")], capture_output=True,
                             text=True, timeout=900, env={**env, "HOME": str(root), "PYTHON": sys.executable})
        assert out.returncode == 0, out.stderr
        home = Home(root, tofu_bin(), install=False)
        m = Module(home, root / "m", example="tenant-a", NETPEER_ENDPOINT=netpeerd.endpoint,
                   NETPEER_TOKEN=netpeerd.token("team-a"))
        m.init()
        m.apply()
        assert m.outputs()["phase"] == "Pending"
        m.run("destroy", "-auto-approve", "-input=false")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.pulumi
def test_typescript_sdk_tarball_in_a_fresh_program(dist, stacks, netpeerd, pulumi_languages, tmp_path):
    """`npm install ./netpeer-pulumi-V.tgz` in a copy of the TypeScript example with no node_modules:
    the program runs on what npm installed."""
    tgz = dist / f"netpeer-pulumi-{VERSION}.tgz"
    program = tmp_path / "typescript-tenant"
    shutil.copytree(ROOT / "examples" / "typescript-tenant", program)
    shutil.copy(tgz, program)
    pins = re.search(r"NPM_PINS=\((.*)\)", (ROOT / "scripts/install-pulumi-languages.sh").read_text()).group(1)
    out = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error",
                          f"./{tgz.name}", *json.loads("[" + ", ".join(pins.split()) + "]")],
                         cwd=program, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    sdk = json.loads((program / "node_modules" / "@netpeer" / "pulumi" / "package.json").read_text())
    assert sdk["version"] == VERSION
    assert json.loads((program / "package.json").read_text())["dependencies"]["@netpeer/pulumi"].endswith(tgz.name)
    b = stacks(str(program), netpeerd.token("team-b"))
    b.up()
    assert (b.outputs()["phase"], b.outputs()["reason"]) == ("Pending", "AwaitingRemote")
