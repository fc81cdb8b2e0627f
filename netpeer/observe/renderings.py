"""The metrics endpoint's renderings of the exposition: one at a time, on
a thread of their own, paced.

A scrape is answered with a rendering begun after it arrived (never with
older figures); scrapes that wait together share the next one; after each
rendering the next waits ``pause`` times as long as it took. So renderings
take at most 1 / (1 + pause) of one core, however many scrapes arrive,
and other work in netpeerd (the API's reads) keeps its share of the
interpreter. A rendering that fails answers each of its scrapes with the
error; it is logged at most once a minute.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import time
from concurrent import futures

LOG = logging.getLogger(__name__)


class Renderings:
    """Renderings of ``registry`` on ``pool`` (one thread), for the scrapes
    of an event loop."""

    def __init__(self, registry, pool: futures.Executor, pause: float, loop: asyncio.AbstractEventLoop):
        self._registry, self._pool, self._pause, self._loop = registry, pool, pause, loop
        self._queued: dict[tuple[str, bool], tuple[object, asyncio.Future]] = {}
        self._running = False
        self._not_before = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._warned = -60.0

    def next(self, content_type: str, encoder, compress: bool) -> asyncio.Future:
        """The body of the next rendering of this kind (begun after now)."""
        key = (content_type, compress)
        if key not in self._queued:
            self._queued[key] = (encoder, self._loop.create_future())
        future = self._queued[key][1]
        self._schedule()     # may begin at once, with what is queued
        return future

    def _schedule(self) -> None:
        if self._running or self._timer is not None or not self._queued:
            return
        delay = self._not_before - self._loop.time()
        if delay > 0:
            self._timer = self._loop.call_later(delay, self._begin)
        else:
            self._begin()

    def _begin(self) -> None:
        self._timer = None
        if self._running or not self._queued:
            return
        batch, self._queued = self._queued, {}
        self._running = True
        work = self._loop.run_in_executor(self._pool, self._render, {k: enc for k, (enc, _) in batch.items()})
        work.add_done_callback(lambda done: self._end(batch, done))

    def _render(self, jobs: dict) -> tuple[dict, float]:
        """On the render thread: each kind's body, or what it raised."""
        t0 = time.monotonic()
        out = {}
        for (content_type, compress), encoder in jobs.items():
            try:
                body = encoder(self._registry)
                out[(content_type, compress)] = gzip.compress(body) if compress else body
            except Exception as exc:
                out[(content_type, compress)] = exc
        return out, time.monotonic() - t0

    def _end(self, batch: dict, done: asyncio.Future) -> None:
        self._running = False
        try:
            out, took = done.result()
        except BaseException as exc:   # the render thread was shut down
            out, took = {key: exc for key in batch}, 0.0
        self._not_before = self._loop.time() + self._pause * took
        failed = [r for r in out.values() if isinstance(r, BaseException)]
        if failed and time.monotonic() - self._warned > 60:
            LOG.warning("metrics endpoint: rendering failed: %s", failed[0])
            self._warned = time.monotonic()
        for key, (_, future) in batch.items():
            if not future.done():
                result = out[key]
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
        self._schedule()
