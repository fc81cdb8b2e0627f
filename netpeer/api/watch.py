"""Watch streams: who may hold how many, their tokens' re-authentication,
and what each stream sends (``netpeer.api.server``'s Watch method is the
gRPC face of ``Watches.stream``).

A watch is admitted only once its call was authenticated, parsed and
authorized, and only within the caps of ``WatchLimits`` (per token, and in
all): a refused call leaves nothing behind. Its events come from the hub of
its namespace (``netpeer.api.notifier``) already encoded, and the method
hands those bytes to gRPC as they are (``EncodedWatch``): a change is
encoded once per namespace, not once per watcher.

Tokens are checked again without a store read per event: all the streams of
a token re-authenticate together, at once when a token was revoked here and
every ``REAUTH`` seconds (a revocation through another replica, an expiry).
A token that no longer authenticates ends all its streams with that error.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from concurrent import futures
from typing import AsyncIterator

import grpc

from netpeer import errors
from netpeer.api import convert
from netpeer.api.notifier import Encoded, Follower, Hub, Notifier
from netpeer.core.models import Caller, WatchLimits
from netpeer.reasons import Reason
from netpeer.service import Service

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class _Holder:
    """The watch streams one token holds, and the token to check again."""

    token: str
    followers: set[Follower] = dataclasses.field(default_factory=set)


class Watches:
    """The Watch streams of one server."""

    #: Every token holding streams authenticates again this often (s).
    REAUTH = 10.0

    def __init__(self, service: Service, pool: futures.Executor, limits: WatchLimits = WatchLimits()):
        self.service = service
        self.limits = limits
        self._pool = pool
        self.notifier = Notifier(self._read, self._head)
        self._holders: dict[str, _Holder] = {}
        #: Open streams (the ``netpeer_watchers`` gauge).
        self.count = 0
        self._revoked: asyncio.Event | None = None

    # ------------------------------------------------------------ reading the store
    async def _run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, contextvars.copy_context().run, fn, *args)

    def _read_encoded(self, namespace: str, network: str | None, after: int) -> tuple[list[Encoded], int, bool]:
        events, upto = self.service.watch_events(namespace, network, after)
        return ([Encoded(e.revision, e.network, convert.event_to_pb(e).SerializeToString()) for e in events], upto,
                len(events) == self.service.WATCH_BATCH)

    async def _read(self, namespace: str, network: str | None, after: int) -> tuple[list[Encoded], int, bool]:
        return await self._run(self._read_encoded, namespace, network, after)

    async def _head(self, namespace: str) -> int:
        return await self._run(self.service.watch_head, namespace)

    # ------------------------------------------------------------ admission
    def _admit(self, caller: Caller, token: str) -> Follower:
        """One more stream of ``caller``, or RESOURCE_EXHAUSTED."""
        holder = self._holders.get(caller.token_id)
        held = len(holder.followers) if holder is not None else 0
        key = "streams_per_admin_token" if caller.admin else "streams_per_token"
        most = getattr(self.limits, key)
        if held >= most:
            raise errors.ResourceExhausted(
                f"watch: token {caller.token_id} holds {held} watch streams, the most allowed (watch.{key} = "
                f"{most}); end one of them first, or ask the operator to raise the limit",
                field=f"watch.{key}", value=most, reason=Reason.STREAM_LIMIT)
        if self.count >= self.limits.streams_total:
            raise errors.ResourceExhausted(
                f"watch: netpeerd holds {self.count} watch streams, the most it allows (watch.streams_total = "
                f"{self.limits.streams_total}); try again later", field="watch.streams_total",
                value=self.limits.streams_total, reason=Reason.STREAM_LIMIT)
        if holder is None:
            holder = self._holders[caller.token_id] = _Holder(token)
        follower = Follower()
        holder.followers.add(follower)
        self.count += 1
        return follower

    def _release(self, caller: Caller, follower: Follower) -> None:
        holder = self._holders.get(caller.token_id)
        if holder is not None and follower in holder.followers:
            holder.followers.discard(follower)
            self.count -= 1
            if not holder.followers:
                del self._holders[caller.token_id]

    # ------------------------------------------------------------ the stream
    async def stream(self, caller: Caller, token: str, namespace: str, network: str | None,
                     since: int | None) -> AsyncIterator[bytes]:
        """The encoded events of a watch whose caller was authenticated and
        authorized (``Service.check_watch``): a bookmark first when
        ``since`` is None, then every change after it, in order, once."""
        follower = self._admit(caller, token)
        hub: Hub | None = None
        try:
            hub = await self.notifier.enter(namespace)
            hub.join(follower)
            if since is None:
                position = hub.cursor
                yield convert.bookmark(position).SerializeToString()
            else:
                position = since
            read_first = since is not None and since != hub.cursor   # also checks that since is a revision kept
            while True:
                if follower.ended is not None:
                    raise follower.ended
                behind = follower.index < hub.base
                if read_first or behind or position < follower.complete_after:
                    read_first = False
                    events, upto, more = await self._read(namespace, network, position)
                    for event in events:
                        yield event.data
                    position = max(position, upto)
                    if behind and not more:   # caught up: the log again
                        hub.join(follower)
                    continue
                event = hub.event(follower)
                if event is None:
                    await follower.wait()
                elif event.revision > position and network in (None, event.network):
                    yield event.data
                    position = event.revision
        finally:
            self._release(caller, follower)
            if hub is not None:
                self.notifier.leave(hub, follower)

    # ------------------------------------------------------------ tokens
    def revoked(self) -> None:
        """In the event loop: a token was revoked here."""
        if self._revoked is not None:
            self._revoked.set()

    async def reauthenticate(self) -> None:
        """Checks every token holding streams again, at once after a
        revocation and every ``REAUTH`` seconds; ends the streams of those
        that no longer authenticate."""
        self._revoked = asyncio.Event()
        while True:
            try:
                await asyncio.wait_for(self._revoked.wait(), self.REAUTH)
            except asyncio.TimeoutError:
                pass
            self._revoked.clear()
            for holder in list(self._holders.values()):
                try:
                    await self._run(self.service.authenticate, holder.token)
                except errors.Unauthenticated as exc:
                    for follower in list(holder.followers):
                        follower.end(exc)
                except Exception as exc:   # the store did not answer: the next round
                    LOG.debug("watch: checking a token again: %s", exc)


class EncodedWatch:
    """The server as the generated ``add_NetworkServiceServicer_to_server``
    sees it: everything as generated, but Watch served by ``behavior``, whose
    messages are bytes already encoded and go out as they are (gRPC would
    otherwise serialize each message again for every stream)."""

    SERVICE, METHOD = "netpeer.v1.NetworkService", "Watch"

    def __init__(self, server, behavior):
        self._server = server
        self._behavior = behavior

    def _handler(self, generated: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        return generated._replace(unary_stream=self._behavior, response_serializer=None)

    def add_generic_rpc_handlers(self, handlers) -> None:
        self._server.add_generic_rpc_handlers(tuple(_Replacing(h, self) for h in handlers))

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        if service == self.SERVICE and self.METHOD in handlers:
            handlers = {**handlers, self.METHOD: self._handler(handlers[self.METHOD])}
        self._server.add_registered_method_handlers(service, handlers)


class _Replacing(grpc.GenericRpcHandler):
    def __init__(self, inner: grpc.GenericRpcHandler, encoded: EncodedWatch):
        self._inner, self._encoded = inner, encoded

    def service(self, details):
        handler = self._inner.service(details)
        if handler is not None and details.method == f"/{EncodedWatch.SERVICE}/{EncodedWatch.METHOD}":
            return self._encoded._handler(handler)
        return handler
