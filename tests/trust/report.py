"""Figures measured by the trust tests, printed at the end of the pytest run
(and written as JSON to $NETPEER_TRUST_REPORT when set), for docs/reliability.md."""

from __future__ import annotations

import json
import os
import threading

FIGURES: dict[str, dict[str, object]] = {}
_lock = threading.Lock()


def record(section: str, key: str, value: object) -> None:
    with _lock:
        FIGURES.setdefault(section, {})[key] = value


def add(section: str, key: str, amount: int = 1) -> None:
    with _lock:
        d = FIGURES.setdefault(section, {})
        d[key] = d.get(key, 0) + amount


def lines() -> list[str]:
    out = []
    for section, figures in FIGURES.items():
        out.append(f"[{section}]")
        for key, value in figures.items():
            out.append(f"  {key}: {value}")
    return out


def write_json() -> None:
    path = os.environ.get("NETPEER_TRUST_REPORT")
    if path and FIGURES:
        with open(path, "w") as f:
            json.dump(FIGURES, f, indent=2, sort_keys=False, default=str)


def publish(request, section: str, figures: dict) -> None:
    """Records ``figures`` under ``section`` and prints them on the terminal
    as one ``[section] {json}`` line, whatever pytest captures."""
    for key, value in figures.items():
        record(section, key, value)
    line = f"[{section}] {json.dumps(figures, sort_keys=True, default=str)}"
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is None or capture is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("\n" + line)
