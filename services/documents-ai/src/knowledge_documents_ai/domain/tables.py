"""Schemaless extraction: a document's markdown tables as columns and typed rows.

Ingest writes every table it finds (PDF, Word, PowerPoint, spreadsheets, HTML) as a markdown
pipe table, and a table split across chunks repeats its header row. This reads those tables
with a markdown parser (markdown-it-py, GFM tables), joins a table continued in the next
chunk (same header, nothing in between), and *measures* each column's type from its cells:
the narrowest of boolean, integer, number, date and text that fits every non-empty cell. No
type is declared by hand and no LLM is involved.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from markdown_it import MarkdownIt

BOOLEAN, INTEGER, NUMBER, DATE, TEXT, EMPTY = "boolean", "integer", "number", "date", "text", "empty"
_TRUE, _FALSE = {"true", "yes"}, {"false", "no"}
_INTEGER = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)$")
_NUMBER = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][+-]?\d+)?%?$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

_PARSER = MarkdownIt("commonmark", {"html": False}).enable("table")


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str  # one of BOOLEAN, INTEGER, NUMBER, DATE, TEXT; EMPTY when no cell has a value
    filled: int  # cells with a value
    empty: int


@dataclass(frozen=True, slots=True)
class ExtractedTable:
    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...]  # typed values, None for an empty cell
    title: str = ""  # the heading the table follows, if any (a sheet's name, a section)
    sources: tuple[Any, ...] = ()  # where it was read: the callers' evidence (chunk ids, pages)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def schema(self) -> dict[str, Any]:
        """The measured schema: column names and types, row count."""
        return {
            "columns": [{"name": c.name, "type": c.type, "filled": c.filled, "empty": c.empty} for c in self.columns],
            "row_count": self.row_count,
        }


@dataclass(frozen=True, slots=True)
class _RawTable:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str
    source: Any
    first_block: bool  # nothing but the table (and headings) before it in its text
    last_block: bool  # nothing after it in its text


def read_tables(markdown: str, source: Any = None) -> list[_RawTable]:
    """The pipe tables of one text, in order, with their cells as text."""
    tokens = _PARSER.parse(markdown)
    found: list[_RawTable] = []
    title = ""
    block_before = False
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type == "heading_open":
            title = tokens[i + 1].content.strip()
            i += 3
            continue
        if token.type != "table_open":
            if token.level == 0 and token.type.endswith("_open"):
                block_before = True
            i += 1
            continue
        header: list[str] = []
        rows: list[list[str]] = []
        row: list[str] | None = None
        in_head = False
        while tokens[i].type != "table_close":
            kind = tokens[i].type
            if kind == "thead_open":
                in_head = True
            elif kind == "thead_close":
                in_head = False
            elif kind == "tr_open":
                row = []
            elif kind == "tr_close" and row is not None:
                if in_head:
                    header = row
                else:
                    rows.append(row)
                row = None
            elif kind == "inline" and row is not None:
                row.append(tokens[i].content.strip())
            i += 1
        last = not any(t.level == 0 and t.type.endswith("_open") for t in tokens[i + 1 :])
        width = len(header)
        found.append(
            _RawTable(
                header=tuple(header),
                rows=tuple(tuple((r + [""] * width)[:width]) for r in rows),
                title=title,
                source=source,
                first_block=not block_before,
                last_block=last,
            )
        )
        block_before = True
        i += 1
    return found


def extract_tables(texts: Iterable[tuple[str, Any]]) -> list[ExtractedTable]:
    """Every table of ``texts`` (each a (markdown, source) pair, in document order: chunks or
    pages) with measured column types. A table that ends one text and starts the next with the
    same header is one table; rows the two texts share at the seam (chunk overlap) count once."""
    merged: list[_Joined] = []
    for position, (markdown, source) in enumerate(texts):
        for table in read_tables(markdown, source):
            last = merged[-1] if merged else None
            if (
                last is not None
                and last.ends_its_text
                and table.first_block
                and table.header == last.header
                and last.last_text < position
            ):
                last.rows.extend(table.rows[_seam_overlap(last.rows, table.rows) :])
                last.sources.append(source)
                last.ends_its_text, last.last_text = table.last_block, position
                continue
            merged.append(_Joined(table.header, table.title, list(table.rows), [source], table.last_block, position))
    return [_typed(joined) for joined in merged]


@dataclass(slots=True)
class _Joined:
    header: tuple[str, ...]
    title: str
    rows: list[tuple[str, ...]]
    sources: list[Any]
    ends_its_text: bool
    last_text: int  # the position of the text its last rows came from


def _seam_overlap(before: Sequence[tuple[str, ...]], after: Sequence[tuple[str, ...]]) -> int:
    """How many rows at the start of ``after`` repeat the end of ``before``."""
    for size in range(min(len(before), len(after)), 0, -1):
        if tuple(before[-size:]) == tuple(after[:size]):
            return size
    return 0


def _typed(table: _Joined) -> ExtractedTable:
    rows = table.rows
    columns = []
    converters = []
    for index, name in enumerate(table.header):
        cells = [row[index] for row in rows]
        kind = column_type(cells)
        filled = sum(1 for c in cells if c)
        columns.append(Column(name or f"column_{index + 1}", kind, filled, len(cells) - filled))
        converters.append(kind)
    typed_rows = tuple(
        tuple(typed_value(cell, kind) for cell, kind in zip(row, converters, strict=True)) for row in rows
    )
    return ExtractedTable(columns=tuple(columns), rows=typed_rows, title=table.title, sources=tuple(table.sources))


def column_type(cells: Sequence[str]) -> str:
    """The narrowest type every non-empty cell fits."""
    values = [c.strip() for c in cells if c.strip()]
    if not values:
        return EMPTY
    for kind in (BOOLEAN, INTEGER, NUMBER, DATE):
        if all(_fits(v, kind) for v in values):
            return kind
    return TEXT


def _fits(value: str, kind: str) -> bool:
    if kind == BOOLEAN:
        return value.lower() in _TRUE | _FALSE
    if kind == INTEGER:
        return bool(_INTEGER.match(value))
    if kind == NUMBER:
        return bool(_NUMBER.match(value)) and any(ch.isdigit() for ch in value)
    if kind == DATE:
        if not _ISO_DATE.match(value):
            return False
        try:
            date.fromisoformat(value)
        except ValueError:
            return False
        return True
    return True


def typed_value(cell: str, kind: str) -> Any:
    """A cell as its column's type (dates stay ISO strings, for JSON); None when empty."""
    value = cell.strip()
    if not value:
        return None
    if kind == BOOLEAN:
        return value.lower() in _TRUE
    if kind == INTEGER:
        return int(value.replace(",", ""))
    if kind == NUMBER:
        number = float(value.rstrip("%").replace(",", ""))
        return number / 100 if value.endswith("%") else number
    return value
