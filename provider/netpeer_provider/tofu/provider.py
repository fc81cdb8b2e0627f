"""The provider, its resources and data sources, in plain Python values.

The server (``server.py``) decodes each request with the schema, calls one method here, and encodes
the answer. Nothing in this module knows about gRPC or MessagePack. See the package docstring for
how the pieces fit.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Iterable, Sequence
from typing import ClassVar

from .codec import UNKNOWN
from .schema import Schema

ERROR = "error"
WARNING = "warning"

Path = tuple  # ("tags", "env") = attribute "tags", map key "env"; ints are list indexes


class Name(str):
    """A step of a ``Path`` that names an attribute of a nested block or object (``("timeouts",
    Name("create"))``), where a plain string would be a map key."""


def _as_path(p: str | Sequence | None) -> Path | None:
    if p is None:
        return None
    if isinstance(p, str):
        return (p,)
    return tuple(p)


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """One message for the user; ``attribute`` points OpenTofu at the offending configuration."""

    summary: str
    detail: str = ""
    attribute: Path | None = None
    severity: str = ERROR

    def __post_init__(self) -> None:
        if self.severity not in (ERROR, WARNING):
            raise ValueError(f"severity is {ERROR!r} or {WARNING!r}")
        object.__setattr__(self, "attribute", _as_path(self.attribute))


def error(summary: str, detail: str = "", attribute: str | Sequence | None = None) -> Diagnostic:
    return Diagnostic(summary, detail, attribute, ERROR)


def warning(summary: str, detail: str = "", attribute: str | Sequence | None = None) -> Diagnostic:
    return Diagnostic(summary, detail, attribute, WARNING)


class TofuError(Exception):
    """Raise from any hook to fail the operation with one or more diagnostics (the core's own
    errors are ``core.ProviderError``; the netpeer face turns them into this).

        raise TofuError("network not found", f"no network {name!r}", attribute="name")
        raise TofuError(diagnostics=[error(...), error(...)])
    """

    def __init__(self, summary: str = "", detail: str = "", attribute: str | Sequence | None = None, *,
                 diagnostics: Iterable[Diagnostic] = ()):
        diags = list(diagnostics)
        if summary:
            diags.insert(0, error(summary, detail, attribute))
        if not diags:
            raise ValueError("TofuError needs a summary or diagnostics")
        self.diagnostics = diags
        super().__init__("; ".join(d.summary + (f": {d.detail}" if d.detail else "") for d in diags))


_collected: contextvars.ContextVar[list[Diagnostic] | None] = contextvars.ContextVar("netpeer_tofu_diags",
                                                                                      default=None)


def warn(summary: str, detail: str = "", attribute: str | Sequence | None = None) -> None:
    """Add a warning to the answer of the request being handled (from any hook)."""
    diags = _collected.get()
    if diags is None:
        raise RuntimeError("warn() is only meaningful while a request is being handled")
    diags.append(warning(summary, detail, attribute))


def fail_keeping_state(summary: str, detail: str = "", attribute: str | Sequence | None = None) -> None:
    """Add an error to the answer of the request being handled while the hook still returns the new
    state: an apply that fails although its object exists (OpenTofu records it, a new one tainted)."""
    diags = _collected.get()
    if diags is None:
        raise RuntimeError("fail_keeping_state() is only meaningful while a request is being handled")
    diags.append(error(summary, detail, attribute))


@dataclasses.dataclass
class Plan:
    """What ``plan`` returns: the planned state (``None`` = destroy) and the attributes whose change
    forces a replacement."""

    planned: dict | None
    requires_replace: list[Path] = dataclasses.field(default_factory=list)


class Resource:
    """A managed resource type. Subclass, set ``type_name`` and ``schema``, implement create/read/
    update/delete (and import_state if it can be imported).

    States are dicts holding every attribute of the schema. ``self.provider`` is the configured
    provider instance (for its client, settings...).
    """

    type_name: ClassVar[str] = ""
    schema: ClassVar[Schema] = Schema()
    #: Computed attributes a plan may show as known although the world can change them before the
    #: apply (a peering's status: the other side may consent meanwhile). An apply that finds them
    #: changed is not the provider's inconsistency (``Provider.outlived_plan``).
    predicted: ClassVar[tuple[str, ...]] = ()

    def __init__(self, provider: Provider):
        self.provider = provider

    def validate(self, config: dict) -> Iterable[Diagnostic]:
        """Check a configuration; values not yet known are ``UNKNOWN``."""
        return ()

    def plan(self, prior: dict | None, proposed: dict | None, config: dict | None) -> Plan:
        """Default: computed attributes the configuration leaves null become UNKNOWN on create (and
        on replacement); a change of a ``force_new`` attribute asks for replacement; on update,
        computed values are kept (OpenTofu proposes the prior ones)."""
        if proposed is None:
            return Plan(None)
        planned = dict(proposed)
        replace: list[Path] = []
        if prior is not None:
            replace = [(n,) for n in self.schema.force_new if planned.get(n) is UNKNOWN or planned.get(n) != prior.get(n)]
        if prior is None or replace:
            for name in self.schema.computed:
                if config is None or config.get(name) is None:
                    planned[name] = UNKNOWN
        return Plan(planned, replace)

    def create(self, planned: dict, config: dict) -> dict:
        raise TofuError(f"{self.type_name} cannot be created")

    def read(self, state: dict) -> dict | None:
        """The current state of the object, or None if it no longer exists. Default: unchanged."""
        return state

    def update(self, prior: dict, planned: dict, config: dict) -> dict:
        raise TofuError(f"{self.type_name} cannot be updated in place")

    def delete(self, state: dict) -> None:
        raise TofuError(f"{self.type_name} cannot be deleted")

    def import_state(self, id: str) -> dict:
        """A (possibly partial) state for the object named ``id``; read() completes it afterwards."""
        raise TofuError(f"{self.type_name} does not support import")

    def upgrade(self, version: int, raw: dict) -> dict:
        """A state stored by schema ``version`` (as a JSON object) -> a state of the current schema.
        Default: attributes the schema no longer has are dropped, new ones are null."""
        return {name: raw.get(name) for name in self.schema.names}


class DataSource:
    """A data source type: ``read(config)`` returns the full state, computed attributes filled."""

    type_name: ClassVar[str] = ""
    schema: ClassVar[Schema] = Schema()

    def __init__(self, provider: Provider):
        self.provider = provider

    def validate(self, config: dict) -> Iterable[Diagnostic]:
        return ()

    def read(self, config: dict) -> dict:
        raise NotImplementedError


class Provider:
    """The whole provider. The server calls only the methods of this class (plain Python values in
    and out, errors as :class:`TofuError`); their defaults dispatch to the ``resources`` and
    ``data_sources`` classes, which are instantiated once with the provider.

    Override a method here to take over a whole RPC for every type; override ``configure`` (and
    ``schema``) for provider settings.
    """

    schema: ClassVar[Schema] = Schema()  # the provider block
    resources: ClassVar[Sequence[type[Resource]]] = ()
    data_sources: ClassVar[Sequence[type[DataSource]]] = ()

    def __init__(self) -> None:
        self._resources = {cls.type_name: cls(self) for cls in self.resources}
        self._data_sources = {cls.type_name: cls(self) for cls in self.data_sources}
        for name in list(self._resources) + list(self._data_sources):
            if not name or "_" not in name:
                raise ValueError(f"bad type name {name!r}: PROVIDER_thing, e.g. netpeer_network")
        self.stopping = False

    # --- lookup ---
    def resource(self, type_name: str) -> Resource:
        try:
            return self._resources[type_name]
        except KeyError:
            raise TofuError(f"unknown resource type {type_name!r}") from None

    def data_source(self, type_name: str) -> DataSource:
        try:
            return self._data_sources[type_name]
        except KeyError:
            raise TofuError(f"unknown data source {type_name!r}") from None

    # --- the protocol, in Python ---
    def get_schemas(self) -> tuple[Schema, dict[str, Schema], dict[str, Schema]]:
        """(provider block, resource schemas by type, data source schemas by type)."""
        return (self.schema, {n: r.schema for n, r in self._resources.items()},
                {n: d.schema for n, d in self._data_sources.items()})

    def validate_provider_config(self, config: dict) -> Iterable[Diagnostic]:
        return ()

    def configure(self, config: dict, tofu_version: str) -> None:
        """Called once before resources are used (values may be UNKNOWN during validate-only runs)."""

    def validate_resource_config(self, type_name: str, config: dict) -> Iterable[Diagnostic]:
        return self.resource(type_name).validate(config)

    def validate_data_source_config(self, type_name: str, config: dict) -> Iterable[Diagnostic]:
        return self.data_source(type_name).validate(config)

    def upgrade_resource_state(self, type_name: str, version: int, raw: dict) -> dict:
        return self.resource(type_name).upgrade(version, raw)

    def read_resource(self, type_name: str, state: dict) -> dict | None:
        return self.resource(type_name).read(state)

    def plan_resource_change(self, type_name: str, prior: dict | None, proposed: dict | None,
                             config: dict | None) -> Plan:
        return self.resource(type_name).plan(prior, proposed, config)

    def apply_resource_change(self, type_name: str, prior: dict | None, planned: dict | None,
                              config: dict | None) -> dict | None:
        """create (no prior), delete (no planned: returns None) or update."""
        res = self.resource(type_name)
        if planned is None:
            if prior is not None:
                res.delete(prior)
            return None
        if prior is None:
            return res.create(planned, config)
        return res.update(prior, planned, config)

    def outlived_plan(self, type_name: str, planned: dict | None, new: dict | None) -> bool:
        """Whether the apply found a ``predicted`` attribute other than the plan said: OpenTofu is
        then told to accept the new value (``legacy_type_system``, which turns its "inconsistent
        result after apply" error into a log line) instead of failing an apply that did its work."""
        predicted = self.resource(type_name).predicted
        if not planned or not new:
            return False
        return any(planned.get(k) is not UNKNOWN and planned.get(k) != new.get(k) for k in predicted)

    def import_resource_state(self, type_name: str, id: str) -> list[dict]:
        state = self.resource(type_name).import_state(id)
        return state if isinstance(state, list) else [state]

    def read_data_source(self, type_name: str, config: dict) -> dict:
        return self.data_source(type_name).read(config)

    def stop(self) -> None:
        """OpenTofu asks long operations to stop (Ctrl-C): ``self.stopping`` turns true."""
        self.stopping = True
