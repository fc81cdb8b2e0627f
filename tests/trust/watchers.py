"""Many Watch streams held by a process of their own, so that receiving
their events costs the test's process nothing (its reads are what it
measures). tests/trust/test_watch_exposure.py runs

    python -m tests.trust.watchers ENDPOINT NAMESPACE TOKENS_FILE

and talks to it one JSON line each way:

    {"open": N}   opens N more watches from now (each token holds at most
                  PER_TOKEN), answers once every one of them got its bookmark
    {"hold": 1}   stops reading (what netpeerd sends waits in this process's
                  gRPC buffers, so receiving costs it nothing meanwhile)
    {"release": 1} reads again
    {"mark": 1}   counts every watch's events from zero again
    {"report": 1} answers how many are open and how many events each got
                  since the mark (or since it opened)
    {"quit": 1}   cancels them all and exits

Watches spread over connections of PER_CHANNEL streams each (netpeerd
allows 128 per connection).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections import Counter

import grpc

from netpeer.v1 import netpeer_pb2 as pb

PER_CHANNEL = 125
PER_TOKEN = 100


class Crowd:
    def __init__(self, endpoint: str, namespace: str, tokens: list[str]):
        self.endpoint, self.namespace, self.tokens = endpoint, namespace, tokens
        self.channels: list[grpc.aio.Channel] = []
        self.tasks: list[asyncio.Task] = []
        self.events: list[int] = []          # events (not bookmarks) each watch received
        self.errors: Counter = Counter()
        self.reading = asyncio.Event()
        self.reading.set()

    async def open(self, count: int) -> dict:
        # A few at a time: thousands of calls started at once on fresh
        # connections had some cancelled by the client's own channel.
        opened, pending = [], asyncio.Semaphore(100)
        for _ in range(count):
            await pending.acquire()
            i = len(self.tasks)
            if i // PER_CHANNEL >= len(self.channels):
                self.channels.append(grpc.aio.insecure_channel(
                    self.endpoint, options=[("grpc.use_local_subchannel_pool", 1)]))
            token = self.tokens[i // PER_TOKEN]
            # Messages as bytes: only the first (the bookmark) is decoded, so that
            # receiving costs this process as little as it can.
            call = self.channels[i // PER_CHANNEL].unary_stream(
                "/netpeer.v1.NetworkService/Watch", request_serializer=pb.WatchRequest.SerializeToString,
                response_deserializer=None)(pb.WatchRequest(parent=f"namespaces/{self.namespace}"),
                                            metadata=(("authorization", f"Bearer {token}"),))
            self.events.append(0)
            ready = asyncio.get_running_loop().create_future()
            ready.add_done_callback(lambda _: pending.release())
            self.tasks.append(asyncio.create_task(self._follow(i, call, ready)))
            opened.append(ready)
        results = await asyncio.gather(*opened)
        return {"open": sum(1 for r in results if r), "total": len(self.tasks)}

    async def _follow(self, i: int, call, ready: asyncio.Future) -> None:
        try:
            while True:
                if not self.reading.is_set():
                    await self.reading.wait()
                data = await call.read()
                if data is grpc.aio.EOF:
                    break
                if not ready.done():
                    ready.set_result(pb.WatchEvent.FromString(data).type == pb.WatchEvent.BOOKMARK)
                else:
                    self.events[i] += 1
        except grpc.aio.AioRpcError as exc:
            self.errors[exc.code().name] += 1
        except asyncio.CancelledError:
            call.cancel()
            raise
        finally:
            if not ready.done():
                ready.set_result(False)

    def report(self) -> dict:
        alive = [i for i, t in enumerate(self.tasks) if not t.done()]
        got = [self.events[i] for i in alive] or [0]
        return {"alive": len(alive), "min_events": min(got), "max_events": max(got),
                "errors": dict(self.errors)}

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for channel in self.channels:
            await channel.close()


async def main(endpoint: str, namespace: str, tokens_file: str) -> None:
    tokens = open(tokens_file).read().split()
    crowd = Crowd(endpoint, namespace, tokens)
    loop = asyncio.get_running_loop()
    commands: asyncio.Queue = asyncio.Queue()

    def read_stdin():
        for line in sys.stdin:
            loop.call_soon_threadsafe(commands.put_nowait, json.loads(line))
        loop.call_soon_threadsafe(commands.put_nowait, {"quit": 1})
    threading.Thread(target=read_stdin, daemon=True).start()
    while True:
        command = await commands.get()
        if "open" in command:
            answer = await crowd.open(int(command["open"]))
        elif "hold" in command:
            crowd.reading.clear()
            answer = {"held": True}
        elif "release" in command:
            crowd.reading.set()
            answer = {"held": False}
        elif "mark" in command:
            crowd.events = [0] * len(crowd.events)
            answer = {"marked": len(crowd.events)}
        elif "report" in command:
            answer = crowd.report()
        else:
            await crowd.close()
            print(json.dumps({"closed": True}), flush=True)
            return
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
