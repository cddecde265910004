"""Every ErrorInfo reason and metadata key the code can send, found by reading the source (an AST
walk) and the gateway's rendered configuration, for the catalogue test to hold against
``knowledge_runtime.reasons``."""

from __future__ import annotations

import ast
import base64
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from google.rpc import error_details_pb2, status_pb2
from knowledge_runtime.errors import dependency_reason

# Calls whose string argument names a dependency: its reasons are <NAME>_UNAVAILABLE and
# <NAME>_OVERLOADED (knowledge_runtime.errors.dependency_reason).
DEPENDENCY_CALLS = frozenset({"DependencyUnavailable", "domain_error_from", "_translate"})
# Keywords of an InvalidField subclass's constructor that are not metadata.
NOT_METADATA = frozenset({"field", "message", "reason", "metadata"})
# A reason in JSON or in a Lua pattern over JSON ("reason"%s*:%s*"X").
_JSON_REASON = re.compile(r'"reason"(?:\s|%s\*)*:(?:\s|%s\*)*"([A-Z][A-Z0-9_]*)"')
# What an ErrorInfo reason looks like (DomainError refuses anything else); a ``reason=`` keyword
# holding prose is some other call's (a log line's, a warning's).
_REASON = re.compile(r"^[A-Z][A-Z0-9_]*$")


@dataclass
class Found:
    reasons: dict[str, list[str]] = field(default_factory=dict)  # reason -> where
    metadata_keys: dict[str, list[str]] = field(default_factory=dict)

    def reason(self, name: str, where: str) -> None:
        if _REASON.match(name):
            self.reasons.setdefault(name, []).append(where)

    def key(self, name: str, where: str) -> None:
        self.metadata_keys.setdefault(name, []).append(where)


def python_files(*roots: Path) -> Iterator[Path]:
    for root in roots:
        yield from (p for p in sorted(root.rglob("*.py")) if "_pb2" not in p.name)


def _subclasses_of(base: str, trees: Iterable[ast.AST]) -> set[str]:
    parents: dict[str, set[str]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                parents.setdefault(node.name, set()).update(names)
    found = {base}
    grew = True
    while grew:
        grew = False
        for name, bases in parents.items():
            if name not in found and bases & found:
                found.add(name)
                grew = True
    return found


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_super_init(call: ast.Call) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "__init__"
        and isinstance(func.value, ast.Call)
        and _name(func.value.func) == "super"
    )


def from_python(paths: Iterable[Path], root: Path) -> Found:
    """Reasons: ``reason="X"`` (or ``reason=Cls.X``) in any call, ``reason = "X"`` in a class
    body, ``Refusal.X``, and a dependency's reasons; metadata keys: a ``metadata={...}`` literal's
    keys and the extra keywords an InvalidField subclass is built with."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in paths}
    invalid_fields = _subclasses_of("InvalidField", trees.values())
    found = Found()
    for path, tree in trees.items():
        where = str(path.relative_to(root))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if (
                        isinstance(statement, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == "reason" for t in statement.targets)
                        and isinstance(statement.value, ast.Constant)
                        and isinstance(statement.value.value, str)
                    ):
                        found.reason(statement.value.value, where)
                if node.name in invalid_fields:
                    for inner in ast.walk(node):
                        if isinstance(inner, ast.Call) and _is_super_init(inner):
                            for keyword in inner.keywords:
                                if keyword.arg and keyword.arg not in NOT_METADATA:
                                    found.key(keyword.arg, where)
            elif isinstance(node, ast.Attribute) and _name(node.value) == "Refusal" and node.attr.isupper():
                found.reason(node.attr, where)
            elif isinstance(node, ast.Call):
                callee = _name(node.func)
                for keyword in node.keywords:
                    if keyword.arg == "reason":
                        value = keyword.value
                        if isinstance(value, ast.Constant) and isinstance(value.value, str):
                            found.reason(value.value, where)
                        elif isinstance(value, ast.Attribute) and value.attr.isupper():
                            found.reason(value.attr, where)  # a class's constant named as its value
                    elif keyword.arg == "metadata" and isinstance(keyword.value, ast.Dict):
                        for key in keyword.value.keys:
                            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                                found.key(key.value, where)
                    elif keyword.arg and callee in invalid_fields and keyword.arg not in NOT_METADATA:
                        found.key(keyword.arg, where)
                if callee in DEPENDENCY_CALLS:
                    for argument in node.args:
                        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                            found.reason(dependency_reason(argument.value), where)
                            found.reason(dependency_reason(argument.value, overloaded=True), where)
    return found


def from_gateway(bootstrap: dict) -> Found:
    """The reasons and metadata keys of every answer the gateway gives itself: its local replies'
    JSON bodies, the Lua filter's (in the rendered source), and every ``grpc-status-details-bin``
    it adds for a gRPC caller."""
    found = Found()

    def visit(value: object, path: str) -> None:
        if isinstance(value, dict):
            if value.get("key") == "grpc-status-details-bin" and isinstance(value.get("value"), str):
                status = status_pb2.Status.FromString(
                    base64.b64decode(value["value"] + "=" * (-len(value["value"]) % 4))
                )
                for detail in status.details:
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    found.reason(info.reason, path)
                    for key in info.metadata:
                        found.key(key, path)
            if isinstance(value.get("reason"), str):
                found.reason(value["reason"], path)
                for key in value.get("metadata", {}) or {}:
                    found.key(key, path)
            for key, inner in value.items():
                visit(inner, f"{path}.{key}")
        elif isinstance(value, list):
            for i, inner in enumerate(value):
                visit(inner, f"{path}[{i}]")
        elif isinstance(value, str):
            for reason in _JSON_REASON.findall(value):
                found.reason(reason, path)
            if value.startswith("{") and '"metadata"' in value:
                try:
                    parsed = json.loads(value)
                except ValueError:
                    return
                visit(parsed, path)

    visit(bootstrap, "envoy")
    return found
