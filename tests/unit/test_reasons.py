"""Errors as a contract: every raise site of a netpeer error names its reason
from the one list (netpeer/reasons.py), every reason on that list is
documented in docs/api.md, and the mapping to gRPC status details is made in
one module (netpeer/api/errors.py). Read from the source (an AST scan), so a
raise site added tomorrow is checked too."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from netpeer import errors
from netpeer.reasons import Reason

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "netpeer", ROOT / "dev" / "netpeer_dev", ROOT / "provider" / "netpeer_provider"]
#: The layers whose errors netpeerd answers: there, every refusal but a malformed
#: field (InvalidArgument: INVALID_FIELD, with the field named) says why explicitly.
ANSWERING = [ROOT / "netpeer" / d for d in ("service", "api", "ovn", "store")]
CLASSES = {name for name, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, errors.NetpeerError)}


def _files(dirs):
    for d in dirs:
        for path in sorted(d.rglob("*.py")):
            if "/v1/" not in str(path) and "_pb2" not in path.name:
                yield path


def _reason_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names bound to ``netpeer.reasons.Reason`` and to the module ``netpeer.reasons``."""
    enums, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "netpeer.reasons":
            enums |= {a.asname or a.name for a in node.names if a.name == "Reason"}
        if isinstance(node, ast.ImportFrom) and node.module == "netpeer":
            modules |= {a.asname or a.name for a in node.names if a.name == "reasons"}
    return enums, modules


def _error_class(call: ast.Call) -> str | None:
    """The netpeer error class a call constructs (``X(...)``, ``errors.X(...)``, ``X.for_field(...)``)."""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "for_field":
        f = f.value
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return name if name in CLASSES else None


#: Where errors are made from the wire: their reason is whatever netpeerd sent.
DECODER = ROOT / "netpeer" / "api" / "errors.py"


def _sites(dirs):
    for path in _files(dirs):
        if path == DECODER:
            continue
        tree = ast.parse(path.read_text(), str(path))
        enums, modules = _reason_aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (cls := _error_class(node)):
                reason = next((k.value for k in node.keywords if k.arg == "reason"), None)
                yield f"{path.relative_to(ROOT)}:{node.lineno}", cls, reason, enums, modules


def _listed(expr: ast.expr, enums: set[str], modules: set[str]) -> bool:
    """``Reason.NAME`` (or ``reasons.Reason.NAME``) with NAME on the list."""
    if not isinstance(expr, ast.Attribute) or expr.attr not in Reason.__members__:
        return False
    base = expr.value
    if isinstance(base, ast.Name):
        return base.id in enums
    return (isinstance(base, ast.Attribute) and base.attr == "Reason" and isinstance(base.value, ast.Name)
            and base.value.id in modules)


def test_the_scan_finds_the_raise_sites():
    # A scan that found nothing would pass whatever the code does.
    sites = list(_sites(SOURCES))
    assert len(sites) > 250 and sum(r is not None for _, _, r, _, _ in sites) > 60, len(sites)


def test_every_reason_given_is_a_listed_one():
    wrong = [(where, ast.unparse(reason)) for where, _, reason, enums, modules in _sites(SOURCES)
             if reason is not None and not _listed(reason, enums, modules)]
    assert wrong == []


def test_every_refusal_netpeerd_answers_names_its_reason():
    missing = [f"{where} {cls}" for where, cls, reason, _, _ in _sites(ANSWERING)
               if reason is None and cls != "InvalidArgument"]
    assert missing == []


def test_the_reasons_are_stable_upper_snake_names():
    assert all(r.value == r.name and re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", r.name) for r in Reason)
    assert all(cls.default_reason in Reason for cls in vars(errors).values()
               if isinstance(cls, type) and issubclass(cls, errors.NetpeerError))


def test_every_reason_is_documented_and_nothing_else():
    text = (ROOT / "docs" / "api.md").read_text()
    rows = set(re.findall(r"^\| `([A-Z_0-9]+)` \|", text, re.M))
    assert rows == set(Reason.__members__), (set(Reason.__members__) - rows, rows - set(Reason.__members__))


def test_status_details_are_made_in_one_module():
    makers = [str(p.relative_to(ROOT)) for p in _files(SOURCES)
              if re.search(r"^\s*(from google\.rpc|import grpc_status|from grpc_status)", p.read_text(), re.M)]
    assert makers == ["netpeer/api/errors.py"]
