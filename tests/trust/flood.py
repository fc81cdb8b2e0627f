"""A hostile tenant in a process of its own (so that its threads share no
interpreter lock with netpeerd or the measuring client): ``threads`` loops
of validate-only ``BatchCreatePeerings`` of ``size`` requests towards
networks that do not exist, each loop sending the same request (made once)
again at once, whatever the answer, until SIGTERM. Writes what it got as
JSON to ``out``.

    python -m tests.trust.flood ENDPOINT TOKEN NAMESPACE NETWORKS THREADS SIZE OUT
"""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
import time

import grpc

from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc


def main(endpoint: str, token: str, namespace: str, networks: int, threads: int, size: int, out: str) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    request = pb.BatchCreatePeeringsRequest(validate_only=True, requests=[pb.CreatePeeringRequest(
        parent=f"namespaces/{namespace}/networks/m{i % networks}", peering_id=f"p{i}",
        peering=pb.Peering(remote=pb.RemoteRef(namespace="nowhere", network=f"ghost{i}"))) for i in range(size)])
    metadata = (("authorization", f"Bearer {token}"),)
    lock = threading.Lock()
    got = {"ok": 0, "refused": 0, "other": [], "retry_after": [], "ok_seconds": [], "first_call": None}

    def loop():
        with grpc.insecure_channel(endpoint) as channel:
            call = pb_grpc.NetworkServiceStub(channel).BatchCreatePeerings
            while not stop.is_set():
                started = time.monotonic()
                with lock:
                    got["first_call"] = got["first_call"] or time.time()
                try:
                    call(request, metadata=metadata, timeout=60)
                    with lock:
                        got["ok"] += 1
                        got["ok_seconds"].append(time.monotonic() - started)
                except grpc.RpcError as exc:
                    details = exc.details() or ""
                    m = re.search(r"; retry in (\d+(?:\.\d+)?) s$", details)
                    with lock:
                        if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and m:
                            got["refused"] += 1
                            if len(got["retry_after"]) < 1000:
                                got["retry_after"].append(float(m.group(1)))
                        else:
                            got["other"].append(f"{exc.code().name}: {details}")
                            if len(got["other"]) > 20:
                                stop.set()

    workers = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    while not stop.wait(0.1):
        pass
    for w in workers:
        w.join(60)
    with open(out, "w") as f:
        json.dump(got, f)


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], a[2], int(a[3]), int(a[4]), int(a[5]), a[6])
