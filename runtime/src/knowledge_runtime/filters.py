"""The one filter language of the API: Google's AIP-160, parsed by a real grammar, compiled once
to SQL.

A filter is a string such as::

    metadata.page >= 3 AND metadata.file_id = "f-42" AND NOT state = "FAILED"
    document_ref = "projects/42/*" OR metadata.tags:"hr"
    metadata.year IN (2024, 2025) AND create_time > "2026-01-01T00:00:00Z" AND metadata.owner:*

What it takes (AIP-160, with ``IN`` added, as many AIP-160 implementations do):

- comparisons ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` of a field with a string, a number, or
  ``true`` / ``false``; a string in a range comparison of a timestamp field is an RFC 3339 time;
- ``field:*`` (the field exists), ``field:value`` (a list holds the value, or the field equals it);
- ``field IN (v1, v2, ...)``;
- ``AND``, ``OR``, ``NOT`` (or ``-``), parentheses; two restrictions side by side mean ``AND``.
  As AIP-160 says, ``OR`` binds tighter than ``AND``: ``a = 1 AND b = 2 OR c = 3`` is
  ``a = 1 AND (b = 2 OR c = 3)``.
- a ``*`` at the end of a string compared with ``=`` matches every value it begins
  (``document_ref = "projects/42/*"``).

Fields are dotted names; a part that is not a plain name is written in backquotes
(``metadata.`file-id```). Which fields exist, and what SQL each reads, is the caller's: a
:class:`FieldResolver` of the service that compiles the filter (search over chunks, ingest over
documents). What the grammar refuses, and a field or operator the resolver does not know, is
:class:`FilterError` with the position (1-based column) of the fault.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Protocol

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

MAX_FILTER_CHARS = 4_000
MAX_TERMS = 100  # restrictions in one filter
MAX_IN_VALUES = 100
MAX_DEPTH = 32  # nested parentheses and NOTs: a deeper filter is refused before it is walked

_GRAMMAR = r"""
start: expr?
?expr: and_expr
?and_expr: or_expr (_AND? or_expr)*
?or_expr: term (_OR term)*
?term: _NOT term -> negation
     | "-" term -> negation
     | "(" expr ")"
     | restriction
restriction: name COMPARATOR value -> compare
           | name ":" "*" -> exists
           | name ":" value -> has
           | name _IN "(" value ("," value)* ")" -> one_of
name: PART ("." PART)*
value: STRING -> string
     | NUMBER -> number
     | _TRUE -> true
     | _FALSE -> false
COMPARATOR: "<=" | ">=" | "!=" | "=" | "<" | ">"
_AND.2: /AND\b/
_OR.2: /OR\b/
_NOT.2: /NOT\b/
_IN.2: /IN\b/
_TRUE.2: /true\b/
_FALSE.2: /false\b/
PART: /[A-Za-z_][A-Za-z0-9_]*/ | /`[^`\n]+`/
STRING: /"(?:[^"\\\n]|\\.)*"/
NUMBER: /-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/
%ignore /\s+/
"""


class FilterError(ValueError):
    """A filter the grammar or the fields refuse; ``column`` is 1-based (0: the whole filter)."""

    def __init__(self, message: str, column: int = 0) -> None:
        super().__init__(message if not column else f"{message} (at column {column})")
        self.column = column


class Op(Enum):
    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    HAS = ":"
    IN = "IN"
    EXISTS = ":*"


Value = str | float | bool


@dataclass(frozen=True)
class Restriction:
    name: tuple[str, ...]
    op: Op
    values: tuple[Value, ...] = ()
    column: int = 0


@dataclass(frozen=True)
class Not:
    item: Node


@dataclass(frozen=True)
class AllOf:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class AnyOf:
    items: tuple[Node, ...]


Node = Restriction | Not | AllOf | AnyOf


@v_args(inline=True)
class _Tree(Transformer):
    def start(self, expr: Node | None = None) -> Node | None:
        return expr

    def and_expr(self, *items: Node) -> Node:
        return AllOf(tuple(items))

    def or_expr(self, *items: Node) -> Node:
        return AnyOf(tuple(items))

    def negation(self, item: Node) -> Node:
        return Not(item)

    def name(self, *parts: Token) -> tuple[tuple[str, ...], int]:
        return tuple(str(p)[1:-1] if str(p).startswith("`") else str(p) for p in parts), parts[0].column or 0

    def compare(self, name: tuple[tuple[str, ...], int], op: Token, value: Value) -> Restriction:
        return Restriction(name[0], Op(str(op)), (value,), name[1])

    def exists(self, name: tuple[tuple[str, ...], int]) -> Restriction:
        return Restriction(name[0], Op.EXISTS, (), name[1])

    def has(self, name: tuple[tuple[str, ...], int], value: Value) -> Restriction:
        return Restriction(name[0], Op.HAS, (value,), name[1])

    def one_of(self, name: tuple[tuple[str, ...], int], *values: Value) -> Restriction:
        if len(values) > MAX_IN_VALUES:
            raise FilterError(f"IN takes at most {MAX_IN_VALUES} values", name[1])
        return Restriction(name[0], Op.IN, tuple(values), name[1])

    def string(self, token: Token) -> str:
        return str(json.loads(str(token)))

    def number(self, token: Token) -> float:
        number = float(str(token))
        if not math.isfinite(number):
            raise FilterError(f"{token} is not a finite number", token.column or 0)
        return number

    def true(self) -> bool:
        return True

    def false(self) -> bool:
        return False


_PARSER = Lark(_GRAMMAR, parser="lalr", maybe_placeholders=False, propagate_positions=False)


def parse(text: str) -> Node | None:
    """The filter's tree; None for an empty filter (everything passes)."""
    if len(text) > MAX_FILTER_CHARS:
        raise FilterError(f"a filter is at most {MAX_FILTER_CHARS} characters")
    if not text.strip():
        return None
    try:
        parsed = _PARSER.parse(text)
        if _depth(parsed) > MAX_DEPTH:
            raise FilterError(f"a filter nests at most {MAX_DEPTH} levels deep")
        tree = _Tree().transform(parsed)
    except VisitError as error:
        if isinstance(error.orig_exc, FilterError):
            raise error.orig_exc from None
        raise
    except UnexpectedInput as error:
        raise FilterError(_explain(error), error.column if isinstance(error.column, int) else 0) from None
    if _count(tree) > MAX_TERMS:
        raise FilterError(f"a filter has at most {MAX_TERMS} restrictions")
    return tree


def _depth(tree: Tree[Token]) -> int:
    """How deep the parsed tree goes, walked without recursion (the walk that follows recurses)."""
    deepest, pending = 0, [(tree, 1)]
    while pending:
        node, depth = pending.pop()
        deepest = max(deepest, depth)
        pending += [(child, depth + 1) for child in node.children if isinstance(child, Tree)]
    return deepest


def _explain(error: UnexpectedInput) -> str:
    if isinstance(error, UnexpectedEOF) or (isinstance(error, UnexpectedToken) and error.token.type == "$END"):
        return "the filter ends too early"
    if isinstance(error, UnexpectedToken):
        return f"unexpected {str(error.token)!r}"
    if isinstance(error, UnexpectedCharacters):
        return f"unexpected character {error.char!r}"
    return "the filter cannot be read"


def _count(node: Node) -> int:
    if isinstance(node, Restriction):
        return 1
    if isinstance(node, Not):
        return _count(node.item)
    return sum(_count(item) for item in node.items)


# -- compiling ------------------------------------------------------------------------------------


class Kind(Enum):
    TEXT = "text"  # a text column: =, !=, IN, a trailing-* prefix, :* (not null)
    TIMESTAMP = "timestamp"  # a timestamptz column: comparisons with RFC 3339 times
    JSON = "json"  # one key of a jsonb object: every operator, typed by the value


@dataclass(frozen=True)
class Column:
    """What a field reads: a SQL expression (a column, or for JSON the jsonb object holding the key)."""

    sql: str
    kind: Kind
    key: str = ""  # JSON: the key inside the object
    choices: frozenset[str] = frozenset()  # TEXT: the only values it can hold (an enum), if any


class FieldResolver(Protocol):
    def __call__(self, name: tuple[str, ...]) -> Column | None: ...


@dataclass
class Params:
    """The statement's parameters: the filter's values are appended after what the query has."""

    values: list[object] = field(default_factory=list)
    first: int = 1

    def add(self, value: object) -> str:
        self.values.append(value)
        return f"${self.first + len(self.values) - 1}"


def compile_sql(node: Node | None, resolve: FieldResolver, params: Params) -> str:
    """A SQL boolean expression equal to the filter; its values are bound parameters, never text
    of the statement. ``TRUE`` for no filter."""
    if node is None:
        return "TRUE"
    return _Compiler(resolve, params).node(node)


@dataclass
class _Compiler:
    resolve: FieldResolver
    params: Params

    def node(self, node: Node) -> str:
        if isinstance(node, Restriction):
            return self.restriction(node)
        if isinstance(node, Not):
            return f"NOT coalesce({self.node(node.item)}, FALSE)"
        joiner = " AND " if isinstance(node, AllOf) else " OR "
        return "(" + joiner.join(self.node(item) for item in node.items) + ")"

    def restriction(self, r: Restriction) -> str:
        column = self.resolve(r.name)
        if column is None:
            raise FilterError(f"unknown field {'.'.join(r.name)!r}", r.column)
        compilers: dict[Kind, Callable[[Column, Restriction], str]] = {
            Kind.TEXT: self.text,
            Kind.TIMESTAMP: self.timestamp,
            Kind.JSON: self.json,
        }
        return compilers[column.kind](column, r)

    def _refuse(self, r: Restriction, what: str) -> FilterError:
        return FilterError(f"{'.'.join(r.name)} {what}", r.column)

    def text(self, column: Column, r: Restriction) -> str:
        if r.op is Op.EXISTS:
            return f"({column.sql} IS NOT NULL)"
        values = [self._text_value(column, r, v) for v in r.values]
        if r.op is Op.IN:
            return f"({column.sql} = ANY({self.params.add(values)}::text[]))"
        if r.op in (Op.EQ, Op.HAS) and values[0].endswith("*"):
            prefix = _like_escape(values[0][:-1]) + "%"
            return f"({column.sql} LIKE {self.params.add(prefix)})"
        if r.op in (Op.EQ, Op.HAS):
            return f"({column.sql} = {self.params.add(values[0])})"
        if r.op is Op.NE:
            return f"({column.sql} IS DISTINCT FROM {self.params.add(values[0])})"
        raise self._refuse(r, f"takes =, !=, IN or :*, not {r.op.value}")

    def _text_value(self, column: Column, r: Restriction, value: Value) -> str:
        if not isinstance(value, str):
            raise self._refuse(r, "is compared with a string")
        if column.choices and value not in column.choices and not value.endswith("*"):
            raise self._refuse(r, f"is one of {', '.join(sorted(column.choices))}")
        return value

    def timestamp(self, column: Column, r: Restriction) -> str:
        if r.op is Op.EXISTS:
            return f"({column.sql} IS NOT NULL)"
        if r.op in (Op.HAS, Op.IN):
            raise self._refuse(r, f"takes =, !=, <, <=, >, >= or :*, not {r.op.value}")
        moment = _timestamp(r.values[0], r)
        sql_op = "IS DISTINCT FROM" if r.op is Op.NE else r.op.value
        return f"({column.sql} {sql_op} {self.params.add(moment)}::timestamptz)"

    def json(self, column: Column, r: Restriction) -> str:
        key = _json_path_key(column.key)
        if r.op is Op.EXISTS:
            return f"({column.sql} ? {self.params.add(column.key)})"
        if r.op is Op.IN:
            path = " || ".join(f"@ == {_json_literal(v)}" for v in r.values)
            return f"({column.sql} @? {self.params.add(f'$.{key} ? ({path})')}::jsonpath)"
        if r.op is Op.NE:
            inner = f"$.{key} ? (@ == {_json_literal(r.values[0])})"
            return f"(NOT ({column.sql} @? {self.params.add(inner)}::jsonpath))"
        value = r.values[0]
        if r.op in (Op.EQ, Op.HAS):
            if isinstance(value, str) and r.op is Op.EQ and value.endswith("*"):
                prefix = _json_literal(value[:-1])
                return f"({column.sql} @? {self.params.add(f'$.{key} ? (@ starts with {prefix})')}::jsonpath)"
            # lax mode: a list holds the value, or the value is the value itself
            return f"({column.sql} @? {self.params.add(f'$.{key} ? (@ == {_json_literal(value)})')}::jsonpath)"
        if isinstance(value, bool):
            raise self._refuse(r, f"compares a boolean with = or !=, not {r.op.value}")
        if isinstance(value, str):
            # A range over a string is a range over time: RFC 3339 on both sides.
            moment = _timestamp(value, r).isoformat()
            condition = f'@.datetime() {r.op.value} "{moment}".datetime()'
        else:
            condition = f"@ {r.op.value} {_json_literal(value)}"
        return f"({column.sql} @? {self.params.add(f'$.{key} ? ({condition})')}::jsonpath)"


def _json_literal(value: Value) -> str:
    """A jsonpath literal; JSON's own quoting keeps a string from ending the path."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return json.dumps(value)


def _json_path_key(key: str) -> str:
    return json.dumps(key)


def _like_escape(text: str) -> str:
    return re.sub(r"([\\%_])", r"\\\1", text)


def _timestamp(value: Value, r: Restriction) -> datetime:
    if not isinstance(value, str):
        raise FilterError(f"{'.'.join(r.name)} is compared with an RFC 3339 time in quotes", r.column)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise FilterError(f"{value!r} is not an RFC 3339 time", r.column) from None
    if moment.tzinfo is None:
        raise FilterError(f"{value!r} needs a time zone (Z or +hh:mm)", r.column)
    return moment.astimezone(UTC)
