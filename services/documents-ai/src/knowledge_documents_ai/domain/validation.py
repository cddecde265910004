"""Checking a tenant's JSON Schema, and JSON against it, so that neither can stall the service
for every tenant or end in a 500.

- **Nesting.** JSON text (a schema a caller sends, a model's answer) is measured before it is
  parsed, in one pass that does not recurse: ``json.loads`` and the validators do recurse, and
  text nested thousands deep ends in RecursionError. ``MAX_NESTING`` bounds it, and a pattern's
  groups as well.
- **Patterns run on RE2**, in time linear in the text, never on Python's backtracking ``re``:
  ``^(a+)+$`` against thirty characters takes ``re`` seconds, holding the GIL, so no thread
  would keep the event loop free. A pattern RE2 cannot run (back-references, look-around) is
  refused when the schema is created. ``patternProperties`` is refused outright: the library
  matches those patterns with ``re`` inside other keywords (``additionalProperties``,
  ``unevaluatedProperties``) that cannot be redirected, and an extraction schema names its
  fields in ``properties`` anyway (the model is shown only those).
- **A deadline.** Every keyword the validator applies first checks the caller's deadline, so a
  schema whose ``$ref`` fan out exponentially stops at ``VALIDATION_SECONDS`` (``TooSlow``)
  instead of running on. Callers run these checks off the event loop.

All through jsonschema's extension points: ``validators.extend`` replaces the ``pattern`` keyword
and wraps every keyword, and a ``FormatChecker`` checks the metaschema's ``regex`` format with RE2.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import re2
from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from knowledge_documents_ai.domain.limits import MAX_NESTING, VALIDATION_SECONDS

SHOWN_CHARS = 120  # of a value or pattern quoted in an error message


class TooDeep(Exception):
    def __init__(self, limit: int = MAX_NESTING) -> None:
        super().__init__(f"it nests deeper than {limit} levels (the limit)")


class TooSlow(Exception):
    def __init__(self, seconds: float = VALIDATION_SECONDS) -> None:
        super().__init__(f"checking it took longer than {seconds:g} s (the limit); simplify the schema")


class Unusable(Exception):
    """A stored schema that cannot be applied (a rule tightened since it was stored, a ``$ref``
    that does not resolve or refers to itself without end)."""


# ---- nesting ----

_JSON_STRUCTURE = re.compile(r'[\\"\[\]{}]')  # one character at a time: no backtracking


def json_nesting(text: str, limit: int = MAX_NESTING) -> int:
    """How deep the arrays and objects of JSON ``text`` nest, counted no further than ``limit + 1``;
    brackets inside strings do not count."""
    depth = deepest = 0
    in_string = False
    escaped_at = -1
    for found in _JSON_STRUCTURE.finditer(text):
        char, at = found.group(), found.start()
        if at == escaped_at:
            continue
        if in_string:
            if char == "\\":
                escaped_at = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        elif char in "]}":
            depth -= 1
    return deepest


def loads(text: str, limit: int = MAX_NESTING) -> Any:
    """``json.loads``, refusing first (``TooDeep``) text nested deeper than ``limit``."""
    if json_nesting(text, limit) > limit:
        raise TooDeep(limit)
    return json.loads(text)


def group_nesting(pattern: str) -> int:
    """How deep a regular expression's groups nest (escapes and character classes skipped)."""
    depth = deepest = 0
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    return deepest


# ---- patterns on RE2 ----

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is the caller's answer, not a line on stderr


def pattern_problem(pattern: str) -> str:
    """Why ``pattern`` cannot be used in a schema; empty when it can."""
    if group_nesting(pattern) > MAX_NESTING:
        return f"its groups nest deeper than {MAX_NESTING} levels (the limit)"
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as error:
        return f"RE2, which runs patterns in linear time, cannot run it ({_error_text(error)})"
    return ""


def _error_text(error: Exception) -> str:
    text = error.args[0] if error.args else str(error)
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        compiled = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error:
        raise Unusable(f"its pattern {shown(pattern)} is one RE2 cannot run; create a new version") from None
    if not compiled.search(instance):
        yield ValidationError(f"{shown(instance)} does not match {shown(pattern)}")


def shown(value: Any) -> str:
    """``value`` as quoted in a message: its repr, clipped."""
    return clipped(repr(value), SHOWN_CHARS)


def clipped(text: str, limit: int = 2 * SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- the deadline ----

_deadline: ContextVar[float] = ContextVar("schema_validation_deadline", default=math.inf)

Keyword = Callable[[Any, Any, Any, Mapping[str, Any]], Any]


def _bounded(keyword: Keyword) -> Keyword:
    def check(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Any:
        if time.monotonic() > _deadline.get():
            raise TooSlow()
        return keyword(validator, value, instance, schema)

    return check


@contextmanager
def _within(seconds: float) -> Iterator[None]:
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


# ``extend`` has no annotations in the library's stubs; the class it makes is a Draft 2020-12 one.
SchemaValidator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {name: _bounded(keyword) for name, keyword in {**Draft202012Validator.VALIDATORS, "pattern": _pattern}.items()},
)

_FORMATS = FormatChecker(Draft202012Validator.FORMAT_CHECKER.checkers)


@_FORMATS.checks("regex", raises=ValueError)
def _runs_on_re2(instance: object) -> bool:
    if isinstance(instance, str) and (problem := pattern_problem(instance)):
        raise ValueError(problem)
    return True


# ---- checks ----


def schema_problem(schema: Mapping[str, Any], seconds: float = VALIDATION_SECONDS) -> str:
    """Why ``schema`` is not a JSON Schema (draft 2020-12) this service can apply; empty when it is."""
    try:
        with _within(seconds):
            meta = SchemaValidator(Draft202012Validator.META_SCHEMA, format_checker=_FORMATS)
            error = next(iter(meta.iter_errors(schema)), None)
    except TooSlow as slow:
        return str(slow)
    except RecursionError:  # bounded by the nesting check; a schema built elsewhere may not be
        return f"it nests deeper than {MAX_NESTING} levels (the limit)"
    if error is not None:
        return f"not a valid JSON Schema at {_where(error)}: {_describe_schema_error(error)}"
    if _has_pattern_properties(schema):
        return 'patternProperties is not supported: name each field in "properties"'
    return ""


def _where(error: ValidationError) -> str:
    return "/".join(str(p) for p in error.absolute_path) or "its top level"


def _describe_schema_error(error: ValidationError) -> str:
    if error.validator == "format" and error.cause is not None:
        return f"the pattern {shown(error.instance)} cannot be used: {error.cause}"
    return clipped(error.message)


def _has_pattern_properties(schema: Mapping[str, Any]) -> bool:
    """Whether any subschema (every place the draft reads a schema) uses ``patternProperties``."""
    stack = [DRAFT202012.create_resource(schema)]
    while stack:
        resource = stack.pop()
        if isinstance(resource.contents, Mapping) and "patternProperties" in resource.contents:
            return True
        stack.extend(resource.subresources())
    return False


def instance_errors(
    schema: Mapping[str, Any], instance: Any, seconds: float = VALIDATION_SECONDS
) -> list[ValidationError]:
    """How ``instance`` fails ``schema``, in path order. ``TooSlow`` past ``seconds``;
    ``Unusable`` when the schema cannot be applied."""
    if _has_pattern_properties(schema):  # a schema stored before the rule: never given to ``re``
        raise Unusable("it uses patternProperties, which is no longer supported; create a new version")
    try:
        with _within(seconds):
            return sorted(SchemaValidator(schema).iter_errors(instance), key=lambda e: [str(p) for p in e.path])
    except RecursionError:
        raise Unusable("applying it recurses without end (a $ref that refers to itself)") from None
    except Unresolvable as error:
        raise Unusable(f"a $ref does not resolve ({shown(str(error))})") from None
