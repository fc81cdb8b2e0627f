"""The suite runs this checkout's sources, even when its Python environment
has another checkout installed in editable mode: they come first on the
path, here and in every process the tests start (netpeerd, the Pulumi
language hosts and plugins inherit PYTHONPATH)."""

import os
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
_SOURCES = [str(_ROOT / d) for d in ("", "dev", "provider", "sdk")]  # pyproject.toml's package-dir
sys.path[:0] = [p for p in _SOURCES if p not in sys.path]
os.environ["PYTHONPATH"] = os.pathsep.join(
    _SOURCES + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in _SOURCES])
