"""The gRPC side: tfplugin6.Provider, plugin.GRPCController and plugin.GRPCStdio over a Provider.

Each RPC decodes its DynamicValues with the schema of the type it names, calls one method of the
:class:`~netpeer_provider.tofu.provider.Provider`, and encodes the answer. A :class:`TofuError`
becomes error diagnostics; any other exception becomes an "internal error" diagnostic (and a
traceback on stderr, which OpenTofu keeps in its log).
"""

from __future__ import annotations

import sys
import threading
import traceback
from concurrent import futures
from typing import Any, Callable

import grpc

from . import _stubs
from .codec import CodecError, contains_unknown, decode, encode_msgpack, from_json_value
from .provider import ERROR, Diagnostic, Name, Plan, Provider, TofuError, _collected, error

MAX_MESSAGE = 256 << 20


class _Rpc:
    """Runs one handler: diagnostics collection, errors -> diagnostics."""

    def __init__(self, tf: Any):
        self.tf = tf

    def diag_pb(self, d: Diagnostic) -> Any:
        tf = self.tf
        sev = tf.Diagnostic.ERROR if d.severity == ERROR else tf.Diagnostic.WARNING
        msg = tf.Diagnostic(severity=sev, summary=d.summary, detail=d.detail)
        if d.attribute:
            msg.attribute.CopyFrom(self.path_pb(d.attribute))
        return msg

    def path_pb(self, path: tuple) -> Any:
        steps = []
        for i, p in enumerate(path):
            if i == 0 or isinstance(p, Name):
                steps.append(self.tf.AttributePath.Step(attribute_name=str(p)))
            elif isinstance(p, int) and not isinstance(p, bool):
                steps.append(self.tf.AttributePath.Step(element_key_int=p))
            else:
                steps.append(self.tf.AttributePath.Step(element_key_string=str(p)))
        return self.tf.AttributePath(steps=steps)

    def run(self, context: grpc.ServicerContext, response_cls: Any, body: Callable[[], Any]) -> Any:
        diags: list[Diagnostic] = []
        token = _collected.set(diags)
        try:
            response = body()
        except TofuError as exc:
            diags.extend(exc.diagnostics)
            response = response_cls()
        except CodecError as exc:
            diags.append(error("Provider value does not match its schema", str(exc),
                               exc.path[:1] if exc.path else None))
            response = response_cls()
        except Exception as exc:  # a bug in a hook: tell the user, keep serving
            traceback.print_exc(file=sys.stderr)
            diags.append(error("Internal error in the provider", f"{type(exc).__name__}: {exc}"))
            response = response_cls()
        finally:
            _collected.reset(token)
        response.diagnostics.extend(self.diag_pb(d) for d in diags)
        return response


def build_servicers(provider: Provider, stubs: Any, on_shutdown: Callable[[], None]) -> tuple[Any, Any, Any]:
    tf = stubs.tf
    rpc = _Rpc(tf)
    provider_schema, resource_schemas, data_schemas = provider.get_schemas()

    def res_type(type_name: str) -> Any:
        if type_name not in resource_schemas:
            raise TofuError(f"unknown resource type {type_name!r}")
        return resource_schemas[type_name].type

    def data_type(type_name: str) -> Any:
        if type_name not in data_schemas:
            raise TofuError(f"unknown data source {type_name!r}")
        return data_schemas[type_name].type

    def dv(value: Any, t: Any) -> Any:
        return tf.DynamicValue(msgpack=encode_msgpack(value, t))

    def final_state(type_name: str, state: dict | None, what: str) -> dict | None:
        """States returned by create/update/read/import must be complete objects, all known."""
        if state is None:
            return None
        if not isinstance(state, dict):
            raise TofuError(f"{type_name}: {what} returned {type(state).__name__}, not a dict")
        full = {name: state.get(name) for name in resource_schemas[type_name].names}
        extra = set(state) - set(full)
        if extra:
            raise TofuError(f"{type_name}: {what} returned unknown attribute(s) {sorted(extra)}")
        if contains_unknown(full):
            raise TofuError(f"{type_name}: {what} left values unknown")
        return full

    class ProviderServicer(stubs.tf_grpc.ProviderServicer):
        def GetMetadata(self, request, context):
            def body():
                return tf.GetMetadata.Response(
                    server_capabilities=tf.ServerCapabilities(get_provider_schema_optional=False, plan_destroy=True),
                    resources=[tf.GetMetadata.ResourceMetadata(type_name=n) for n in resource_schemas],
                    data_sources=[tf.GetMetadata.DataSourceMetadata(type_name=n) for n in data_schemas])
            return rpc.run(context, tf.GetMetadata.Response, body)

        def GetProviderSchema(self, request, context):
            def body():
                return tf.GetProviderSchema.Response(
                    provider=provider_schema.to_proto(tf),
                    resource_schemas={n: s.to_proto(tf) for n, s in resource_schemas.items()},
                    data_source_schemas={n: s.to_proto(tf) for n, s in data_schemas.items()},
                    # plan_destroy: a destroy is planned by us too (Provider.plan_resource_change with no
                    # proposed state), so that its plan can warn (netpeer: a Bound peering withdrawn).
                    server_capabilities=tf.ServerCapabilities(plan_destroy=True))
            return rpc.run(context, tf.GetProviderSchema.Response, body)

        def GetFunctions(self, request, context):
            return rpc.run(context, tf.GetFunctions.Response, tf.GetFunctions.Response)

        def ValidateProviderConfig(self, request, context):
            def body():
                diags = provider.validate_provider_config(decode(request.config, provider_schema.type))
                return tf.ValidateProviderConfig.Response(diagnostics=[rpc.diag_pb(d) for d in diags or ()])
            return rpc.run(context, tf.ValidateProviderConfig.Response, body)

        def ValidateResourceConfig(self, request, context):
            def body():
                t = request.type_name
                diags = provider.validate_resource_config(t, decode(request.config, res_type(t)))
                return tf.ValidateResourceConfig.Response(diagnostics=[rpc.diag_pb(d) for d in diags or ()])
            return rpc.run(context, tf.ValidateResourceConfig.Response, body)

        def ValidateDataResourceConfig(self, request, context):
            def body():
                t = request.type_name
                diags = provider.validate_data_source_config(t, decode(request.config, data_type(t)))
                return tf.ValidateDataResourceConfig.Response(diagnostics=[rpc.diag_pb(d) for d in diags or ()])
            return rpc.run(context, tf.ValidateDataResourceConfig.Response, body)

        def ConfigureProvider(self, request, context):
            def body():
                provider.configure(decode(request.config, provider_schema.type), request.terraform_version)
                return tf.ConfigureProvider.Response()
            return rpc.run(context, tf.ConfigureProvider.Response, body)

        def UpgradeResourceState(self, request, context):
            def body():
                t = request.type_name
                ty = res_type(t)
                raw = request.raw_state
                if raw.json:
                    import json
                    stored = json.loads(raw.json)
                elif raw.flatmap:
                    raise TofuError(f"{t}: state in the legacy flatmap format cannot be upgraded")
                else:
                    return tf.UpgradeResourceState.Response()
                if request.version == resource_schemas[t].version:
                    # Same schema: only drop what the schema no longer has, and type-check.
                    state = from_json_value({k: v for k, v in stored.items() if k in ty[1]}, ty)
                else:
                    state = provider.upgrade_resource_state(t, request.version, stored)
                return tf.UpgradeResourceState.Response(upgraded_state=dv(final_state(t, state, "upgrade"), ty))
            return rpc.run(context, tf.UpgradeResourceState.Response, body)

        def ReadResource(self, request, context):
            def body():
                t = request.type_name
                ty = res_type(t)
                current = decode(request.current_state, ty)
                new = None if current is None else provider.read_resource(t, current)
                return tf.ReadResource.Response(new_state=dv(final_state(t, new, "read"), ty),
                                                private=request.private)
            return rpc.run(context, tf.ReadResource.Response, body)

        def PlanResourceChange(self, request, context):
            def body():
                t = request.type_name
                ty = res_type(t)
                plan = provider.plan_resource_change(t, decode(request.prior_state, ty),
                                                     decode(request.proposed_new_state, ty),
                                                     decode(request.config, ty))
                if not isinstance(plan, Plan):
                    raise TofuError(f"{t}: plan returned {type(plan).__name__}, not a Plan")
                return tf.PlanResourceChange.Response(
                    planned_state=dv(plan.planned, ty),
                    requires_replace=[rpc.path_pb(tuple(p) if not isinstance(p, str) else (p,))
                                      for p in plan.requires_replace],
                    planned_private=request.prior_private)
            return rpc.run(context, tf.PlanResourceChange.Response, body)

        def ApplyResourceChange(self, request, context):
            def body():
                t = request.type_name
                ty = res_type(t)
                planned = decode(request.planned_state, ty)
                new = provider.apply_resource_change(t, decode(request.prior_state, ty), planned,
                                                     decode(request.config, ty))
                return tf.ApplyResourceChange.Response(new_state=dv(final_state(t, new, "apply"), ty),
                                                       private=request.planned_private,
                                                       legacy_type_system=provider.outlived_plan(t, planned, new))
            return rpc.run(context, tf.ApplyResourceChange.Response, body)

        def ImportResourceState(self, request, context):
            def body():
                t = request.type_name
                ty = res_type(t)
                states = provider.import_resource_state(t, request.id)
                return tf.ImportResourceState.Response(imported_resources=[
                    tf.ImportResourceState.ImportedResource(type_name=t, state=dv(final_state(t, s, "import"), ty))
                    for s in states])
            return rpc.run(context, tf.ImportResourceState.Response, body)

        def ReadDataSource(self, request, context):
            def body():
                t = request.type_name
                ty = data_type(t)
                config = decode(request.config, ty)
                state = provider.read_data_source(t, config)
                if not isinstance(state, dict) or contains_unknown(state):
                    raise TofuError(f"{t}: read must return a dict of known values")
                full = {name: state.get(name) for name in data_schemas[t].attributes}
                return tf.ReadDataSource.Response(state=dv(full, ty))
            return rpc.run(context, tf.ReadDataSource.Response, body)

        def StopProvider(self, request, context):
            try:
                provider.stop()
            except Exception as exc:  # reported in the response, as the protocol wants
                return tf.StopProvider.Response(Error=f"{type(exc).__name__}: {exc}")
            return tf.StopProvider.Response()

    class Controller(stubs.ctl_grpc.GRPCControllerServicer):
        def Shutdown(self, request, context):
            # Stop from another thread: this handler runs inside the server being stopped.
            threading.Thread(target=on_shutdown, name="shutdown", daemon=True).start()
            return stubs.ctl.Empty()

    class Stdio(stubs.stdio_grpc.GRPCStdioServicer):
        def StreamStdio(self, request, context):
            # Our stdout/stderr go straight to OpenTofu's pipes; nothing to forward: end the stream.
            return iter(())

    return ProviderServicer(), Controller(), Stdio()


def build_server(provider: Provider, on_shutdown: Callable[[], None], *, max_workers: int = 16) -> grpc.Server:
    """A grpc.Server with the three services registered (no port added yet). Plaintext: mutual TLS,
    when OpenTofu asks for it, is done in front of it (plugin.TlsFront)."""
    stubs = _stubs.load()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tfplugin"),
                         options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                                  ("grpc.max_send_message_length", MAX_MESSAGE)])
    prov, ctl, stdio = build_servicers(provider, stubs, on_shutdown)
    stubs.tf_grpc.add_ProviderServicer_to_server(prov, server)
    stubs.ctl_grpc.add_GRPCControllerServicer_to_server(ctl, server)
    stubs.stdio_grpc.add_GRPCStdioServicer_to_server(stdio, server)
    return server


__all__ = ["build_server", "build_servicers"]
