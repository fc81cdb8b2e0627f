"""What the core raises, and the words each face uses in messages.

Every error is one line for the user: what failed, the field and value,
what to do. Faces map the classes to their engine (Pulumi: the exception
message; OpenTofu: a diagnostic on ``path``). Service refusals keep the
service's error as ``cause`` so a face can tell a conflict from a denial:
faces decide on its ``reason`` (``netpeer.reasons``) and ``field``, never
on its message, whose words netpeerd may change.
"""

from __future__ import annotations

from netpeer import errors as service_errors
from netpeer.reasons import Reason

from netpeer_provider.core import schema
from netpeer_provider.core.schema import Field


class ProviderError(Exception):
    """Base class: ``message`` is the line to show; ``path`` the attribute at fault, if any."""

    def __init__(self, message: str, *, path: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        return self.message


class InvalidId(ProviderError):
    """An id (from the state or an import) that is not of the resource's form."""


class MissingSetting(ProviderError):
    """A provider setting the operation needs (endpoint, token) is not set."""

    def __init__(self, message: str, setting: Field):
        super().__init__(message, path=setting.name)
        self.setting = setting


class ServiceError(ProviderError):
    """netpeerd refused or failed the call; ``cause`` is its ``netpeer.errors`` error."""

    def __init__(self, message: str, cause: service_errors.NetpeerError, *, path: str | None = None):
        super().__init__(message, path=path)
        self.cause = cause

    @property
    def kind(self) -> str:
        """The service's error class: ``AlreadyExists``, ``PermissionDenied``, ..."""
        return type(self.cause).__name__


class Conflict(ServiceError):
    """The same peering is declared twice: inline on its network and as a peering resource."""


class NotBound(ProviderError):
    """A peering that a create or update left Failed, or not Bound after its
    ``wait_for_bound``, while the provider setting ``error_on_not_bound`` is
    true. The peering exists and stays: ``id`` and ``outputs`` are what the
    engine must record (Pulumi: a partial failure), ``message`` the error."""

    def __init__(self, message: str, *, id: str, outputs: dict, phase: str, reason: str):
        super().__init__(message, path="wait_for_bound")
        self.id, self.outputs, self.phase, self.reason = id, outputs, phase, reason


class Terms:
    """The words of a face's engine, used where a message tells the user what
    to do. The defaults are neutral; each face subclasses this with its own
    (``pulumi up``, ``Network(peerings=[...])``; ``tofu apply``, ...)."""

    apply = "the apply again"
    refresh = "a refresh"
    inline_peering = "inline on its network"
    peering_resource = "a peering resource"
    # Clauses naming two other causes of a duplicate: a renamed resource, and a replacement made
    # by creating the new one before deleting the old one (each with what to do).
    rename = "the resource was renamed (declare its old name as an alias)"
    replace_first = "a replace created the new one before deleting the old one (delete first)"

    def field(self, name: str) -> str:
        """How the user's program spells a resource field given by its schema name."""
        return name

    def setting(self, field: Field) -> str:
        """How the user names a provider setting."""
        return field.name

    def how_to_set(self, field: Field) -> str:
        """How the user sets it (the message then adds the environment variable)."""
        return f"set {self.setting(field)} in the provider configuration"

    def both_ways(self) -> str:
        return f"a peering is managed either {self.inline_peering} or as {self.peering_resource}, not both"

    def setting_words(self, name: str) -> str:
        """A provider setting by its schema name, as the user writes it."""
        return self.setting(schema.PROVIDER.field(name))


def is_peering_conflict(exc: service_errors.NetpeerError) -> bool:
    """The service says a peering of that name exists (not: another towards the same remote)."""
    return exc.reason == Reason.PEERING_EXISTS


def is_remote_conflict(exc: service_errors.NetpeerError) -> bool:
    """The service says the network already has a peering towards that remote (one per remote)."""
    return exc.reason == Reason.REMOTE_ALREADY_PEERED
