"""Scrapes an HTTP endpoint many times, each on a new connection (as
``for i in $(seq N); do curl -s $URL; done`` would), from a few threads.
Run as a process of its own, so that its work does not compete with the
test's own timed calls for one interpreter lock:

    python -m tests.trust.scraper HOST PORT COUNT THREADS

Prints a JSON line every 500 scrapes and when done: the status codes
answered, the failures by kind, and how long it took.
"""

from __future__ import annotations

import collections
import json
import socket
import sys
import threading
import time

REQUEST = b"GET /metrics HTTP/1.1\r\nHost: scraper\r\nConnection: close\r\n\r\n"


def scrape(host: str, port: int, timeout: float = 30.0) -> str:
    """One scrape on a new connection; its status code, or the failure's name."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(REQUEST)
            answer = bytearray()
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
    except OSError as exc:
        return type(exc).__name__
    first = bytes(answer[:64]).split(b"\r\n", 1)[0].split()
    return first[1].decode() if len(first) > 1 and first[0].startswith(b"HTTP/") else "garbled"


def main(host: str, port: int, count: int, threads: int) -> None:
    outcomes: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    left = iter(range(count))

    def run():
        while True:
            with lock:
                if next(left, None) is None:
                    return
            outcome = scrape(host, port)
            with lock:
                outcomes[outcome] += 1
                if sum(outcomes.values()) % 500 == 0:
                    say()

    def say():
        print(json.dumps({"outcomes": dict(outcomes), "seconds": round(time.monotonic() - t0, 2)}), flush=True)

    t0 = time.monotonic()
    workers = [threading.Thread(target=run) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    say()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
