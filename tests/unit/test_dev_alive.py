"""``netpeer_dev.daemons.alive``, which every stop and kill -9 of the dev
stack waits on: a process killed with many threads (netpeerd has dozens)
shows its first thread as a zombie at once, while the others still exit and
its sockets still accept connections (then reset them). It is gone only when
the last thread is: a client that connects after the wait must be refused,
so that it moves on to another replica instead of losing its call."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from netpeer_dev.daemons import alive
from tests.support import short_tmpdir, wait_until

_BUSY = r'''
import socket, sys, threading, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(16)
memory = [bytearray(1_000_000) for _ in range(150)]   # touched: an address space that takes a moment to free
for m in memory:
    m[::4096] = b"x" * len(m[::4096])
for _ in range(40):
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
print("ready", flush=True)
time.sleep(600)
'''


def test_a_killed_process_is_alive_until_its_last_thread_is_gone() -> None:
    root = short_tmpdir("np-al-")
    path = str(root / "busy.sock")
    try:
        for _ in range(3):
            proc = subprocess.Popen([sys.executable, "-c", _BUSY, path], stdout=subprocess.PIPE, text=True)
            try:
                assert proc.stdout.readline().strip() == "ready"
                assert alive(proc.pid)
                os.kill(proc.pid, signal.SIGKILL)
                # not reaped: it stays a zombie, which counts as gone once alone
                wait_until(lambda: not alive(proc.pid), 30, "still alive 30 s after SIGKILL", step=0.001)
                client = socket.socket(socket.AF_UNIX)
                try:
                    client.connect(path)
                    accepted = True
                except ConnectionRefusedError:
                    accepted = False
                finally:
                    client.close()
                assert not accepted, "the socket of a process counted as gone accepted a connection"
            finally:
                proc.kill()
                proc.wait(30)
                proc.stdout.close()
            os.unlink(path)
    finally:
        shutil.rmtree(root, ignore_errors=True)
