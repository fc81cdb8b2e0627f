"""netpeer as an OpenTofu (and Terraform) provider: the plugin protocol layer, in Python.

No Pulumi here. Layers, bottom up:

- ``codec``: the protocol's ``DynamicValue`` (MessagePack; JSON for stored states) <-> plain Python
  values, driven by a type in the protocol's notation (``"string"``, ``["map", "string"]``,
  ``["object", {...}]``...). ``UNKNOWN`` stands for a value known only after apply.
- ``schema``: ``Schema``/``Attribute`` in Python -> ``tfplugin6.Schema`` messages.
- ``provider``: ``Provider``, ``Resource``, ``DataSource``, ``Plan``, diagnostics. Plain values only.
- ``server``: the gRPC services (``tfplugin6.Provider``, ``plugin.GRPCController``,
  ``plugin.GRPCStdio``) that translate each RPC into one ``Provider`` method call.
- ``plugin``: the go-plugin handshake (magic cookie, unix socket in a private directory, mutual TLS
  with an ephemeral certificate, the ``1|6|unix|...|grpc|...`` line) and the process life cycle.

The gRPC stubs are generated at setup time from the .proto files of OpenTofu and go-plugin by
``scripts/install-opentofu.sh`` into the cache (see ``_stubs``); they are not part of netpeer.

netpeer's own provider is ``netpeer.NetpeerProvider`` (``netpeer_network``, ``netpeer_peering``, the
``netpeer_network`` data source, over ``netpeer_provider.core``; ``mapping`` derives its schema from the
core's); scripts/install-tofu-provider.sh installs it where OpenTofu looks. Writing a provider::

    from netpeer_provider.tofu import (STRING, Attribute, DataSource, Provider, Resource,
                                       Schema, TofuError, UNKNOWN)

    class Network(Resource):
        type_name = "netpeer_network"
        schema = Schema(description="A tenant network.", attributes={
            "name": Attribute(STRING, "Network name.", required=True, force_new=True),
            "cidr": Attribute(STRING, "IPv4 CIDR.", required=True, force_new=True),
            "id":   Attribute(STRING, "Identifier.", computed=True),
        })

        def validate(self, config):           # -> iterable of error()/warning() diagnostics
            return ()
        def create(self, planned, config):    # -> the new state (a dict, every value known)
            net = self.provider.client.create_network(planned["name"], planned["cidr"])
            return {**planned, "id": net.id}
        def read(self, state):                # -> the current state, or None when it is gone
            ...
        def update(self, prior, planned, config): ...
        def delete(self, state): ...
        def import_state(self, id):           # -> a (partial) state; read() runs afterwards
            return {"id": id}

    class NetworkData(DataSource):
        type_name = "netpeer_network"
        schema = Schema(attributes={...})
        def read(self, config): ...           # -> the full state

    class NetpeerProvider(Provider):
        schema = Schema(attributes={"endpoint": Attribute(STRING, optional=True), ...})
        resources = (Network,)
        data_sources = (NetworkData,)

        def configure(self, config, tofu_version):
            self.client = make_client(config["endpoint"] or os.environ.get(...))

and an executable named ``terraform-provider-netpeer_v0.1.0`` in the plugin directory that runs
``python -m netpeer_provider.tofu mymodule:NetpeerProvider``.

Rules the server enforces for you: a state is a dict with every schema attribute (missing ones are
null), the values returned by create/update/read/import must all be known, planned values may be
``UNKNOWN``. The default ``Resource.plan`` marks computed attributes that the configuration leaves
null as ``UNKNOWN`` on create, asks for replacement when a ``force_new`` attribute changes, and keeps
prior computed values on update; override it for anything finer. Errors: raise ``TofuError``
(summary, detail, attribute path such as ``"name"`` or ``("tags", "env")``); warnings: return them
from ``validate`` or call ``warn(...)`` from any hook. Any other exception is reported to the user as
an internal error of the provider, with its traceback on stderr (in OpenTofu's log).
Sets arrive and leave as lists. ``UNKNOWN`` refuses truth tests: compare with ``is UNKNOWN``.
``Provider`` methods (``plan_resource_change``, ``apply_resource_change``, ...) can be overridden to
take over an RPC for every type at once.
"""

from .codec import (BOOL, DYNAMIC, NUMBER, STRING, UNKNOWN, CodecError, list_of, map_of, object_of, set_of,
                    tuple_of)
from .provider import (DataSource, Diagnostic, Plan, Provider, Resource, TofuError, error, warn,
                       warning)
from .schema import Attribute, Schema

__all__ = [
    "BOOL", "DYNAMIC", "NUMBER", "STRING", "UNKNOWN", "CodecError", "list_of", "map_of", "object_of", "set_of",
    "tuple_of", "DataSource", "Diagnostic", "Plan", "Provider", "Resource", "TofuError", "error", "warn",
    "warning", "Attribute", "Schema",
]
