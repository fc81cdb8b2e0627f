"""Raw gRPC access for the trust tests: any request, any credential, and the
status code and details of the answer (no client-side validation in the way)."""

from __future__ import annotations

import sqlite3

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc

NETWORK_RPCS = ("CreateNetwork", "GetNetwork", "ListNetworks", "UpdateNetwork", "DeleteNetwork",
                "CreatePeering", "BatchCreatePeerings", "GetPeering", "ListPeerings", "UpdatePeering", "DeletePeering")
TOKEN_RPCS = ("CreateToken", "GetCaller", "ListTokens", "RevokeToken")
STATUS_RPCS = ("GetStatus",)
ADMIN_RPCS = ("CreateToken", "ListTokens", "RevokeToken", "GetStatus")
ALL_RPCS = NETWORK_RPCS + TOKEN_RPCS + STATUS_RPCS
OK = grpc.StatusCode.OK


class Raw:
    def __init__(self, endpoint: str):
        self.channel = grpc.insecure_channel(endpoint)
        self.net = pb_grpc.NetworkServiceStub(self.channel)
        self.tok = pb_grpc.TokenServiceStub(self.channel)
        self.status = pb_grpc.StatusServiceStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def stub(self, method: str):
        stub = self.tok if method in TOKEN_RPCS else self.status if method in STATUS_RPCS else self.net
        return getattr(stub, method)

    def call(self, method: str, request, token: str | None = None, metadata=None, timeout: float = 30):
        """(status code, details, response or None)."""
        if metadata is None:
            metadata = (("authorization", f"Bearer {token}"),) if token is not None else ()
        try:
            resp = self.stub(method)(request, metadata=metadata, timeout=timeout)
            return OK, "", resp
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or "", None

    def healthy(self) -> bool:
        resp = self.health.Check(health_pb2.HealthCheckRequest(service="netpeer.v1.NetworkService"), timeout=10)
        return resp.status == health_pb2.HealthCheckResponse.SERVING


def path(method: str) -> str:
    """The gRPC path of ``method`` (``/netpeer.v1.NetworkService/GetNetwork``)."""
    service = "TokenService" if method in TOKEN_RPCS else "StatusService" if method in STATUS_RPCS else "NetworkService"
    return f"/netpeer.v1.{service}/{method}"


def request_class(method: str):
    return getattr(pb, f"{method}Request")


def store_dump(path) -> dict[str, list[tuple]]:
    """Every row of every table of the store (through its own connection)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall()) for t in tables}
    finally:
        db.close()


NB_TABLES = ("Logical_Router", "Logical_Router_Port", "Logical_Router_Static_Route", "Logical_Router_Policy",
             "Logical_Switch", "Logical_Switch_Port", "Address_Set")


def ovn_dump(ovn) -> str:
    """Every row (with its uuid) of the NB tables netpeer writes, in the
    columns netpeer writes: not those ovn-northd updates on its own (``up``)."""
    from netpeer.ovn.backend import COLUMNS
    args = []
    for t in NB_TABLES:
        # netpeerd reads ``up`` (the instances' state) but never writes it; ovn-northd sets it on
        # router-type ports when it gets to them, which under load can be in the middle of a test.
        written = [c for c in COLUMNS[t] if c != "up"]
        args += ["--", f"--columns=_uuid,{','.join(written)}", "list", t]
    return ovn.nbctl("--format=csv", "--data=bare", *args[1:])
