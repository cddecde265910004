"""What a request's ``filter`` may name, the same in every service that takes one.

The language is ``knowledge_runtime.filters`` (AIP-160 with IN). Its fields are a document's:
``metadata.<key>`` (JSON), and the built-ins ``document_ref`` (text; ``"prefix/*"`` matches a
prefix), ``filename``, ``mime_type``, ``create_time`` (a time) and ``state`` (one of
``DOCUMENT_STATES``). Each service says only where those live in its SQL (ingest's listings read
the document row; search's channels read the chunk row, whose metadata carries the document's,
and the document row for the built-ins): :func:`document_fields` makes its resolver.

A filter the grammar refuses, or a field or operator the fields refuse, is
:class:`FilterInvalid` (INVALID_ARGUMENT, reason FILTER_INVALID, ``field`` and the 1-based
``column`` of the fault in its metadata): the caller's mistake, never a 500.
"""

from __future__ import annotations

from collections.abc import Callable

from knowledge_runtime.errors import InvalidField
from knowledge_runtime.filters import Column, FieldResolver, FilterError, Kind, Node, Params, compile_sql, parse

# knowledge.v1.DocumentState's names without their prefix (a test keeps them equal).
DOCUMENT_STATES = frozenset(
    {"QUEUED", "EXTRACTING", "CHUNKING", "EMBEDDING", "STORING", "SEARCHABLE", "FAILED", "CANCELLED"}
)
# The built-in fields: the document column each reads, and its kind.
BUILT_INS: dict[str, tuple[str, Kind]] = {
    "document_ref": ("document_ref", Kind.TEXT),
    "filename": ("filename", Kind.TEXT),
    "mime_type": ("mime_type", Kind.TEXT),
    "create_time": ("create_time", Kind.TIMESTAMP),
    "state": ("state", Kind.TEXT),
}


class FilterInvalid(InvalidField):
    reason = "FILTER_INVALID"

    def __init__(self, error: FilterError, field: str = "filter") -> None:
        super().__init__(field, f"{field}: {error}", column=str(error.column))
        self.column = error.column


def document_fields(metadata: str, document: Callable[[str], str]) -> FieldResolver:
    """The resolver of a service's SQL: ``metadata`` is the jsonb expression holding the metadata
    keys, ``document(column)`` the SQL of a column of the document."""

    def resolve(name: tuple[str, ...]) -> Column | None:
        if len(name) == 2 and name[0] == "metadata":
            return Column(metadata, Kind.JSON, key=name[1])
        if len(name) == 1 and name[0] in BUILT_INS:
            column, kind = BUILT_INS[name[0]]
            choices = DOCUMENT_STATES if name[0] == "state" else frozenset()
            return Column(document(column), kind, choices=choices)
        return None

    return resolve


def parse_filter(text: str, field: str = "filter") -> Node | None:
    """The request's filter as a tree (None: no filter), or FilterInvalid at its column."""
    try:
        return parse(text)
    except FilterError as error:
        raise FilterInvalid(error, field) from None


def compile_filter(node: Node | None, resolve: FieldResolver, params: Params, field: str = "filter") -> str:
    """The filter as a SQL condition with bound values, or FilterInvalid for a field or operator
    the resolver refuses (an unknown field, a range over text...)."""
    try:
        return compile_sql(node, resolve, params)
    except FilterError as error:
        raise FilterInvalid(error, field) from None
