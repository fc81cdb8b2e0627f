"""A call whose caller gave up while netpeerd was still working on it: the
status netpeerd then sends has no one to go to. A real gRPC server and
client in this process; the method waits past the caller's deadline, then
answers as netpeerd's methods do (``netpeer.api.server.abort``, or
``netpeer.api.intake.fail``, which raises nothing)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import threading

import grpc
import pytest

from netpeer.api import intake
from netpeer.api.server import abort
from tests.support import short_tmpdir


def serve(endpoint: str, answer, ready: threading.Event, stop: threading.Event, ended: list) -> None:
    async def late(request, context):
        try:
            await asyncio.sleep(2)   # past the caller's deadline: gRPC cancels the wait
        except asyncio.CancelledError:
            pass
        try:
            await answer(context)
        except BaseException as exc:
            ended.append(type(exc).__name__)
            raise
        ended.append("returned")

    async def main():
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "t.T", {"Late": grpc.unary_unary_rpc_method_handler(late)}),))
        server.add_insecure_port(endpoint)
        await server.start()
        ready.set()
        while not stop.is_set():   # not polling a condition of the test: the server's loop runs until stopped
            await asyncio.sleep(0.05)
        await server.stop(0)
    asyncio.run(main())


def call_late(caplog, answer) -> tuple[list, list]:
    """(how the method's answer ended, what was logged at ERROR)."""
    directory = short_tmpdir()
    endpoint = f"unix://{directory / 's.sock'}"
    ready, stop, ended = threading.Event(), threading.Event(), []
    thread = threading.Thread(target=serve, args=(endpoint, answer, ready, stop, ended), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        with caplog.at_level(logging.ERROR), grpc.insecure_channel(endpoint) as channel:
            with pytest.raises(grpc.RpcError) as got:
                channel.unary_unary("/t.T/Late")(b"", timeout=0.3)
            assert got.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            for _ in range(100):
                if ended:
                    break
                threading.Event().wait(0.05)
    finally:
        stop.set()
        thread.join(10)
        shutil.rmtree(directory, ignore_errors=True)
    return ended, [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_an_answer_to_a_caller_that_gave_up_ends_the_call_quietly(caplog):
    ended, errors = call_late(caplog, lambda context: abort(context, (grpc.StatusCode.DEADLINE_EXCEEDED,
                                                             "deadline exceeded before the call ran", ()), ()))
    assert ended == ["CancelledError"] and errors == [], (ended, errors)


def test_an_error_set_for_a_caller_that_gave_up_ends_the_call_quietly(caplog):
    async def answer(context):
        intake.fail(context, (grpc.StatusCode.INVALID_ARGUMENT, "name: 'x' is not a network", ()), ())
    ended, errors = call_late(caplog, answer)
    assert ended == ["returned"] and errors == [], (ended, errors)
