"""The Pulumi face shared by both dynamic providers: settings from the stack
configuration, Pulumi's unknown values, results and errors in Pulumi's form.

Everything the providers decide is in ``netpeer_provider.core``; this module
only translates. Settings are module state, never provider state: nothing
here is pickled into the stack.
"""

from __future__ import annotations

import contextlib
import threading
from types import ModuleType
from typing import Any, Iterator

from pulumi.dynamic import (CheckFailure, CheckResult, ConfigureRequest, CreateResult, DiffResult, ReadResult,
                            ResourceProvider, UpdateResult)
from pulumi.output import Unknown
from pulumi.runtime.rpc import UNKNOWN

from netpeer_provider import core
from netpeer_provider.core import schema

# Filled by ``configure`` in the provider process (snake_case keys).
_CONFIG: dict[str, str] = {}
_LOCK = threading.Lock()
_PLACEHOLDERS = {"endpoint": "address", "token": "token"}


class NetpeerProviderError(Exception):
    """One line for the user: what failed, the field and value, what to do."""


class PulumiTerms(core.Terms):
    """How a Pulumi (Python) user names and sets things."""

    apply = "`pulumi up`"
    inline_peering = "inline in Network(peerings=[...])"
    peering_resource = "a NetworkPeering resource"

    def setting(self, field: schema.Field) -> str:
        return f"netpeer:{schema.camel_case(field.name)}"

    def how_to_set(self, field: schema.Field) -> str:
        secret = " --secret" if field.secret else ""
        return (f"run `pulumi config set{secret} {self.setting(field)} "
                f"<{_PLACEHOLDERS.get(field.name, 'value')}>`")


TERMS = PulumiTerms()


def configure(req: ConfigureRequest) -> None:
    """Keeps the ``netpeer:*`` stack settings (secrets decrypted) for this process."""
    with _LOCK:
        for f in schema.PROVIDER.fields:
            value = req.config.get(f"netpeer:{schema.camel_case(f.name)}")
            if value:
                _CONFIG[f.name] = str(value)


def session() -> core.Session:
    """Settings from the stack configuration, else the environment (read at each call)."""
    with _LOCK:
        config = dict(_CONFIG)
    return core.Session(core.Settings.resolve(config), TERMS)


def to_core(value: Any) -> Any:
    """Pulumi's unknowns (``Unknown`` objects, the placeholder string) as ``core.UNKNOWN``."""
    if isinstance(value, Unknown) or (isinstance(value, str) and value == UNKNOWN):
        return core.UNKNOWN
    if isinstance(value, list):
        return [to_core(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_core(v) for v in value)
    if isinstance(value, dict):
        return {k: to_core(v) for k, v in value.items()}
    return value


def to_pulumi(value: Any) -> Any:
    """``core.UNKNOWN`` back to Pulumi's placeholder."""
    if value is core.UNKNOWN:
        return UNKNOWN
    if isinstance(value, list):
        return [to_pulumi(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_pulumi(v) for v in value)
    if isinstance(value, dict):
        return {k: to_pulumi(v) for k, v in value.items()}
    return value


def known(value: Any) -> bool:
    """False for values Pulumi does not know yet (during preview), whatever the field's type."""
    return core.known(to_core(value))


@contextlib.contextmanager
def pulumi_errors() -> Iterator[None]:
    """The core's errors as Pulumi shows them: the exception's one-line message."""
    try:
        yield
    except core.ProviderError as exc:
        raise NetpeerProviderError(exc.message) from None


class CoreProvider(ResourceProvider):
    """A dynamic provider that hands every call to a core resource module
    (``ops``). Subclasses name the module; instances carry no attributes."""

    ops: ModuleType

    def configure(self, req: ConfigureRequest) -> None:
        configure(req)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        clean, failures = self.ops.check(to_core(news))
        return CheckResult(to_pulumi(clean), [CheckFailure(f.path, f.message) for f in failures])

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        d = self.ops.diff(to_core(olds), to_core(news))
        return DiffResult(changes=d.changes, replaces=list(d.replaces), stables=[],
                          delete_before_replace=d.delete_before_replace)

    def create(self, props: dict[str, Any]) -> CreateResult:
        with pulumi_errors():
            created = self.ops.create(session(), props)
        return CreateResult(created.id, created.outputs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with pulumi_errors():
            found = self.ops.read(session(), id_, props)
        if found is None:
            return ReadResult(None, {})  # gone: Pulumi drops it from the state (ReadResult(None) crashes)
        return ReadResult(found.id, found.outputs, found.inputs)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        with pulumi_errors():
            return UpdateResult(self.ops.update(session(), id_, olds, news))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        with pulumi_errors():
            self.ops.delete(session(), id_, props)
