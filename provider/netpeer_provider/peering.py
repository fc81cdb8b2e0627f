"""The dynamic provider behind ``pulumi_netpeer.NetworkPeering``."""

from __future__ import annotations

import time
from typing import Any

from pulumi.dynamic import (CheckFailure, CheckResult, ConfigureRequest, CreateResult, DiffResult,
                            ReadResult, ResourceProvider, UpdateResult)

from netpeer import errors
from netpeer.core import validate
from netpeer_provider import common

# Changing any of these makes it another peering: replace (delete first, the
# name is unique per network).
IDENTITY = ("namespace", "network", "name", "remote_namespace", "remote_network", "remote_uid")
UPDATABLE = ("description", "ttl", "wait_for_bound")
OUTPUTS = ("phase", "reason", "message", "network_uid", "last_phase_transition_time", "expires_at")


def _resource_id(ns: str, network: str, name: str) -> str:
    return f"namespaces/{ns}/networks/{network}/peerings/{name}"


def _parse_id(id_: str) -> tuple[str, str, str]:
    parts = id_.split("/")
    if len(parts) != 6 or parts[0] != "namespaces" or parts[2] != "networks" or parts[4] != "peerings":
        raise common.NetpeerProviderError(
            f"id: {id_!r} is not a peering id (namespaces/NS/networks/NETWORK/peerings/NAME)")
    return parts[1], parts[3], parts[5]


def outputs(inputs: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """Every input (diff sees old outputs, not old inputs) plus the status."""
    out = {k: inputs.get(k) for k in ("namespace", "network", "name", "remote_namespace", "remote_network",
                                     "description", "ttl", "wait_for_bound")}
    out.update(namespace=p["namespace"], remote_namespace=p["remote_namespace"],
               pinned_remote_uid=inputs.get("remote_uid") or None, remote_uid=p["remote_uid"],
               ttl=p["ttl"], description=p["description"])
    out.update({k: p[k] for k in OUTPUTS})
    return out


def check_inputs(news: dict[str, Any], prefix: str = "") -> tuple[dict[str, Any], list[CheckFailure]]:
    """Validates what is known; unknown values (preview) pass through."""
    failures: list[CheckFailure] = []
    clean = dict(news)

    def run(field: str, fn):
        value = news.get(field)
        if value is None or value == "" or not common.known(value):
            return
        try:
            clean[field] = fn(f"{prefix}{field}", value)
        except errors.InvalidArgument as exc:
            failures.append(CheckFailure(f"{prefix}{field}", exc.message))

    for field in ("namespace", "network", "remote_namespace", "remote_network"):
        run(field, validate.name)
    run("name", lambda f, v: validate.name(f, v, peering=True))
    run("remote_uid", validate.uid)
    run("ttl", lambda f, v: validate.format_duration(validate.ttl(f, v)))
    run("description", validate.description)
    wait = news.get("wait_for_bound")
    if wait is not None and common.known(wait):
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 3600:
            failures.append(CheckFailure(f"{prefix}wait_for_bound",
                                         f"{prefix}wait_for_bound: {wait!r} must be a number of seconds from 0 to 3600"))
    for field in ("network", "name", "remote_network"):
        if not news.get(field):
            failures.append(CheckFailure(f"{prefix}{field}", f"{prefix}{field} is required"))
    ns, rns = news.get("namespace"), news.get("remote_namespace") or news.get("namespace")
    if (rns, news.get("remote_network")) == (ns, news.get("network")) and ns and common.known(ns):
        failures.append(CheckFailure(f"{prefix}remote_network", f"{prefix}remote_network: a network cannot peer "
                                     "with itself"))
    return clean, failures


class NetworkPeeringProvider(ResourceProvider):
    """One side's consent to peer two networks. No state on the object."""

    def configure(self, req: ConfigureRequest) -> None:
        common.configure(req)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        clean, failures = check_inputs(news)
        return CheckResult(clean, failures)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = []
        for key in IDENTITY:
            old = olds.get("pinned_remote_uid") if key == "remote_uid" else olds.get(key)
            new = news.get(key)
            if key in ("namespace", "remote_namespace") and not new:
                continue  # defaulted by the service: what it chose stays
            if not common.known(new) or (new or None) != (old or None):
                replaces.append(key)
        changes = bool(replaces) or any(
            not common.known(news.get(k)) or (news.get(k) or None) != (olds.get(k) or None)
            for k in ("description", "wait_for_bound"))
        if not changes and news.get("ttl") and common.known(news.get("ttl")):
            changes = validate.format_duration(validate.ttl("ttl", news["ttl"])) != olds.get("ttl")
        return DiffResult(changes=changes, replaces=replaces, stables=[], delete_before_replace=True)

    def create(self, props: dict[str, Any]) -> CreateResult:
        def run(c):
            ns = props.get("namespace") or _default_namespace(c)
            ttl = validate.ttl("ttl", props["ttl"]) if props.get("ttl") else None
            p = c.create_peering(ns, props["network"], props["name"], props["remote_network"],
                                 props.get("remote_namespace") or None, props.get("remote_uid") or None, ttl,
                                 props.get("description") or "")
            p = _wait(c, p, props.get("wait_for_bound") or 0, rollback=True)
            return p
        try:
            p = common.call(f"creating peering {props.get('network')}/{props.get('name')}", run)
        except common.NetpeerProviderError as exc:
            if "already exists" in str(exc) and f"peering " in str(exc):
                raise common.NetpeerProviderError(
                    f"{exc}; a peering is managed either inline in Network(peerings=[...]) or as a "
                    "NetworkPeering resource, not both") from None
            raise
        return CreateResult(_resource_id(p["namespace"], p["network"], p["name"]), outputs(props, p))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        ns, network, name = _parse_id(id_)
        try:
            with common.client() as c:
                p = c.get_peering(ns, network, name)
        except errors.NotFound:
            return ReadResult(None, {})  # gone: Pulumi drops it from the state
        except errors.NetpeerError as exc:
            raise common.NetpeerProviderError(f"reading peering {id_}: {exc.message}") from None
        inputs = {"namespace": ns, "network": network, "name": name, "remote_network": p["remote_network"],
                  "remote_namespace": p["remote_namespace"], "description": p["description"], "ttl": p["ttl"]}
        if props.get("pinned_remote_uid"):
            inputs["remote_uid"] = props["pinned_remote_uid"]
        inputs["wait_for_bound"] = props.get("wait_for_bound") or 0  # a setting of ours, not the service's
        return ReadResult(id_, outputs(inputs, p), inputs)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        ns, network, name = _parse_id(id_)

        def run(c):
            ttl = validate.ttl("ttl", news["ttl"]) if news.get("ttl") else None
            p = c.update_peering(ns, network, name, description=news.get("description") or "", ttl=ttl)
            return _wait(c, p, news.get("wait_for_bound") or 0, rollback=False)
        p = common.call(f"updating peering {network}/{name}", run)
        return UpdateResult(outputs(news, p))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        ns, network, name = _parse_id(id_)
        try:
            with common.client() as c:
                c.delete_peering(ns, network, name)
        except errors.NotFound:
            return  # already gone: that is what we wanted
        except errors.NetpeerError as exc:
            raise common.NetpeerProviderError(f"deleting peering {id_}: {exc.message}") from None


def _default_namespace(c) -> str:
    who = c.caller()
    if len(who["namespaces"]) != 1:
        raise common.NetpeerProviderError(
            "namespace is required: the token grants " + (", ".join(who["namespaces"]) or "every namespace"))
    return who["namespaces"][0]


def _wait(c, p: dict[str, Any], seconds: float, rollback: bool) -> dict[str, Any]:
    """With ``wait_for_bound``, poll until Bound; if it does not bind in time,
    withdraw a half this call created (so state and service agree) and fail
    with the phase and reason."""
    if not seconds or p["phase"] == "Bound":
        return p
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        p = c.get_peering(p["namespace"], p["network"], p["name"])
        if p["phase"] == "Bound":
            return p
    note = ""
    if rollback:
        c.delete_peering(p["namespace"], p["network"], p["name"])
        note = "; this half was withdrawn again, run `pulumi up` once the other side has consented"
    raise common.NetpeerProviderError(
        f"peering {p['namespace']}/{p['network']}/{p['name']} is {p['phase']} ({p['reason']}: {p['message']}) "
        f"after wait_for_bound={seconds:g}s{note}")
