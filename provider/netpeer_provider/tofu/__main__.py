"""``python -m netpeer_provider.tofu MODULE:FACTORY``: serve the Provider that FACTORY() returns.

This is what the executable in OpenTofu's plugin directory runs (a two-line shell wrapper is enough):

    #!/bin/sh
    exec /path/to/venv/bin/python -m netpeer_provider.tofu mypackage.mymodule:MyProvider "$@"
"""

from __future__ import annotations

import importlib
import sys

from .plugin import PluginError, check_environment, main


def _factory(spec: str):
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise PluginError(f"expected MODULE:FACTORY, got {spec!r}")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"cannot load the provider {spec!r}: {exc}") from None
    return obj


if __name__ == "__main__":
    try:
        check_environment()  # before importing the provider's module, which may be heavy
        if len(sys.argv) < 2:  # further arguments (none from OpenTofu today) are ignored
            raise PluginError("usage: python -m netpeer_provider.tofu MODULE:FACTORY")
        factory = _factory(sys.argv[1])
    except PluginError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
    main(factory)
