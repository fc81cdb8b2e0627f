"""netpeer's peering rules as a Pulumi CrossGuard policy pack.

Three rules a platform team enforces on every NetworkPeering, whichever face declared it: the provider
plugin (YAML, TypeScript: type ``netpeer:index:NetworkPeering``, camelCase inputs) or the Python SDK's
dynamic provider (``pulumi-python:dynamic/netpeer:NetworkPeering``, snake_case inputs).

- ``netpeer-peer-namespace-allow-list``: the remote namespace is on the pack's allow-list
  (config ``allowedNamespaces``); a peering inside its own namespace is always allowed.
- ``netpeer-peering-description``: every peering says why it exists (a non-blank ``description``).
- ``netpeer-cross-site-label``: a peering to a network in another site (``remoteSite`` set) carries the
  label ``<label>: <value>`` in its description (config ``label``, default ``cross-site-approved``),
  e.g. ``"billing reads the ledger [cross-site-approved: NET-1234]"``.

All three are mandatory by default (a violation fails ``pulumi preview`` and ``pulumi up``); a policy
config file (``--policy-pack-config``) can lower any of them to ``advisory`` or ``disabled``.
Run: ``pulumi preview --policy-pack examples/policy/pulumi --policy-pack-config FILE.json``
after ``bash scripts/install-pulumi-policy.sh examples/policy/pulumi`` (docs/pulumi.md, "Policy").
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

PLUGIN_TYPE = "netpeer:index:NetworkPeering"
DYNAMIC_TYPE = "pulumi-python:dynamic/netpeer:NetworkPeering"
DEFAULT_LABEL = "cross-site-approved"


def peering_input(args: ResourceValidationArgs, camel: str, snake: str) -> Optional[Any]:
    """An input of a NetworkPeering under either face's spelling; ``None`` for any other resource.

    Reading an input whose value is not known yet (preview of a new dependency) raises pulumi_policy's
    UnknownValueError: the framework then skips the rule for that resource, rather than guessing.
    """
    if args.resource_type == PLUGIN_TYPE:
        return args.props.get(camel)
    if args.resource_type == DYNAMIC_TYPE:
        return args.props.get(snake)
    return None


def is_peering(args: ResourceValidationArgs) -> bool:
    return args.resource_type in (PLUGIN_TYPE, DYNAMIC_TYPE)


def subject(args: ResourceValidationArgs) -> str:
    # The resource's name in the program, which is what the author searches for.
    return f"peering {args.name!r}"


def check_namespace(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if not is_peering(args):
        return
    config: Mapping[str, Any] = args.get_config()
    allowed = list(config.get("allowedNamespaces") or [])
    remote = peering_input(args, "remoteNamespace", "remote_namespace") or ""
    own = peering_input(args, "namespace", "namespace") or ""
    if not remote or remote == own or remote in allowed:
        return
    report(f"{subject(args)} peers with namespace {remote!r}, which is not on the allow-list "
           f"({', '.join(allowed) or 'empty'})")


def check_description(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if not is_peering(args):
        return
    if not str(peering_input(args, "description", "description") or "").strip():
        report(f"{subject(args)} has no description: say why the two networks are peered")


def check_cross_site_label(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if not is_peering(args):
        return
    site = peering_input(args, "remoteSite", "remote_site") or ""
    if not site:
        return
    label = str(args.get_config().get("label") or DEFAULT_LABEL)
    description = str(peering_input(args, "description", "description") or "")
    # `label: value`, the value non-blank; not part of a longer word (`my-cross-site-approved:` is not it).
    if re.search(rf"(?<![\w-]){re.escape(label)}:\s*\S", description):
        return
    report(f"{subject(args)} reaches site {site!r} without the label '{label}: VALUE' in its description")


PolicyPack(
    name="netpeer-peering-rules",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        ResourceValidationPolicy(
            name="netpeer-peer-namespace-allow-list",
            description="A peering's remote namespace is on the platform team's allow-list.",
            validate=check_namespace,
            config_schema=PolicyConfigSchema(
                properties={"allowedNamespaces": {"type": "array", "items": {"type": "string"}, "default": []}}),
        ),
        ResourceValidationPolicy(
            name="netpeer-peering-description",
            description="Every peering has a description.",
            validate=check_description,
        ),
        ResourceValidationPolicy(
            name="netpeer-cross-site-label",
            description="A peering to a network in another site carries the cross-site label in its description.",
            validate=check_cross_site_label,
            config_schema=PolicyConfigSchema(
                properties={"label": {"type": "string", "default": DEFAULT_LABEL, "pattern": "^[A-Za-z0-9._-]+$"}}),
        ),
    ],
)
