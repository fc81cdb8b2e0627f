"""The dynamic provider behind ``pulumi_netpeer.Network``.

A network may declare its peerings inline (IEP-9 ``spec.peerings``); they
are created, updated and withdrawn with the network. Outputs carry both the
inline declarations as given (``inline_peerings``, used for diffs) and the
phases of every peering of the network (``peerings``).
"""

from __future__ import annotations

from typing import Any

from pulumi.dynamic import (CheckFailure, CheckResult, ConfigureRequest, CreateResult, DiffResult,
                            ReadResult, ResourceProvider, UpdateResult)

from netpeer import errors
from netpeer.core import validate
from netpeer_provider import common
from netpeer_provider.peering import _default_namespace, check_inputs

INLINE_KEYS = ("name", "remote_network", "remote_namespace", "remote_uid", "ttl", "description")


def _resource_id(ns: str, name: str) -> str:
    return f"namespaces/{ns}/networks/{name}"


def _parse_id(id_: str) -> tuple[str, str]:
    parts = id_.split("/")
    if len(parts) != 4 or parts[0] != "namespaces" or parts[2] != "networks":
        raise common.NetpeerProviderError(f"id: {id_!r} is not a network id (namespaces/NS/networks/NAME)")
    return parts[1], parts[3]


def _inline(peerings: Any) -> list[dict[str, Any]]:
    """The inline declarations, normalised (no None values, sorted by name)."""
    out = []
    for p in peerings or []:
        out.append({k: p[k] for k in INLINE_KEYS if p.get(k) not in (None, "")})
    return sorted(out, key=lambda p: p.get("name", ""))


def outputs(inputs: dict[str, Any], n: dict[str, Any], peerings: list[dict[str, Any]]) -> dict[str, Any]:
    by_name = {p["name"]: p for p in peerings}
    return {
        "namespace": n["namespace"], "name": n["name"], "uid": n["uid"], "subnets": n["subnets"],
        "routes": n["routes"], "description": n["description"],
        "inline_peerings": _inline(inputs.get("peerings")),
        "peerings": [{"name": s["name"], "remote_namespace": s["remote_namespace"],
                      "remote_network": s["remote_network"], "phase": s["phase"], "reason": s["reason"],
                      "remote_uid": by_name.get(s["name"], {}).get("remote_uid"),
                      "last_phase_transition_time": s["last_phase_transition_time"],
                      "expires_at": by_name.get(s["name"], {}).get("expires_at")} for s in n["peerings"]],
        "peered_networks": n["peered_networks"],
    }


BOTH_WAYS = ("a peering is managed either inline in Network(peerings=[...]) or as a NetworkPeering "
             "resource, not both: remove one of the two declarations")


def _conflict_hint(exc: errors.NetpeerError, network: str, name: str) -> str:
    if isinstance(exc, errors.AlreadyExists) and exc.message.startswith("peering "):
        return f"peerings[{name}]: {exc.message}; {BOTH_WAYS}"
    return f"peerings[{name}]: {exc.message}"


class NetworkProvider(ResourceProvider):
    def configure(self, req: ConfigureRequest) -> None:
        common.configure(req)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures: list[CheckFailure] = []
        clean = dict(news)
        for field in ("namespace", "name"):
            value = news.get(field)
            if value and common.known(value):
                try:
                    validate.name(field, value)
                except errors.InvalidArgument as exc:
                    failures.append(CheckFailure(field, exc.message))
        if not news.get("name"):
            failures.append(CheckFailure("name", "name is required"))
        subnets, routes = news.get("subnets"), news.get("routes") or []
        if common.known(subnets) and common.known(routes):
            try:
                s, r = validate.prefixes(subnets or [], routes)
                clean["subnets"] = list(s)
                clean["routes"] = [f"{x.prefix} via {x.next_hop}" if x.next_hop else x.prefix for x in r]
            except errors.InvalidArgument as exc:
                failures.append(CheckFailure(exc.field or "subnets", exc.message))
        if news.get("description") and common.known(news["description"]):
            try:
                validate.description("description", news["description"])
            except errors.InvalidArgument as exc:
                failures.append(CheckFailure("description", exc.message))
        seen = set()
        for i, p in enumerate(news.get("peerings") or []):
            if not isinstance(p, dict):
                if common.known(p):
                    failures.append(CheckFailure(f"peerings[{i}]", f"peerings[{i}] must be an object"))
                continue
            decl = dict(p, namespace=news.get("namespace"), network=news.get("name"))
            _, more = check_inputs(decl, prefix=f"peerings[{i}].")
            failures += more
            name = p.get("name")
            if name in seen and common.known(name):
                failures.append(CheckFailure(f"peerings[{i}].name", f"peerings[{i}].name: {name!r} is declared twice"))
            seen.add(name)
        return CheckResult(clean, failures)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = []
        if not common.known(news.get("name")) or news.get("name") != olds.get("name"):
            replaces.append("name")
        if news.get("namespace") and news.get("namespace") != olds.get("namespace"):
            replaces.append("namespace")
        changes = bool(replaces)
        for key in ("subnets", "routes", "description", "peerings"):
            new = news.get(key)
            old = olds.get("inline_peerings" if key == "peerings" else key)
            if not common.known(new):
                changes = True
            elif key == "peerings":
                changes |= _inline(new) != (old or [])
            elif key == "description":
                changes |= (new or "") != (old or "")
            else:
                changes |= list(new or []) != list(old or [])
        return DiffResult(changes=changes, replaces=replaces, stables=[], delete_before_replace=True)

    def create(self, props: dict[str, Any]) -> CreateResult:
        def run(c):
            ns = props.get("namespace") or _default_namespace(c)
            c.create_network(ns, props["name"], props.get("subnets") or [], props.get("routes") or [],
                             props.get("description") or "")
            try:
                _sync_inline(c, ns, props["name"], [], _inline(props.get("peerings")))
            except Exception:
                # Not in the state if create fails: leave nothing behind in the service either.
                _sync_inline(c, ns, props["name"], _inline(props.get("peerings")), [])
                c.delete_network(ns, props["name"])
                raise
            return c.get_network(ns, props["name"]), c.list_peerings(ns, props["name"])
        n, peerings = common.call(f"creating network {props.get('name')}", run)
        return CreateResult(_resource_id(n["namespace"], n["name"]), outputs(props, n, peerings))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        ns, name = _parse_id(id_)
        try:
            with common.client() as c:
                n = c.get_network(ns, name)
                peerings = c.list_peerings(ns, name)
        except errors.NotFound:
            return ReadResult(None, {})
        except errors.NetpeerError as exc:
            raise common.NetpeerProviderError(f"reading network {id_}: {exc.message}") from None
        declared = {p["name"] for p in props.get("inline_peerings") or []}
        inline = [{k: v for k, v in {"name": p["name"], "remote_network": p["remote_network"],
                                      "remote_namespace": p["remote_namespace"], "ttl": p["ttl"],
                                      "description": p["description"]}.items() if v}
                  for p in peerings if p["name"] in declared]
        inputs = {"namespace": ns, "name": name, "subnets": n["subnets"], "routes": n["routes"],
                  "description": n["description"], "peerings": inline}
        return ReadResult(id_, outputs(inputs, n, peerings), inputs)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        ns, name = _parse_id(id_)

        def run(c):
            c.update_network(ns, name, subnets=news.get("subnets") or [], routes=news.get("routes") or [],
                             description=news.get("description") or "")
            _sync_inline(c, ns, name, olds.get("inline_peerings") or [], _inline(news.get("peerings")))
            return c.get_network(ns, name), c.list_peerings(ns, name)
        n, peerings = common.call(f"updating network {name}", run)
        return UpdateResult(outputs(news, n, peerings))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        ns, name = _parse_id(id_)
        try:
            with common.client() as c:
                for p in props.get("inline_peerings") or []:
                    try:
                        c.delete_peering(ns, name, p["name"])
                    except errors.NotFound:
                        pass
                c.delete_network(ns, name)
        except errors.NotFound:
            return
        except errors.NetpeerError as exc:
            raise common.NetpeerProviderError(f"deleting network {id_}: {exc.message}") from None


def _sync_inline(c, ns: str, network: str, old: list[dict], new: list[dict]) -> None:
    """Withdraw removed inline peerings, create added ones, update changed ones;
    a changed identity (remote) is a withdraw plus a create."""
    olds = {p["name"]: p for p in old}
    news = {p["name"]: p for p in new}
    for name, p in olds.items():
        q = news.get(name)
        if q is None or any(q.get(k) != p.get(k) for k in ("remote_network", "remote_namespace", "remote_uid")):
            try:
                c.delete_peering(ns, network, name)
            except errors.NotFound:
                pass
    for name, q in news.items():
        p = olds.get(name)
        ttl = validate.ttl(f"peerings[{name}].ttl", q["ttl"]) if q.get("ttl") else None
        same_identity = p is not None and all(q.get(k) == p.get(k)
                                              for k in ("remote_network", "remote_namespace", "remote_uid"))
        try:
            if same_identity:
                if q.get("description") != p.get("description") or q.get("ttl") != p.get("ttl"):
                    c.update_peering(ns, network, name, description=q.get("description") or "", ttl=ttl)
            else:
                c.create_peering(ns, network, name, q["remote_network"], q.get("remote_namespace"),
                                 q.get("remote_uid"), ttl, q.get("description") or "")
        except errors.NetpeerError as exc:
            raise common.NetpeerProviderError(f"network {ns}/{network}: {_conflict_hint(exc, network, name)}") from None
