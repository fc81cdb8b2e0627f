"""Finding the gRPC stubs that scripts/install-opentofu.sh generates at setup time.

They are not part of netpeer (they come from OpenTofu's and go-plugin's .proto files): the script
writes them to ``${NETPEER_CACHE_DIR:-~/.cache/netpeer}/opentofu/vX.Y.Z/python/netpeer_tfplugin/``.
``NETPEER_TOFU_STUBS`` names another directory holding ``netpeer_tfplugin/``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

DEFAULT_OPENTOFU_VERSION = "1.12.6"  # keep in step with scripts/install-opentofu.sh
PACKAGE = "netpeer_tfplugin"

_loaded: SimpleNamespace | None = None


def stubs_dir() -> Path:
    env = os.environ.get("NETPEER_TOFU_STUBS")
    if env:
        if not (Path(env) / PACKAGE / "__init__.py").is_file():
            raise RuntimeError(f"NETPEER_TOFU_STUBS={env} has no {PACKAGE}/ package")
        return Path(env)
    root = Path(os.environ.get("NETPEER_CACHE_DIR") or Path.home() / ".cache" / "netpeer") / "opentofu"
    wanted = os.environ.get("OPENTOFU_VERSION", DEFAULT_OPENTOFU_VERSION).lstrip("v")
    candidates = [root / f"v{wanted}" / "python"]

    def version_key(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.parent.name))

    candidates += sorted(root.glob("v*/python"), key=version_key, reverse=True)
    for c in candidates:
        if (c / PACKAGE / "__init__.py").is_file():
            return c
    raise RuntimeError(f"the tfplugin6 Python stubs are missing (looked in {root}/v*/python): "
                       "run scripts/install-opentofu.sh (or scripts/setup.sh)")


def load() -> SimpleNamespace:
    """The generated modules: ``tf`` (tfplugin6_pb2), ``tf_grpc``, ``ctl``, ``ctl_grpc``, ``stdio``,
    ``stdio_grpc``."""
    global _loaded
    if _loaded is None:
        d = str(stubs_dir())
        if d not in sys.path:
            sys.path.append(d)
        from netpeer_tfplugin import (grpc_controller_pb2, grpc_controller_pb2_grpc, grpc_stdio_pb2,
                                      grpc_stdio_pb2_grpc, tfplugin6_pb2, tfplugin6_pb2_grpc)

        _loaded = SimpleNamespace(tf=tfplugin6_pb2, tf_grpc=tfplugin6_pb2_grpc, ctl=grpc_controller_pb2,
                                  ctl_grpc=grpc_controller_pb2_grpc, stdio=grpc_stdio_pb2,
                                  stdio_grpc=grpc_stdio_pb2_grpc)
    return _loaded
