"""Waiting for a peering to be Bound (and, if asked, its dataplane
Programmed), with status lines for the user: what ``wait_for_bound`` and
``wait_for_programmed`` do in a create or update (``peering``)."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from netpeer_provider.core.session import Session

PROGRESS_EVERY = 5.0  # seconds between two status lines while waiting for Bound


def _key(p: Mapping[str, Any]) -> str:
    return f"{p.get('namespace')}/{p.get('network')}/{p.get('name')}"


def _done(p: Mapping[str, Any], programmed: bool) -> bool:
    if p["phase"] == "Failed":
        return True
    return p["phase"] == "Bound" and (not programmed or p.get("dataplane") != "Programming")


def wait_for_bound(session: Session, client, p: dict[str, Any], seconds: float, *, programmed: bool = False,
                   clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Watches the peering until it is Bound (with ``programmed``: Bound and
    its dataplane Programmed) or Failed, for at most ``seconds`` (0: return at
    once), and returns it as last seen, whatever its phase: the half is never
    withdrawn (the other side may be waiting for it). Status lines go to
    ``session.report`` at the start, when the phase, reason or dataplane
    changes, every ``PROGRESS_EVERY`` seconds, and at the end when it is
    Bound (Programmed) or Failed."""
    if not seconds or _done(p, programmed):
        return p
    key, goal = _key(p), "Programmed" if programmed else "Bound"
    start = last = clock()
    deadline = start + float(seconds)

    def state(p: Mapping[str, Any]) -> tuple[str, ...]:
        return (p["phase"], p["reason"], p.get("dataplane") or "") if programmed else (p["phase"], p["reason"])

    def said(p: Mapping[str, Any]) -> str:
        dataplane = f", dataplane {p.get('dataplane')}" if programmed and p["phase"] == "Bound" else ""
        return f"peering {key} is {p['phase']} ({p['reason']}{dataplane})"

    seen = state(p)
    session.report(f"{said(p)}; waiting up to {seconds:g}s for {goal}")
    since, fresh = None, False
    while (remaining := deadline - clock()) > 0:
        # Each watch ends after PROGRESS_EVERY seconds at most, for a status line.
        for event in client.watch(p["namespace"], p["network"], since=since,
                                  timeout=min(remaining, PROGRESS_EVERY)):
            since = event["revision"]
            if not fresh:   # the first answer (a Bookmark): re-read, for what changed before the watch began
                p, fresh = client.get_peering(p["namespace"], p["network"], p["name"]), True
            elif event.get("kind") == "peering" and event["name"] == p["name"] and "peering" in event:
                p = event["peering"]
            else:
                continue
            if _done(p, programmed):
                # The last line says how it ended (a status line stays until the next one replaces it).
                session.report(f"{said(p)}; waited {clock() - start:.0f}s of {seconds:g}s for {goal}")
                return p
            if state(p) != seen:
                seen, last = state(p), clock()
                session.report(f"{said(p)}; waited {last - start:.0f}s of {seconds:g}s for {goal}")
        now = clock()
        if now - last >= PROGRESS_EVERY and now < deadline:
            last = now
            session.report(f"{said(p)}; waited {now - start:.0f}s of {seconds:g}s for {goal}")
    return p


__all__ = ["PROGRESS_EVERY", "wait_for_bound"]
