"""How watch streams learn that something changed (``netpeer.api.server``'s Watch)."""

from __future__ import annotations

import asyncio
import logging

LOG = logging.getLogger(__name__)


class Notifier:
    """Wakes the watchers of the namespaces that changed, and only those.

    One task (``run``) follows the newest revision: at once when this process
    committed something (``poke``), and every ``POLL`` seconds for changes
    committed by another process. Each watcher waits on its namespace's
    event; a revoked token wakes them all (``wake_all``) to re-authenticate.
    So an idle watcher costs a coroutine, and a commit costs one store query
    whatever the number of watchers."""

    POLL = 1.0
    #: A watcher re-reads at least this often even if nothing woke it.
    SAFETY = 30.0

    def __init__(self):
        self.watchers = 0
        self._events: dict[str, asyncio.Event] = {}
        self._kick: asyncio.Event | None = None
        self.head: int | None = None

    def poke(self) -> None:
        """In the event loop: something was committed here."""
        if self._kick is not None:
            self._kick.set()

    def wake_all(self) -> None:
        events, self._events = self._events, {}
        for event in events.values():
            event.set()

    def event_for(self, namespace: str) -> asyncio.Event:
        event = self._events.get(namespace)
        if event is None:
            event = self._events[namespace] = asyncio.Event()
        return event

    async def run(self, changed) -> None:
        """``changed(after)`` -> (newest revision, namespaces changed after ``after``)."""
        self._kick = asyncio.Event()
        while True:
            try:
                await asyncio.wait_for(self._kick.wait(), self.POLL)
            except asyncio.TimeoutError:
                pass
            self._kick.clear()
            try:
                head, namespaces = await changed(self.head if self.head is not None else 0)
            except Exception as exc:   # the next round tries again
                LOG.debug("watch notifier: %s", exc)
                continue
            if self.head is None:
                self.head = head
                continue
            self.head = head
            for ns in namespaces:
                event = self._events.pop(ns, None)
                if event is not None:
                    event.set()
