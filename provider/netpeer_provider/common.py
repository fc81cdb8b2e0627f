"""The Pulumi face shared by both dynamic providers: settings from the stack
configuration, Pulumi's unknown values, results and errors in Pulumi's form.

Everything the providers decide is in ``netpeer_provider.core``; this module
only translates. Settings are module state, never provider state: nothing
here is pickled into the stack.

Run by netpeer's dynamic-provider host (``netpeer_provider.dynamic_host``,
what netpeer's Pulumi toolchain starts), the providers also show warnings
and ``wait_for_bound`` progress on the resource's row and take part in
previews (``preview``, ``preview_update``); under Pulumi's stock server,
warnings go to the plugin's standard error.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from types import ModuleType
from typing import Any, Iterator

from pulumi.dynamic import (CheckFailure, CheckResult, ConfigureRequest, CreateResult, DiffResult, ReadResult,
                            ResourceProvider, UpdateResult)
from pulumi.output import Unknown
from pulumi.runtime.rpc import UNKNOWN

from netpeer_provider import core
from netpeer_provider.core import schema
from netpeer_provider.pulumi_engine import Engine, PulumiTerms

# Filled by ``configure`` in the provider process (snake_case keys).
_CONFIG: dict[str, str] = {}
_LOCK = threading.Lock()
# Set by the dynamic-provider host: the engine to log to, and the resource each thread serves.
ENGINE = Engine(None)
CALL = threading.local()


class NetpeerProviderError(Exception):
    """One line for the user: what failed, the field and value, what to do.
    ``cause`` is the core's error (``core.NotBound`` carries the outputs)."""

    def __init__(self, message: str, cause: core.ProviderError | None = None):
        super().__init__(message)
        self.cause = cause


TERMS = PulumiTerms()


def configure(req: ConfigureRequest) -> None:
    """Keeps the ``netpeer:*`` stack settings (secrets decrypted) for this process."""
    configure_from({k: req.config.get(k) for k in (f"netpeer:{schema.camel_case(f.name)}"
                                                   for f in schema.PROVIDER.fields)})


def configure_from(config: dict[str, Any]) -> None:
    """``configure`` from a plain mapping of ``netpeer:camelCase`` keys."""
    with _LOCK:
        for f in schema.PROVIDER.fields:
            value = config.get(f"netpeer:{schema.camel_case(f.name)}")
            if value is not None and value != "":
                _CONFIG[f.name] = str(value)


def session() -> core.Session:
    """Settings from the stack configuration, else the environment (read at each call)."""
    with _LOCK:
        config = dict(_CONFIG)
    urn = getattr(CALL, "urn", "")
    return core.Session(core.Settings.resolve(config, terms=TERMS), TERMS, progress=ENGINE.progress(urn))


def warn(messages: tuple[str, ...]) -> None:
    """Warnings for the user, on the current resource's row when the engine can be reached."""
    for m in messages:
        if ENGINE.address:
            ENGINE.warn(m, getattr(CALL, "urn", ""))
        else:
            print(f"warning: {m}", file=sys.stderr, flush=True)


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
        raise NetpeerProviderError(exc.message, exc) from None


class DetailedDiffResult(DiffResult):
    """A ``DiffResult`` that also says how each field changes (netpeer's host
    sends it as Pulumi's detailed diff; the stock server ignores it)."""

    def __init__(self, d: core.Diff, olds: dict[str, Any], news: dict[str, Any]):
        super().__init__(changes=d.changes, replaces=list(d.replaces), stables=[],
                         delete_before_replace=d.delete_before_replace)
        self.core_diff, self.olds, self.news = d, olds, news


class CoreProvider(ResourceProvider):
    """A dynamic provider that hands every call to a core resource module
    (``ops``). Subclasses name the module; instances carry no attributes."""

    ops: ModuleType

    def configure(self, req: ConfigureRequest) -> None:
        configure(req)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        clean, failures = self.ops.check(to_core(news))
        # The top-level property: the engine prints its value (``subnets[0]`` it would print as ``{<nil>}``).
        return CheckResult(to_pulumi(clean), [CheckFailure(f.path.split(".")[0].split("[")[0], f.message)
                                              for f in failures])

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """The core's diff; before a replacement, the service is asked whether
        the new one would be accepted, so that a refused replace fails here
        (in preview too) instead of after deleting the old one."""
        olds, news = to_core(olds), to_core(news)
        d = self.ops.diff(olds, news)
        with pulumi_errors():
            s = session()
            warn(self.ops.notes(s, olds, news))
            if d.replaces:
                warn(core.review.withdrawals(olds, replacing=True))
                self.ops.validate_replacement(s, id_, olds, news)
        return DetailedDiffResult(d, olds, news)

    def create(self, props: dict[str, Any]) -> CreateResult:
        with pulumi_errors():
            created = self.ops.create(session(), props)
        warn(created.warnings)
        return CreateResult(created.id, created.outputs)

    def preview(self, props: dict[str, Any]) -> dict[str, Any]:
        """The outputs a create would give, without creating anything (fields not known yet are left out)."""
        with pulumi_errors():
            created = self.ops.preview(session(), to_core(props))
        warn(created.warnings)
        return created.outputs

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """A refresh (old outputs in ``props``): the outputs only, so that the
        engine keeps the program's inputs as they were (inputs read back from
        the service would differ from them in form, and the next update would
        rewrite every resource's state). An import (nothing but the id): the
        inputs that declare the resource as it is; an id that does not exist
        fails, naming it."""
        with pulumi_errors():
            if any(not k.startswith("__") for k in props):
                found = self.ops.read(session(), id_, props)
                return ReadResult(found.id, found.outputs) if found else ReadResult(None, {})
            found = self.ops.import_(session(), id_)
        return ReadResult(found.id, found.outputs, found.inputs)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        with pulumi_errors():
            updated = self.ops.update(session(), id_, olds, news)
        warn(updated.warnings)
        return UpdateResult(updated.outputs)

    def preview_update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> dict[str, Any]:
        """The outputs an update would give, without changing anything."""
        with pulumi_errors():
            updated = self.ops.preview_update(session(), id_, to_core(olds), to_core(news))
        warn(updated.warnings)
        return updated.outputs

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        with pulumi_errors():
            self.ops.delete(session(), id_, props)
