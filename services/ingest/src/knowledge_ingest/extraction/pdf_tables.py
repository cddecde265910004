"""Ruled tables of a PDF, for ``pdf.py``: the rules a page's paths draw are counted while pypdf reads
it (:class:`RuleCounter`); a page with enough of them is read again by pdfplumber, whose lattice finder
gives each table's cells and box (:func:`find_tables`); the page's text runs, moved into pdfplumber's
space (the page's /Rotate and media box undone), are then left out inside a table's box, with the
table written in their place (:func:`lines_around_tables`)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import Any, BinaryIO, Protocol, cast

import pdfplumber

from knowledge_ingest.extraction.markdown import LimitReached, TextSink, markdown_table, trim_rows

# Looking for tables parses the page a second time (pdfplumber on pdfminer, 30-50 ms a page), so
# it is done only on pages whose paths draw at least three horizontal and three vertical rules (the
# least a ruled table of two rows and two columns has; a header rule, an underline or a logo are
# not that), and not on a drawing of thousands of strokes (a map, a chart: about 0.1 ms a stroke).
MIN_RULES = 3
MAX_STROKES = 5000
_THIN = 0.02  # a rectangle this thin (short side ÷ long side) is one rule, not four
# A fine grid (graph paper: 10,000 cells cost about 2 s) can still be slow: past this share of the
# time bound the remaining pages are written as lines, so looking for tables never costs the text.
TABLE_TIME_SHARE = 0.25
_PATH_OPERATORS = frozenset({b"m", b"l", b"c", b"v", b"y", b"h", b"re"})

Run = tuple[str, float, float]  # a piece of text pypdf read, with where it starts


@dataclass(frozen=True)
class Table:
    box: tuple[float, float, float, float]  # x0, top, x1, bottom in pdfplumber's page space
    markdown: str
    rows: tuple[tuple[str, ...], ...] = ()  # the rendered cells, the header first

    @property
    def width(self) -> int:
        return max((len(row) for row in self.rows), default=0)


class RuledPage(Protocol):
    """What the table search reads and sets on a page: its runs (kept only when the page is
    ruled) and the tables found on it."""

    runs: list[Run]
    tables: list[Table]


class RuleCounter:
    """pypdf's ``visitor_operand_before``: counts the rules the page's paths draw, horizontal or
    vertical segments and the sides of rectangles, as drawn (a quarter turn swaps the two, as a
    turned table does)."""

    def __init__(self) -> None:
        self.rules: Counter[str] = Counter()  # "h" and "v"
        self.strokes = 0  # path operators
        self._point = self._start = (0.0, 0.0)  # the path's current point and its subpath's start

    @property
    def ruled(self) -> bool:
        """Whether the page draws enough rules to hold a table, and is not a drawing of thousands of strokes."""
        return min(self.rules["h"], self.rules["v"]) >= MIN_RULES and self.strokes <= MAX_STROKES

    def __call__(self, operator: bytes, operands: Any, _cm: Any, _tm: Any) -> None:
        if operator not in _PATH_OPERATORS:
            return
        self.strokes += 1
        try:
            if operator == b"re":
                x, y, width, height = (float(v) for v in operands[:4])
                self._point = self._start = (x, y)
                long, short = max(abs(width), abs(height)), min(abs(width), abs(height))
                if short <= long * _THIN:
                    self._rule(width, height)
                else:
                    self.rules.update(h=2, v=2)
            elif operator == b"h":
                self._rule(self._start[0] - self._point[0], self._start[1] - self._point[1])
                self._point = self._start
            else:
                x, y = float(operands[-2]), float(operands[-1])
                if operator == b"l":
                    self._rule(x - self._point[0], y - self._point[1])
                self._point = (x, y)
                if operator == b"m":
                    self._start = self._point
        except (TypeError, ValueError, IndexError):
            pass  # a malformed operator draws nothing we can count

    def _rule(self, dx: float, dy: float) -> None:
        if abs(dy) <= abs(dx) * _THIN and dx:
            self.rules["h"] += 1
        elif abs(dx) <= abs(dy) * _THIN and dy:
            self.rules["v"] += 1


def find_tables(stream: BinaryIO, pages: Sequence[RuledPage], sink: TextSink) -> None:
    """Tables of the pages that kept their runs (they draw rules), read by pdfplumber."""
    ruled = [number for number, page in enumerate(pages, start=1) if page.runs]
    if not ruled:
        return
    failed = 0
    deadline = time.monotonic() + sink.limits.max_seconds * TABLE_TIME_SHARE
    try:
        stream.seek(0)
        with pdfplumber.open(cast(BytesIO, stream), pages=ruled, raise_unicode_errors=False) as document:
            for done, (number, plumbed) in enumerate(zip(ruled, document.pages, strict=True)):
                sink.check_time()
                if time.monotonic() > deadline:
                    sink.warnings.append(
                        f"tables were looked for on {done:,} of {len(ruled):,} ruled pages "
                        "(time); the others are written as lines of text"
                    )
                    break
                page = pages[number - 1]
                try:
                    page.tables = _page_tables(plumbed, page)
                except Exception:  # noqa: BLE001 - pdfminer raises assorted errors; the page keeps its lines
                    failed += 1
                finally:
                    plumbed.close()  # its parsed objects, before the next page's
                if not page.tables:
                    page.runs = []
    except LimitReached as stop:
        sink.warnings.append(stop.warning)
    except Exception:  # noqa: BLE001 - a file pdfminer cannot open still has pypdf's text
        sink.warnings.append("tables could not be read; they are written as lines of text")
        return
    if failed:
        sink.warnings.append(f"tables on {failed} page(s) could not be read; they are written as lines of text")


def _page_tables(plumbed: Any, page: RuledPage) -> list[Table]:
    """The page's ruled tables of at least two rows and two columns (a lone box or a framed
    paragraph is no table), with the page's runs moved into pdfplumber's space."""
    tables = []
    for found in plumbed.find_tables():
        if len(found.rows) < 2 or len(found.columns) < 2:
            continue
        rows = trim_rows([[_cell(cell) for cell in row] for row in found.extract()])
        rendered = markdown_table(rows)
        if rendered:
            x0, top, x1, bottom = (float(v) for v in found.bbox)
            tables.append(Table((x0, top, x1, bottom), rendered, tuple(tuple(r) for r in rows)))
    if tables:
        place = _to_plumber_space(plumbed)
        page.runs = [(text, *place(x, y)) for text, x, y in page.runs]
    return tables


def _cell(text: str | None) -> str:
    """A cell's wrapped lines joined; None (a merged cell's other half) is empty."""
    return " ".join((text or "").split())


def _to_plumber_space(plumbed: Any) -> Callable[[float, float], tuple[float, float]]:
    """Maps PDF user space (where pypdf reports runs) to pdfplumber's (x, top): pdfminer first
    turns the page by its /Rotate and moves the media box's corner to the origin, then pdfplumber
    flips the y axis."""
    x0, y0, x1, y1 = (float(v) for v in plumbed.page_obj.mediabox)
    rotate = plumbed.rotation

    def place(x: float, y: float) -> tuple[float, float]:
        if rotate == 90:
            point = (y - y0, x1 - x)
        elif rotate == 180:
            point = (x1 - x, y1 - y)
        elif rotate == 270:
            point = (y1 - y, x - x0)
        else:
            point = (x - x0, y - y0)
        x, top = plumbed.point2coord(point)
        return float(x), float(top)

    return place


def lines_around_tables(page: RuledPage) -> list[str | Table]:
    """The page's lines with the runs inside a table's box left out and the table in their
    place: at its first line that pypdf read, else before the first line below its top."""
    lines: list[str | Table] = []
    tops: list[float | None] = []  # each line's top, for placing a table none of whose runs pypdf read
    placed: set[int] = set()
    kept: list[str] = []
    hits: list[int] = []
    top: float | None = None

    def end_line() -> None:
        nonlocal top
        for index in hits:
            if index not in placed:
                placed.add(index)
                lines.append(page.tables[index])
                tops.append(None)
        if "".join(kept).strip() or not hits:
            lines.append("".join(kept))
            tops.append(top)
        kept.clear()
        hits.clear()
        top = None

    for text, x, y in page.runs:
        for index, part in enumerate(text.split("\n")):
            if index:
                end_line()
            inside = _table_at(page.tables, x, y) if part.strip() else None
            if inside is None:
                kept.append(part)
                if part.strip() and top is None:
                    top = y
            elif inside not in hits:
                hits.append(inside)
    end_line()
    for index, table in enumerate(page.tables):
        if index not in placed:  # its text was not in pypdf's reading: place it by its top
            at = next((i for i, t in enumerate(tops) if t is not None and t > table.box[1]), len(lines))
            lines.insert(at, table)
            tops.insert(at, None)
    return lines


def _table_at(tables: list[Table], x: float, top: float) -> int | None:
    """The index of the table whose box holds the point (a point of slack around it), if any."""
    for index, table in enumerate(tables):
        x0, y0, x1, y1 = table.box
        if x0 - 1 <= x <= x1 + 1 and y0 - 1 <= top <= y1 + 1:
            return index
    return None


def join_continued_tables(
    pages: list[list[str | Table]], ignorable: Callable[[str], bool], starts_with_caption: Callable[[int], bool]
) -> int:
    """A table that ends its page (only ``ignorable`` lines after it: blanks, running headers,
    page numbers) and continues as the first thing on the next page with as many columns (no
    caption, heading or text in between) becomes one table on the page where it starts: the next
    page's part leaves that page, a header row it repeats is dropped. ``pages`` are each page's
    lines in order, changed in place; returns how many parts were joined."""
    joined = 0
    open_table: tuple[int, int] | None = None  # (page, line) of a table that ended its page
    for number, lines in enumerate(pages):
        first = next((i for i, line in enumerate(lines) if not _skippable(line, ignorable)), None)
        if (
            open_table is not None
            and first is not None
            and isinstance(lines[first], Table)
            and not starts_with_caption(number)
        ):
            page, index = open_table
            head = pages[page][index]
            part = lines[first]
            assert isinstance(head, Table) and isinstance(part, Table)
            if head.width == part.width and head.rows:
                rows = part.rows[1:] if part.rows[0] == head.rows[0] else part.rows
                merged = head.rows + rows
                pages[page][index] = Table(head.box, markdown_table([list(r) for r in merged]), merged)
                del lines[first]
                joined += 1
                if all(_skippable(line, ignorable) for line in lines):
                    continue  # the whole page was the table's: it may go on over the next one
        last = next((i for i in range(len(lines) - 1, -1, -1) if not _skippable(lines[i], ignorable)), None)
        open_table = (number, last) if last is not None and isinstance(lines[last], Table) else None
    return joined


def _skippable(line: str | Table, ignorable: Callable[[str], bool]) -> bool:
    return not isinstance(line, Table) and (not line.strip() or ignorable(line))
