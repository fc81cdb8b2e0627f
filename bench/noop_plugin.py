"""A do-nothing Pulumi provider plugin in Python: the baseline netpeer's
plugin is measured against. Same server (``pulumi.provider.experimental``),
same resource shapes, property names and outputs as ``netpeer:index:Network``
and ``NetworkPeering`` (package ``noop``; outputs as ``bench.pulumi_noop``
shapes them), no I/O: check echoes, diff compares, create invents an id.

    python -m bench.noop_plugin ENGINE_ADDRESS      # as the engine starts it (pulumi-resource-noop)
"""

from __future__ import annotations

import json
import sys
import uuid

from pulumi.provider.experimental import provider as p
from pulumi.provider.experimental.property_value import PropertyValue
from pulumi.provider.experimental.server import main as serve

from bench.pulumi_noop import shaped
from netpeer_provider.plugin import values  # property values <-> plain values only (no provider code)

VERSION = "0.0.1"
_STRING = {"type": "string"}
SCHEMA = {
    "name": "noop", "version": VERSION,
    "resources": {
        "noop:index:Network": {
            "inputProperties": {"namespace": _STRING, "name": _STRING,
                                "subnets": {"type": "array", "items": _STRING}},
            "properties": {"namespace": _STRING, "name": _STRING, "uid": _STRING,
                           "subnets": {"type": "array", "items": _STRING}},
        },
        "noop:index:NetworkPeering": {
            "inputProperties": {"namespace": _STRING, "network": _STRING, "name": _STRING, "remoteNetwork": _STRING},
            "properties": {"namespace": _STRING, "network": _STRING, "name": _STRING, "remoteNetwork": _STRING,
                           "phase": _STRING},
        },
    },
}


def _shaped(props, refreshed: bool = False) -> dict[str, PropertyValue]:
    """The outputs netpeer's plugin gives for these inputs (names and sizes: ``pulumi_noop.shaped``)."""
    return values.props_to_pulumi(shaped({values.snake_case(k): values.to_core(v) for k, v in props.items()},
                                         refreshed))


class Noop(p.Provider):
    async def get_schema(self, request: p.GetSchemaRequest) -> p.GetSchemaResponse:
        return p.GetSchemaResponse(json.dumps(SCHEMA))

    async def check(self, request: p.CheckRequest) -> p.CheckResponse:
        news = dict(request.new_inputs)
        news.setdefault("name", PropertyValue(request.name))
        return p.CheckResponse(news)

    async def diff(self, request: p.DiffRequest) -> p.DiffResponse:
        changed = [k for k, v in request.new_inputs.items() if request.old_state.get(k) != v]
        return p.DiffResponse(changes=bool(changed), diffs=changed)

    async def create(self, request: p.CreateRequest) -> p.CreateResponse:
        if request.preview:
            return p.CreateResponse("", dict(request.properties))
        return p.CreateResponse(str(uuid.uuid4()), _shaped(request.properties))

    async def read(self, request: p.ReadRequest) -> p.ReadResponse:
        return p.ReadResponse(request.resource_id, _shaped(request.properties, refreshed=True), request.inputs)

    async def update(self, request: p.UpdateRequest) -> p.UpdateResponse:
        return p.UpdateResponse(_shaped(request.news))

    async def delete(self, request: p.DeleteRequest) -> None:
        return None


if __name__ == "__main__":
    serve(sys.argv[1:], VERSION, Noop())
