"""How watch streams get the changes of their namespace (``netpeer.api.watch``).

The store numbers each namespace's changes, and keeps the order of all of
them in a sequence of its own. One task (``Notifier.run``) follows that
sequence: at once when this process committed something (``poke``), and
every ``POLL`` seconds for what other replicas committed; it wakes the hub
of each namespace that changed.

A hub exists while its namespace has a watcher, and only then: nothing is
kept for a namespace nobody watches. Woken, it reads the new events of its
namespace once and encodes each once (on the read pool), appends them to a
log all its watchers share, and wakes them, a few at a time so that other
calls go on in between; each sends the bytes from its own place in the log.
A change costs one store query and one encoding per namespace, and each
watcher the sending of bytes made once. The log keeps what some watcher has
not sent yet, at most ``Hub.LOG`` events: a watcher that falls further
behind (it reads slowly) is not waited for; it reads the store itself until
it has caught up, and follows the log again.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from typing import Awaitable, Callable

from netpeer.errors import NetpeerError, OutOfRange

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Encoded:
    """One event of a namespace, encoded once for all its watchers."""

    revision: int
    network: str
    data: bytes


#: ``read(namespace, network, after)`` -> (the events after revision ``after``,
#: the revision through which they are complete, whether more may follow).
Read = Callable[[str, "str | None", int], Awaitable[tuple[list[Encoded], int, bool]]]


class Follower:
    """One watcher's place in its hub's log."""

    def __init__(self):
        #: The place in the hub's log of the next event to send; below the
        #: log's start (``Hub.base``), the watcher fell behind.
        self.index = 0
        #: Through the log, the watcher gets every event after this revision.
        self.complete_after = 0
        #: Why the watch must end (a revoked token), once it must.
        self.ended: NetpeerError | None = None
        self._ready = asyncio.Event()

    def wake(self) -> None:
        self._ready.set()

    def end(self, error: NetpeerError) -> None:
        self.ended = error
        self._ready.set()

    async def wait(self) -> None:
        self._ready.clear()
        await self._ready.wait()


class Hub:
    """The watchers of one namespace, the one reader of its changes and the
    log of those some watcher has not sent yet."""

    #: Events the log keeps for watchers that have not sent them yet.
    LOG = 1024
    #: Watchers woken between two turns of the event loop.
    CHUNK = 32
    #: Reads at least this often even if nothing woke it (s).
    SAFETY = 30.0

    def __init__(self, namespace: str, read: Read, head: Callable[[str], Awaitable[int]]):
        self.namespace = namespace
        self.followers: set[Follower] = set()
        self.log: list[Encoded] = []
        #: The place of ``log[0]``, counted from the hub's first event.
        self.base = 0
        #: Every event up to this revision is in the log or was sent by every follower.
        self.cursor = 0
        self.members = 0
        self._read, self._head = read, head
        self._woken = asyncio.Event()
        self._task: asyncio.Task | None = None
        # Tasks of the hub's own, not of the watch that made it (its request id, its logs).
        self.ready = asyncio.get_running_loop().create_task(self._start(), context=contextvars.Context())

    async def _start(self) -> None:
        self.cursor = await self._head(self.namespace)
        self._task = asyncio.get_running_loop().create_task(self._run())

    @property
    def end(self) -> int:
        return self.base + len(self.log)

    def wake(self) -> None:
        self._woken.set()

    def join(self, follower: Follower) -> None:
        """From now on ``follower`` gets, through the log, every event after the cursor."""
        follower.index = self.end
        follower.complete_after = self.cursor
        self.followers.add(follower)

    def event(self, follower: Follower) -> Encoded | None:
        """The next event of the log for ``follower``, if any (moving it on)."""
        if follower.index < self.base or follower.index >= self.end:
            return None
        follower.index += 1
        return self.log[follower.index - 1 - self.base]

    def close(self) -> None:
        self.ready.cancel()
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._woken.wait(), self.SAFETY)
            except asyncio.TimeoutError:
                pass
            self._woken.clear()
            try:
                more = True
                while more:
                    batch, upto, more = await self._read(self.namespace, None, self.cursor)
                    # Log and cursor move together: a watcher that joins from
                    # now on follows the log from its end.
                    self._append(batch)
                    self.cursor = max(self.cursor, upto)
                    if batch:
                        await self._wake_all()
            except OutOfRange:
                # What it had not read yet was pruned (nothing woke it for a
                # day): every watcher finds out for itself, from the store.
                self.cursor = await self._head(self.namespace)
                self._append([])
                for follower in self.followers:
                    follower.index = self.base - 1
                await self._wake_all()
            except Exception as exc:   # the store did not answer: again in a moment
                LOG.warning("watch: reading the changes of namespace %s failed: %s", self.namespace, exc)
                await asyncio.sleep(1.0)
                self._woken.set()

    def _append(self, batch: list[Encoded]) -> None:
        """Adds ``batch`` to the log, and drops what every watcher has sent
        and, beyond ``LOG`` events, what the slowest have not (they read the
        store)."""
        self.log.extend(batch)
        sent = min((f.index for f in self.followers), default=self.end)
        drop = min(len(self.log), max(sent - self.base, len(self.log) - self.LOG))
        if drop > 0:
            del self.log[:drop]
            self.base += drop

    async def _wake_all(self) -> None:
        followers = list(self.followers)
        for start in range(0, len(followers), self.CHUNK):
            if start:
                await asyncio.sleep(0)   # the loop's other calls, and the watchers woken so far
            for follower in followers[start:start + self.CHUNK]:
                follower.wake()


class Notifier:
    """Follows the store's sequence of changes and wakes the hubs of the
    namespaces that changed. ``read`` and ``head`` run on the read pool."""

    POLL = 1.0

    def __init__(self, read: Read, head: Callable[[str], Awaitable[int]]):
        self.hubs: dict[str, Hub] = {}
        self._read, self._head = read, head
        self._kick: asyncio.Event | None = None
        self.sequence: int | None = None

    def poke(self) -> None:
        """In the event loop: something was committed here."""
        if self._kick is not None:
            self._kick.set()

    async def enter(self, namespace: str) -> Hub:
        """The hub of ``namespace``, made if it has none, counting one more
        member until ``leave``. Only for a validated, authorized watch."""
        hub = self.hubs.get(namespace)
        if hub is None:
            hub = self.hubs[namespace] = Hub(namespace, self._read, self._head)
        hub.members += 1
        try:
            await asyncio.shield(hub.ready)
        except BaseException:
            self.leave(hub, None)
            raise
        return hub

    def leave(self, hub: Hub, follower: Follower | None) -> None:
        """One member less; the hub goes with its last one."""
        if follower is not None:
            hub.followers.discard(follower)
        hub.members -= 1
        if hub.members == 0:
            hub.close()
            if self.hubs.get(hub.namespace) is hub:
                del self.hubs[hub.namespace]

    async def run(self, changed: Callable[[int], Awaitable[tuple[int, set[str]]]]) -> None:
        """``changed(after)`` -> (the newest place in the sequence, namespaces changed after ``after``)."""
        self._kick = asyncio.Event()
        while True:
            try:
                await asyncio.wait_for(self._kick.wait(), self.POLL)
            except asyncio.TimeoutError:
                pass
            self._kick.clear()
            try:
                newest, namespaces = await changed(self.sequence if self.sequence is not None else 0)
            except Exception as exc:   # the next round tries again
                LOG.debug("watch notifier: %s", exc)
                continue
            first, self.sequence = self.sequence is None, newest
            if first:   # whatever committed before the first look: every hub reads
                namespaces = set(self.hubs)
            for ns in namespaces:
                hub = self.hubs.get(ns)
                if hub is not None:
                    hub.wake()
