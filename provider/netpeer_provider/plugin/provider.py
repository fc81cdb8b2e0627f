"""The plugin's ``Provider``: each engine request becomes one core call.

Core operations block on gRPC calls to netpeerd; they run on a thread pool
so that the engine's parallel steps overlap. Warnings and ``wait_for_bound``
progress go to the engine's log on the resource's row. Failures are raised
as the core's errors; ``server`` turns them into one-line statuses.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

from pulumi.provider.experimental import provider as p

from netpeer_provider import core
from netpeer_provider.core import inbox, schema
from netpeer_provider.plugin import schema_json, values
from netpeer_provider.pulumi_engine import Engine, PulumiTerms, field_changes

T = TypeVar("T")
_KINDS = {("add", False): p.PropertyDiffKind.ADD, ("add", True): p.PropertyDiffKind.ADD_REPLACE,
          ("delete", False): p.PropertyDiffKind.DELETE, ("delete", True): p.PropertyDiffKind.DELETE_REPLACE,
          ("update", False): p.PropertyDiffKind.UPDATE, ("update", True): p.PropertyDiffKind.UPDATE_REPLACE}


class PluginTerms(PulumiTerms):
    """Pulumi's words, with field names as programs of every language spell them (camelCase)."""

    inline_peering = "inline in the Network's `peerings`"

    def field(self, name: str) -> str:
        return schema.camel_case(name)


TERMS = PluginTerms()


def resource_of(urn: str) -> tuple[schema.Resource, Any]:
    """The resource schema and core module for a URN's type (``netpeer:index:Network``)."""
    name = urn.split("::")[2].split("$")[-1].rsplit(":", 1)[-1] if urn.count("::") >= 3 else ""
    ops = core.OPERATIONS.get(name)
    if ops is None:
        raise core.ProviderError(f"type: {urn!r} is not a netpeer resource (Network or NetworkPeering)")
    return ops.SCHEMA, ops


def kinds(d: core.Diff, resource: schema.Resource, olds: dict, news: dict) -> dict[str, p.PropertyDiff]:
    """The core's diff as per-field kinds (added, deleted, updated; replacing or not), camelCase."""
    return {schema.camel_case(name): p.PropertyDiff(_KINDS[change], True)
            for name, change in field_changes(d, resource, olds, news).items()}


class NetpeerProvider(p.Provider):
    """Network and NetworkPeering for the engine; no state besides the settings."""

    def __init__(self, engine: Engine, workers: int = 16):
        self.engine = engine
        self._config: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="netpeer")

    # -- plumbing ------------------------------------------------------------------------------
    def session(self, urn: str = "") -> core.Session:
        with self._lock:
            config = dict(self._config)
        return core.Session(core.Settings.resolve(config, terms=TERMS), TERMS, progress=self.engine.progress(urn))

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def _warn(self, urn: str, messages: tuple[str, ...]) -> None:
        for m in messages:
            self.engine.warn(m, urn)

    # -- provider ------------------------------------------------------------------------------
    async def get_schema(self, request: p.GetSchemaRequest) -> p.GetSchemaResponse:
        return p.GetSchemaResponse(schema=schema_json.text())

    async def check_config(self, request: p.CheckRequest) -> p.CheckResponse:
        try:
            core.Settings.resolve(values.settings(request.new_inputs), terms=TERMS)
        except core.ProviderError as exc:
            return p.CheckResponse(request.new_inputs, [p.CheckFailure(schema.camel_case(exc.path or ""),
                                                                        exc.message)])
        return p.CheckResponse(inputs=request.new_inputs)

    async def configure(self, request: p.ConfigureRequest) -> p.ConfigureResponse:
        config = values.settings(request.args)
        if not config:  # older engines: only the flat `netpeer:key` variables
            config = {values.snake_case(k.split(":", 1)[1]): v for k, v in request.variables.items()
                      if k.startswith("netpeer:")}
        with self._lock:
            self._config = config
        return p.ConfigureResponse(accept_secrets=True, supports_preview=True)

    async def check(self, request: p.CheckRequest) -> p.CheckResponse:
        _, ops = resource_of(request.urn)
        news = values.props_to_core(request.new_inputs)
        if news.get("name") in (None, ""):
            news["name"] = request.name  # like the Python SDK: the resource's name in the program
        clean, failures = ops.check(news)
        return p.CheckResponse(values.props_to_pulumi(clean), [
            p.CheckFailure(*check_failure(f.path, f.message)) for f in failures])

    async def diff(self, request: p.DiffRequest) -> p.DiffResponse:
        resource, ops = resource_of(request.urn)
        olds, news = values.props_to_core(request.old_state), values.props_to_core(request.new_inputs)
        d = ops.diff(olds, news)

        def ask():
            s = self.session(request.urn)
            self._warn(request.urn, ops.notes(s, olds, news))
            if d.replaces:
                self._warn(request.urn, core.review.withdrawals(olds, replacing=True))
                ops.validate_replacement(s, request.resource_id, olds, news)
        await self._run(ask)
        return p.DiffResponse(changes=d.changes, replaces=[schema.camel_case(x) for x in d.replaces],
                              delete_before_replace=d.delete_before_replace,
                              diffs=[schema.camel_case(x) for x in d.detailed()],
                              detailed_diff=kinds(d, resource, olds, news))

    async def create(self, request: p.CreateRequest) -> p.CreateResponse:
        _, ops = resource_of(request.urn)
        props = values.props_to_core(request.properties)
        s = self.session(request.urn)
        if request.preview:
            created = await self._run(lambda: ops.preview(s, props))
        else:
            created = await self._run(lambda: ops.create(s, props))
        self._warn(request.urn, created.warnings)
        return p.CreateResponse(created.id, values.props_to_pulumi(created.outputs, keep_unknowns=False))

    async def read(self, request: p.ReadRequest) -> p.ReadResponse:
        _, ops = resource_of(request.urn)
        s = self.session(request.urn)
        props = values.props_to_core(request.properties)
        if not props:  # `pulumi import`: nothing but the id; the inputs that declare it as it is
            found = await self._run(lambda: ops.import_(s, request.resource_id))
            return p.ReadResponse(found.id, values.props_to_pulumi(found.outputs),
                                  values.props_to_pulumi(found.inputs))
        found = await self._run(lambda: ops.read(s, request.resource_id, props))
        if found is None:
            return p.ReadResponse(resource_id="")  # gone: the engine drops it
        # A refresh keeps the program's inputs as they were (see common.CoreProvider.read).
        return p.ReadResponse(found.id, values.props_to_pulumi(found.outputs), request.inputs)

    async def update(self, request: p.UpdateRequest) -> p.UpdateResponse:
        _, ops = resource_of(request.urn)
        olds, news = values.props_to_core(request.olds), values.props_to_core(request.news)
        s = self.session(request.urn)
        if request.preview:
            updated = await self._run(lambda: ops.preview_update(s, request.resource_id, olds, news))
        else:
            updated = await self._run(lambda: ops.update(s, request.resource_id, olds, news))
        self._warn(request.urn, updated.warnings)
        return p.UpdateResponse(values.props_to_pulumi(updated.outputs, keep_unknowns=False))

    async def invoke(self, request: p.InvokeRequest) -> p.InvokeResponse:
        """The package's functions: ``getNetwork`` (OpenTofu's ``netpeer_network`` data source) and
        ``getPeeringRequests`` (docs/inbox.md)."""
        args = values.props_to_core(request.args)
        if request.tok == schema_json.token(schema_json.GET_PEERING_REQUESTS):
            s = self.session()
            found = await self._run(lambda: inbox.list_requests(s, args.get("namespace"), args.get("network")))
            return p.InvokeResponse(return_value=values.props_to_pulumi(found))
        fn = schema.FUNCTIONS.get(request.tok.rsplit(":", 1)[-1]) if request.tok.startswith("netpeer:") else None
        if fn is not schema.GET_NETWORK:
            known = [schema_json.token(n) for n in (*schema.FUNCTIONS, schema_json.GET_PEERING_REQUESTS)]
            raise core.ProviderError(f"function: {request.tok!r} is not a netpeer function ({', '.join(known)})")
        if not args.get("name"):
            return p.InvokeResponse(failures=[p.CheckFailure("name", "name is required")])
        found = await self._run(lambda: core.network.lookup(self.session(), args["name"], args.get("namespace")))
        outs = {k: found.outputs.get(k) for k in (f.name for f in fn.outputs())}
        return p.InvokeResponse(values.props_to_pulumi({"id": found.id, **outs}))

    async def delete(self, request: p.DeleteRequest) -> None:
        _, ops = resource_of(request.urn)
        s = self.session(request.urn)
        props = values.props_to_core(request.properties)
        await self._run(lambda: ops.delete(s, request.resource_id, props))


def check_failure(path: str, message: str) -> tuple[str, str]:
    """A core failure as (property, reason), camelCase. The engine prints
    ``property P value V has a problem: REASON`` with V looked up as a
    top-level property: the property is the top-level one (``subnets``, not
    ``subnets[0]``, which it would print as ``{<nil>}``); the reason names the
    element and its value."""
    camel = _camel_path(path)
    return camel.split(".")[0].split("[")[0], (camel + message[len(path):] if message.startswith(path) else message)


def _camel_path(path: str) -> str:
    """``peerings[0].remote_network`` -> ``peerings[0].remoteNetwork``."""
    return ".".join(schema.camel_case(part) for part in path.split("."))
