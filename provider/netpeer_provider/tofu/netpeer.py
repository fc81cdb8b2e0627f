"""netpeer's OpenTofu (and Terraform) provider: ``netpeer_network``, ``netpeer_peering``, the
``netpeer_network`` and ``netpeer_peering_requests`` data sources, a thin face over ``netpeer_provider.core``.

The core decides everything (validation, what replaces and what updates in place, the calls to
netpeerd, ids, errors); this module translates between OpenTofu's plans and states and the core's
inputs and outputs. The executable in OpenTofu's plugin directory runs::

    python -I -m netpeer_provider.tofu netpeer_provider.tofu.netpeer:NetpeerProvider

States keep what the user wrote where the service normalises (``ttl = "168h"`` though it answers
``7d``), so that plans stay empty. Inline peerings (a Pulumi feature) are not offered.
"""

from __future__ import annotations

import dataclasses
import sys
from types import ModuleType
from typing import Any, ClassVar

from netpeer_provider import core
from netpeer_provider.core import inbox, review
from netpeer_provider.core import schema as cs
from netpeer_provider.core.errors import Terms

from . import mapping
from .codec import STRING, UNKNOWN, list_of, object_of
from .provider import DataSource, Name, Plan, Provider, Resource, TofuError, error, fail_keeping_state, warn
from .schema import Attribute, Schema


class TofuTerms(Terms):
    """How an OpenTofu user names and sets things."""

    apply = "`tofu apply`"
    inline_peering = "by another tool on its network"
    peering_resource = "a netpeer_peering resource"

    def how_to_set(self, field: cs.Field) -> str:
        return f'set {field.name} in the provider "netpeer" block'

    def both_ways(self) -> str:
        return ("it exists already (made by another root module or tool): adopt it with `tofu import` or an "
                "import block, or remove the other declaration")


TERMS = TofuTerms()


def bounded(clean: dict[str, Any], planned: dict, op: str) -> dict[str, Any]:
    """The core's inputs with ``wait_for_bound`` cut to the ``timeouts`` block's limit for ``op``."""
    limit = mapping.timeout(planned.get("timeouts"), op)
    if limit is None or not clean.get("wait_for_bound") or clean["wait_for_bound"] <= limit:
        return clean
    return {**clean, "wait_for_bound": limit}


def _fail(exc: core.ProviderError, t: Any) -> TofuError:
    """A core error as one diagnostic, on its attribute when the schema has it."""
    return TofuError(exc.message, attribute=mapping.path(exc.path, t))


class CoreResource(Resource):
    """A resource type served by a core module (``ops``: check, diff, create, read, update, delete)."""

    ops: ClassVar[ModuleType]
    spec: ClassVar[cs.Resource]
    # Computed attributes that an update in place may change (unknown in its plan).
    volatile: ClassVar[tuple[str, ...]] = ()
    # Inputs the service keeps in a normalised form: the state keeps the user's equivalent spelling.
    normalised: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def make_schema(cls) -> Schema:
        return Schema(attributes=mapping.attributes(cls.spec), description=cls.spec.description,
                      blocks={"timeouts": mapping.TIMEOUTS})

    # --- translation ---
    def inputs(self, state: dict, *, planning: bool, errors: list | None = None) -> dict[str, Any]:
        """The core's inputs from a configuration, plan or state. While planning, unknown values are
        the core's ``UNKNOWN``; at apply time unknowns are computed attributes the user left out.
        A duration that does not parse raises ``ValueError``, or is appended to ``errors`` (and
        passed on as unknown, so that the core checks the rest)."""
        out = {}
        for name, f in mapping.fields(self.spec).items():
            if not f.role.is_input:
                continue
            value = state.get(name)
            if value is UNKNOWN:
                value = core.UNKNOWN if planning else None
            elif (self.spec.name, name) in mapping.OVERRIDES and value is not None:
                try:
                    value = mapping.seconds(name, value)
                except ValueError as exc:
                    if errors is None:
                        raise
                    errors.append(error(str(exc), attribute=name))
                    value = core.UNKNOWN
            out[name] = mapping.to_core(value)
        return out

    def olds(self, prior: dict) -> dict[str, Any]:
        """The core's view of a state: its outputs, normalised as the service keeps them."""
        olds = {k: v for k, v in prior.items() if k != "id"}
        olds.update(self.inputs(prior, planning=False))
        clean, _ = self.ops.check(olds)
        olds.update({k: clean[k] for k in self.normalised if k in clean})
        olds.update(self.bookkeeping(prior))
        return olds

    def bookkeeping(self, prior: dict) -> dict[str, Any]:
        """The core's internal outputs, which OpenTofu's schema does not carry."""
        return {}

    def delete_options(self, state: dict) -> dict[str, Any]:
        """What the core's delete takes besides the state (a network: how long to wait for its peerings)."""
        return {}

    def state(self, id_: str, outputs: dict[str, Any], declared: dict | None) -> dict:
        """A state from the core's outputs; ``declared`` (a plan or prior state) lends its spelling
        of inputs that mean the same as the service's."""
        st = {name: outputs.get(name) for name in self.schema.attributes}
        st["id"] = id_
        for name, default in mapping.defaults(self.spec).items():
            if st.get(name) is None:
                st[name] = default
        st["timeouts"] = (declared or {}).get("timeouts")  # OpenTofu's, as declared
        if declared:
            st.update(self.spelling(declared, st))
        for name in mapping.defaults(self.spec):
            if (self.spec.name, name) in mapping.OVERRIDES:  # the core counts seconds
                mine = (declared or {}).get(name)
                st[name] = mine if mine not in (None, UNKNOWN) else mapping.duration(outputs.get(name))
        return st

    def spelling(self, declared: dict, held: dict) -> dict[str, Any]:
        """The ``normalised`` inputs of ``declared`` that mean what ``held`` (normalised) says."""
        clean, _ = self.ops.check(self.inputs(declared, planning=True))
        return {name: declared[name] for name in self.normalised
                if declared.get(name) is not None and core.known(clean.get(name))
                and mapping.known(declared[name]) and clean.get(name) == held.get(name)}

    def session(self) -> core.Session:
        return self.provider.session()

    # --- the protocol ---
    def validate(self, config: dict):
        diags: list = []
        _, failures = self.ops.check(self.inputs(config, planning=True, errors=diags))
        diags += [error(line, attribute=("timeouts", Name(op)))
                  for op, line in mapping.timeout_errors(config.get("timeouts"))]
        return diags + [error(self.message(f, config), attribute=mapping.path(f.path, self.schema.type))
                        for f in failures]

    def message(self, failure: core.Failure, config: dict) -> str:
        """The core's line, in the user's units where the face changed them (durations)."""
        if (self.spec.name, failure.path) in mapping.OVERRIDES:
            return f"{failure.path}: {config[failure.path]!r} must be a duration from 0s to 1h"
        return failure.message

    def ask(self, planned: dict, config: dict, prior: dict | None = None, *,
            replacing: bool = False) -> dict[str, Any]:
        """The validate-only calls of Pulumi's preview, at plan time: refusals fail the plan, each on its
        attribute; warnings are the plan's; returns the status to show as known (``review.predicted``)."""
        if self.provider.settings_unknown:
            return {}  # the provider block is known only after apply: the apply asks
        # What the configuration leaves out is the service's to choose (namespace, ttl), as in the apply.
        given = {k: (None if v is UNKNOWN and config.get(k) is None else v) for k, v in planned.items()}
        clean, _ = self.ops.check(self.inputs(given, planning=True))
        s = self.session()
        try:
            if prior is not None and replacing:
                self.ops.validate_replacement(s, prior["id"], self.olds(prior), clean)
            result = self.ops.preview(s, clean) if prior is None or replacing else \
                self.ops.preview_update(s, prior["id"], self.olds(prior), clean)
        except core.ServiceError as exc:
            raise TofuError(diagnostics=[error(f.message, attribute=mapping.path(f.path, self.schema.type))
                                         for f in review.refusals(exc)]) from None
        except core.ProviderError as exc:
            raise _fail(exc, self.schema.type) from None
        known, notes = review.settled(self.ops, result.outputs, clean.get("wait_for_bound"))
        for line in (*result.warnings, *notes):
            warn(line)
        return known

    def plan(self, prior: dict | None, proposed: dict | None, config: dict | None) -> Plan:
        if proposed is None:
            for line in review.withdrawals(self.olds(prior), replacing=False) if prior is not None else ():
                warn(line)
            return Plan(None)
        planned = dict(proposed)
        for name, default in mapping.defaults(self.spec).items():
            if config is not None and config.get(name) is None:
                planned[name] = default
        diags = list(self.validate(planned)) if config is not None else []
        if diags:  # validate saw these too, unless the values were unknown then
            raise TofuError(diagnostics=diags)
        computed = [n for n, a in self.schema.attributes.items()
                    if a.computed and (config is None or config.get(n) is None)]
        if prior is None:
            for name in computed:
                if name not in mapping.defaults(self.spec):
                    planned[name] = UNKNOWN
            planned.update(self.ask(planned, config) if config is not None else {})
            return Plan(planned)
        olds = self.olds(prior)
        for name in self.spelling(planned, olds):
            planned[name] = prior[name]
        for name in mapping.defaults(self.spec):
            if (self.spec.name, name) in mapping.OVERRIDES and planned.get(name) not in (None, UNKNOWN) \
                    and prior.get(name) is not None \
                    and mapping.seconds(name, planned[name]) == mapping.seconds(name, prior[name]):
                planned[name] = prior[name]
        d = self.ops.diff(olds, self.ops.check(self.inputs(planned, planning=True))[0])
        if d.replaces:
            for name in computed:
                if name not in mapping.defaults(self.spec):
                    planned[name] = UNKNOWN
            for line in review.withdrawals(olds, replacing=True):
                warn(line)
            planned.update(self.ask(planned, config, prior, replacing=True) if config is not None else {})
            return Plan(planned, [(name,) for name in d.replaces])
        if not d.changes:  # a new `timeouts` block alone changes nothing in the service
            same = planned.get("timeouts") == prior.get("timeouts")
            return Plan(dict(prior) if same else {**prior, "timeouts": planned.get("timeouts")})
        for name in self.volatile:
            if name in computed:
                planned[name] = UNKNOWN
        planned.update(self.ask(planned, config, prior) if config is not None else {})
        return Plan(planned)

    def create(self, planned: dict, config: dict) -> dict:
        clean, failures = self.ops.check(self.inputs(planned, planning=False))
        if failures:
            raise TofuError(failures[0].message, attribute=mapping.path(failures[0].path, self.schema.type))
        try:
            created = self.ops.create(self.session(), bounded(clean, planned, "create"))
        except core.NotBound as exc:
            return self.kept(exc, planned)
        except core.ProviderError as exc:
            raise _fail(exc, self.schema.type) from None
        for line in created.warnings:
            warn(line)
        return self.state(created.id, created.outputs, planned)

    def kept(self, exc: core.NotBound, planned: dict) -> dict:
        """A peering left Failed or not Bound in time with ``error_on_not_bound``: the apply fails, and
        the object, which exists, is recorded."""
        fail_keeping_state(exc.message, attribute=mapping.path(exc.path, self.schema.type))
        return self.state(exc.id, exc.outputs, planned)

    def read(self, state: dict) -> dict | None:
        try:
            found = self.ops.read(self.session(), state["id"], self.olds(state))
        except core.ProviderError as exc:
            raise _fail(exc, self.schema.type) from None
        return None if found is None else self.state(found.id, found.outputs, state)

    def update(self, prior: dict, planned: dict, config: dict) -> dict:
        clean, _ = self.ops.check(self.inputs(planned, planning=False))
        if not self.ops.diff(self.olds(prior), clean).changes:  # only `timeouts` changed
            return {**prior, "timeouts": planned.get("timeouts")}
        try:
            updated = self.ops.update(self.session(), prior["id"], self.olds(prior),
                                      bounded(clean, planned, "update"))
        except core.NotBound as exc:
            return self.kept(exc, planned)
        except core.ProviderError as exc:
            raise _fail(exc, self.schema.type) from None
        for line in updated.warnings:
            warn(line)
        return self.state(prior["id"], updated.outputs, planned)

    def delete(self, state: dict) -> None:
        try:
            self.ops.delete(self.session(), state["id"], self.olds(state), **self.delete_options(state))
        except core.ProviderError as exc:
            raise _fail(exc, self.schema.type) from None

    def import_state(self, id: str) -> dict:
        try:
            found = self.ops.import_(self.session(), id)
        except core.ProviderError as exc:
            raise TofuError(exc.message) from None
        if found is None:
            raise TofuError(f"cannot import {self.type_name} {id!r}: it does not exist, or the token "
                                "cannot see it")
        return self.state(found.id, found.outputs, None)


class Network(CoreResource):
    type_name = "netpeer_network"
    ops = core.network
    spec = cs.NETWORK
    volatile = ("peerings", "peered_networks")
    normalised = ("subnets", "routes")

    def bookkeeping(self, prior: dict) -> dict[str, Any]:
        return {"inline_peerings": []}

    def delete_options(self, state: dict) -> dict[str, Any]:
        limit = mapping.timeout(state.get("timeouts"), "delete")
        return {} if limit is None else {"in_use_wait": limit}



class Peering(CoreResource):
    type_name = "netpeer_peering"
    ops = core.peering
    spec = cs.NETWORK_PEERING
    volatile = ("phase", "reason", "message", "remote_uid", "last_phase_transition_time", "expires_at", "dataplane",
                "programmed_at")
    normalised = ("ttl",)
    predicted = review.STATUS

    def bookkeeping(self, prior: dict) -> dict[str, Any]:
        # OpenTofu keeps a remote_uid left out of the configuration: compare pins with what is held.
        return {"pinned_remote_uid": prior.get("remote_uid")}


Network.schema = Network.make_schema()
Peering.schema = Peering.make_schema()


def _data_attributes() -> dict[str, Attribute]:
    """A network's attributes, all read: only ``name`` (and ``namespace``) are given."""
    attrs = {n: Attribute(a.type, a.description, computed=True) for n, a in mapping.attributes(cs.NETWORK).items()}
    attrs["name"] = Attribute(STRING, cs.GET_NETWORK.arguments[0].description, required=True)
    attrs["namespace"] = dataclasses.replace(mapping.attributes(cs.NETWORK)["namespace"])
    return attrs


class NetworkData(DataSource):
    """Reads a network of a namespace the token grants: its uid, prefixes and peerings."""

    type_name = "netpeer_network"
    schema = Schema(attributes=_data_attributes(), description=cs.GET_NETWORK.description)  # Pulumi's getNetwork

    def read(self, config: dict) -> dict:
        try:
            found = core.network.lookup(self.provider.session(), config["name"], config.get("namespace") or None)
        except core.ProviderError as exc:
            raise _fail(exc, self.schema.type) from None
        return {**Network(self.provider).state(found.id, found.outputs, None), "name": config["name"]}


#: One request of ``netpeer_peering_requests`` (docs/inbox.md).
REQUEST_TYPE = object_of({name: list_of(STRING) if kind == "array" else STRING
                          for name, kind, _ in inbox.REQUEST_FIELDS})


class PeeringRequestsData(DataSource):
    """The requests to peer with networks of a namespace (docs/inbox.md): accept one in code with a
    ``netpeer_peering`` built from its fields (``remote_namespace = requester_namespace``, ...)."""

    type_name = "netpeer_peering_requests"
    schema = Schema(
        attributes={
            "namespace": Attribute(STRING, "The namespace whose networks the requests name (default: the "
                                           "token's namespace when it grants exactly one).", optional=True,
                                   computed=True),
            "network": Attribute(STRING, "Only the requests to this network.", optional=True),
            "requests": Attribute(list_of(REQUEST_TYPE), "The requests not dismissed, by network, then "
                                                         "requester.", computed=True),
        },
        description="Reads the requests other networks make to peer with the networks of a namespace: halves "
                    "naming them that have no matching half yet.")

    def read(self, config: dict) -> dict:
        try:
            found = inbox.list_requests(self.provider.session(), config.get("namespace"), config.get("network"))
        except core.ProviderError as exc:
            raise TofuError(exc.message, attribute=exc.path or None) from None
        return {**found, "network": config.get("network")}


class NetpeerProvider(Provider):
    """The ``provider "netpeer"`` block: endpoint, token, TLS files; each falls back to its variable."""

    schema = Schema(attributes=mapping.provider_attributes(),
                    description=cs.PROVIDER.description)
    resources = (Network, Peering)
    data_sources = (NetworkData, PeeringRequestsData)

    def __init__(self) -> None:
        super().__init__()
        self._config: dict[str, Any] = {}
        self.settings_unknown = False

    def configure(self, config: dict, tofu_version: str) -> None:
        # Unknown settings (known after apply) count as unset: the calls that need them say so.
        self._config = {k: v for k, v in config.items() if v is not None and v is not UNKNOWN}
        self.settings_unknown = any(v is UNKNOWN for v in config.values())

    def session(self) -> core.Session:
        return core.Session(core.Settings.resolve(self._config), TERMS, progress=_progress)


def _progress(line: str) -> None:
    print(f"netpeer: {line}", file=sys.stderr, flush=True)  # OpenTofu's log
