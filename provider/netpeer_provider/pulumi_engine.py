"""What both Pulumi faces (the dynamic providers and the plugin) share: the
words of Pulumi users, messages to the engine, per-field diffs, and the core's
errors as gRPC statuses the CLI shows as one line.

- ``PulumiTerms``: how a Pulumi user names settings and what to run.
- ``Engine``: the engine's log service (the address every provider plugin is
  started with): warnings on the resource's row, and ephemeral status lines
  (``wait_for_bound`` progress) in its info column.
- ``property_diffs``: the core's ``Diff`` as ``PropertyDiff`` kinds, so the CLI
  shows exactly the fields that change (not a spurious ``- namespace``).
- ``abort``: a failed call as its status: the message alone (no "Exception
  calling application:", no traceback), a code that tells the engine nothing
  was done, and for ``NotBound`` a partial failure that records the resource.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping

import grpc
from google.protobuf import any_pb2, struct_pb2
from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc, provider_pb2, status_pb2

from netpeer import errors as service_errors
from netpeer_provider import core
from netpeer_provider.core import schema

_PLACEHOLDERS = {"endpoint": "address", "token": "token", "error_on_not_bound": "true"}


class PulumiTerms(core.Terms):
    """How a Pulumi user names and sets things (field names: Python's)."""

    apply = "`pulumi up`"
    refresh = "`pulumi refresh`"
    inline_peering = "inline in Network(peerings=[...])"
    peering_resource = "a NetworkPeering resource"
    rename = ("this resource was renamed in the program (give it its old name in the `aliases` resource option, "
              "so that Pulumi keeps the peering instead of creating a second one)")
    replace_first = ("`pulumi up --replace` created the new one before deleting the old one (give the resource "
                     "the `deleteBeforeReplace` option)")

    def setting(self, field: schema.Field) -> str:
        return f"netpeer:{schema.camel_case(field.name)}"

    def how_to_set(self, field: schema.Field) -> str:
        secret = " --secret" if field.secret else ""
        return (f"run `pulumi config set{secret} {self.setting(field)} "
                f"<{_PLACEHOLDERS.get(field.name, 'value')}>`")


class Engine:
    """The engine's log service at ``address`` (host:port), dialled on first use."""

    def __init__(self, address: str | None):
        self.address = address
        self._stub: engine_pb2_grpc.EngineStub | None = None
        self._lock = threading.Lock()

    def log(self, severity: int, message: str, urn: str = "", ephemeral: bool = False) -> None:
        """Sends one message; a log that cannot be delivered is dropped (never fails the operation)."""
        if not self.address:
            return
        with self._lock:
            if self._stub is None:
                self._stub = engine_pb2_grpc.EngineStub(grpc.insecure_channel(self.address))
        try:
            self._stub.Log(engine_pb2.LogRequest(severity=severity, message=message, urn=urn or "",
                                                 ephemeral=ephemeral), timeout=10)
        except grpc.RpcError:
            pass

    def warn(self, message: str, urn: str = "") -> None:
        self.log(engine_pb2.WARNING, message, urn)

    def status(self, message: str, urn: str = "") -> None:
        """A status line on the resource's row, replaced by the next one."""
        self.log(engine_pb2.INFO, message, urn, ephemeral=True)

    def progress(self, urn: str) -> Callable[[str], None]:
        """A ``core.Session.progress`` sink for the resource ``urn``."""
        return lambda line: self.status(line, urn)


def engine_address(argv: list[str]) -> str | None:
    """The engine's address among a provider plugin's arguments (the first that is not a flag)."""
    return next((a for a in argv if not a.startswith("-")), None)


def field_changes(d: core.Diff, resource: schema.Resource, olds: Mapping[str, Any],
                  news: Mapping[str, Any]) -> dict[str, tuple[str, bool]]:
    """Each changing input: ``("add" | "delete" | "update", replaces)``. The
    old value is the declared one (``Field.declared_as``) when outputs differ."""
    out = {}
    empty = (None, "", [])
    for name, what in d.detailed().items():
        f = resource.field(name)
        old, new = olds.get(f.declared_as or name), news.get(name)
        kind = "add" if old in empty and new not in empty else "delete" if new in empty and old not in empty \
            else "update"
        out[name] = (kind, what == "replace")
    return out


_KINDS = {("add", False): provider_pb2.PropertyDiff.ADD, ("add", True): provider_pb2.PropertyDiff.ADD_REPLACE,
          ("delete", False): provider_pb2.PropertyDiff.DELETE,
          ("delete", True): provider_pb2.PropertyDiff.DELETE_REPLACE,
          ("update", False): provider_pb2.PropertyDiff.UPDATE,
          ("update", True): provider_pb2.PropertyDiff.UPDATE_REPLACE}


def property_diffs(d: core.Diff, resource: schema.Resource, olds: Mapping[str, Any],
                   news: Mapping[str, Any]) -> dict[str, provider_pb2.PropertyDiff]:
    """``field_changes`` as the wire's ``PropertyDiff`` (the dynamic providers' snake_case keys)."""
    return {name: provider_pb2.PropertyDiff(kind=_KINDS[change], inputDiff=True)
            for name, change in field_changes(d, resource, olds, news).items()}


_CODES = {
    service_errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    service_errors.NotFound: grpc.StatusCode.NOT_FOUND,
    service_errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    service_errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    service_errors.Aborted: grpc.StatusCode.ABORTED,
    service_errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    service_errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    service_errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    service_errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
}


class _Status(grpc.Status):
    def __init__(self, code: grpc.StatusCode, details: str, trailing_metadata: tuple = ()):
        self.code, self.details, self.trailing_metadata = code, details, trailing_metadata


def status_of(exc: BaseException, properties: struct_pb2.Struct | None = None) -> grpc.Status:
    """The status a failed call answers. A refusal of the service keeps its
    code (the engine then knows nothing was changed); a ``NotBound`` is a
    partial failure carrying ``properties`` (the outputs, marshalled by the
    face), so that the engine records the resource and still fails."""
    message = str(exc) or type(exc).__name__
    inner = getattr(exc, "cause", None)
    err = inner if isinstance(inner, core.ProviderError) else exc if isinstance(exc, core.ProviderError) else None
    if isinstance(err, core.NotBound) and properties is not None:
        detail = provider_pb2.ErrorResourceInitFailed(id=err.id, properties=properties, reasons=[message])
        packed = any_pb2.Any()
        packed.Pack(detail)
        rich = status_pb2.Status(code=grpc.StatusCode.UNKNOWN.value[0], message=message, details=[packed])
        return _Status(grpc.StatusCode.UNKNOWN, message, (("grpc-status-details-bin", rich.SerializeToString()),))
    service = getattr(err, "cause", None)
    code = next((c for cls, c in _CODES.items() if isinstance(service, cls)), None)
    if code is None:
        # The provider's own refusals (settings, ids, conflicts) changed nothing; anything else may have.
        code = grpc.StatusCode.INVALID_ARGUMENT if err is not None else grpc.StatusCode.UNKNOWN
    if code is grpc.StatusCode.UNAVAILABLE and "did not answer in time" in message:
        code = grpc.StatusCode.UNKNOWN  # a timeout may have been applied after all
    return _Status(code, message)


__all__ = ["Engine", "PulumiTerms", "engine_address", "field_changes", "property_diffs", "status_of"]
