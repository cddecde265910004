"""PDF through pypdf: ``[Page N]`` per page, headings from the outline or, without one, from
font size. Ruled tables arrive as markdown tables where they stand on their page: a page whose
content draws enough rules (``re``/``l`` operators, counted while pypdf reads it) is read again
by pdfplumber, whose lattice finder gives each table's cells and box; the lines pypdf read inside
a box are left out, so a table's words are written once. Tables without rules stay lines of text."""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pdfplumber
from pypdf import PdfReader
from pypdf.errors import PdfReadError, PyPdfError

from knowledge_ingest.adapters.extraction.markdown import (
    LimitReached, TextSink, markdown_table, one_line, plain, trim_rows,
)
from knowledge_ingest.domain.extraction import ExtractionFailed

_SPACES = re.compile(r"\s+")
_BLANK_RUNS = re.compile(r"\n{3,}")
HEADING_MIN_RATIO = 1.15  # a line this much larger than the body text is a heading
HEADING_MAX_CHARS = 150
_MAX_HEADING_LEVELS = 3
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
_TABLE = -1  # the level an output line has when it is a rendered table


@dataclass(frozen=True)
class _Table:
    box: tuple[float, float, float, float]  # x0, top, x1, bottom in pdfplumber's page space
    markdown: str


@dataclass
class _Page:
    text: str = ""
    sizes: dict[str, float] = field(default_factory=dict)  # line key → its font size
    weights: Counter[float] = field(default_factory=Counter)  # font size → characters
    runs: list[tuple[str, float, float]] = field(default_factory=list)  # pypdf's text pieces, each where it starts
    rules: Counter[str] = field(default_factory=Counter)  # "h" and "v": the rules its paths draw
    strokes: int = 0  # path operators
    tables: list[_Table] = field(default_factory=list)


def open_pdf(stream: BinaryIO) -> PdfReader:
    """The reader, decrypted when an empty user password opens it; else PDF_ENCRYPTED."""
    try:
        reader = PdfReader(stream, strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except (PyPdfError, NotImplementedError, ValueError, KeyError):
                opened = 0
            if not opened:
                raise ExtractionFailed(
                    "the PDF is password-protected; remove the password and upload it again",
                    reason=ExtractionFailed.PDF_ENCRYPTED, file_format="pdf",
                )
        _ = len(reader.pages)
    except ExtractionFailed:
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError, RecursionError, OSError):
        raise ExtractionFailed(
            "the PDF is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT, file_format="pdf"
        ) from None
    return reader


def extract_pdf(stream: BinaryIO, sink: TextSink) -> int:
    """Write the PDF into ``sink``; returns its page count."""
    reader = open_pdf(stream)
    page_count = len(reader.pages)
    outline = _outline_by_page(reader, sink)
    pages: list[_Page] = []
    try:
        for page in _read_pages(reader, sink):
            pages.append(page)
    except LimitReached as stop:  # what was read before the limit is still written
        sink.warnings.append(stop.warning)
    else:
        _find_tables(stream, pages, sink)
    body = _body_size(pages) if not outline else None
    levels = _size_levels(pages, body) if body else {}
    running = _running_lines(pages) if levels else set()
    try:
        for number, page in enumerate(pages, start=1):
            _write_page(sink, number, page, outline.get(number - 1, []), levels, running)
    except LimitReached as stop:
        sink.warnings.append(stop.warning)
    return page_count


def _read_pages(reader: PdfReader, sink: TextSink) -> Iterator[_Page]:
    total = len(reader.pages)
    if total > sink.limits.max_pages:
        sink.warnings.append(f"only the first {sink.limits.max_pages:,} of {total:,} pages were read")
    failed = 0
    read_chars = 0
    for index in range(min(total, sink.limits.max_pages)):
        sink.check_time()
        page = _Page()
        try:
            visitor = _PageRecorder(page)
            page.text = reader.pages[index].extract_text(visitor_text=visitor, visitor_operand_before=visitor.operator)
            visitor.flush()
        except Exception:  # noqa: BLE001 - pypdf raises assorted errors on damaged pages; skip the page
            failed += 1
            page = _Page()
        ruled = min(page.rules["h"], page.rules["v"]) >= MIN_RULES and page.strokes <= MAX_STROKES
        if not ruled or "".join(run[0] for run in page.runs) != page.text:
            page.runs = []  # no table to look for, or pieces that do not add up to the text: lines as read
        read_chars += len(page.text)
        yield page
        if read_chars > sink.limits.max_chars:
            break
    if failed:
        sink.warnings.append(f"{failed} page(s) could not be read")


class _PageRecorder:
    """pypdf's visitors: record each text run's font size, and each visual line's (the runs on
    one baseline joined) as the size most of its characters have; for finding tables, each run
    with where it starts, and how many rule-drawing operators the page has."""

    def __init__(self, page: _Page) -> None:
        self._page = page
        self._y: float | None = None
        self._keys: list[str] = []
        self._weights: Counter[float] = Counter()
        self._point = self._start = (0.0, 0.0)  # the path's current point and its subpath's start

    def operator(self, operator: bytes, operands: Any, _cm: Any, _tm: Any) -> None:
        """Counts the rules the page's paths draw: horizontal or vertical segments, and the
        sides of rectangles, as drawn (a quarter turn swaps the two, as a turned table does)."""
        if operator not in _PATH_OPERATORS:
            return
        self._page.strokes += 1
        try:
            if operator == b"re":
                x, y, width, height = (float(v) for v in operands[:4])
                self._point = self._start = (x, y)
                long, short = max(abs(width), abs(height)), min(abs(width), abs(height))
                if short <= long * _THIN:
                    self._rule(width, height)
                else:
                    self._page.rules.update(h=2, v=2)
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
            self._page.rules["h"] += 1
        elif abs(dx) <= abs(dy) * _THIN and dy:
            self._page.rules["v"] += 1

    def __call__(self, text: str, cm: list[float], tm: list[float], _font: Any, font_size: float) -> None:
        if not text.strip():
            if text:
                self._page.runs.append((text, 0.0, 0.0))  # a space or a line break: no table holds it
            return
        _, _, c, d, x, y = _multiply(tm, cm)
        self._page.runs.append((text, x, y))
        if not font_size:
            return
        size = round(float(font_size) * math.hypot(c, d) * 2) / 2
        if not size:
            return
        if self._y is None or abs(y - self._y) > 1.0:
            self.flush()
            self._y = y
        for index, part in enumerate(text.split("\n")):
            if index:
                self.flush()
            key = _key(part)
            if key:
                self._record(key, size)
                self._page.weights[size] += len(key)
                self._keys.append(key)
                self._weights[size] += len(key)

    def flush(self) -> None:
        key = "".join(self._keys)
        if key and self._weights:
            self._record(key, self._weights.most_common(1)[0][0])
        self._keys, self._weights = [], Counter()

    def _record(self, key: str, size: float) -> None:
        self._page.sizes[key] = max(self._page.sizes.get(key, 0.0), size)


def _find_tables(stream: BinaryIO, pages: list[_Page], sink: TextSink) -> None:
    """Tables of the pages that kept their runs (they draw rules), read by pdfplumber."""
    ruled = [number for number, page in enumerate(pages, start=1) if page.runs]
    if not ruled:
        return
    failed = 0
    deadline = time.monotonic() + sink.limits.max_seconds * TABLE_TIME_SHARE
    try:
        stream.seek(0)
        with pdfplumber.open(stream, pages=ruled, raise_unicode_errors=False) as document:
            for done, (number, plumbed) in enumerate(zip(ruled, document.pages, strict=True)):
                sink.check_time()
                if time.monotonic() > deadline:
                    sink.warnings.append(f"tables were looked for on {done:,} of {len(ruled):,} ruled pages "
                                         "(time); the others are written as lines of text")
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


def _page_tables(plumbed: Any, page: _Page) -> list[_Table]:
    """The page's ruled tables of at least two rows and two columns (a lone box or a framed
    paragraph is no table), with the page's runs moved into pdfplumber's space."""
    tables = []
    for found in plumbed.find_tables():
        if len(found.rows) < 2 or len(found.columns) < 2:
            continue
        rows = [[_cell(cell) for cell in row] for row in found.extract()]
        rendered = markdown_table(trim_rows(rows))
        if rendered:
            tables.append(_Table(tuple(float(v) for v in found.bbox), rendered))
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


def _multiply(m: list[float], n: list[float]) -> tuple[float, float, float, float, float, float]:
    """The 2-D affine product m × n (PDF matrices [a b c d e f])."""
    try:
        a, b, c, d, e, f = (float(x) for x in m[:6])
        g, h, i, j, k, l = (float(x) for x in n[:6])
    except (TypeError, ValueError):
        return 1.0, 0.0, 0.0, 1.0, 0.0, 0.0
    return a * g + b * i, a * h + b * j, c * g + d * i, c * h + d * j, e * g + f * i + k, e * h + f * j + l


def _key(text: str) -> str:
    return _SPACES.sub("", text)


def _body_size(pages: list[_Page]) -> float | None:
    weights: Counter[float] = Counter()
    for page in pages:
        weights.update(page.weights)
    return weights.most_common(1)[0][0] if weights else None


def _size_levels(pages: list[_Page], body: float) -> dict[float, int]:
    """Font sizes larger than the body's, the largest first, as heading levels 1..3."""
    sizes = {size for page in pages for size in page.sizes.values() if size >= body * HEADING_MIN_RATIO}
    ordered = sorted(sizes, reverse=True)
    return {size: min(rank + 1, _MAX_HEADING_LEVELS) for rank, size in enumerate(ordered)}


def _running_lines(pages: list[_Page]) -> set[str]:
    """Lines on at least half the pages (three or more): running headers and footers, which
    are never headings even when their font is large."""
    counts: Counter[str] = Counter()
    for page in pages:
        counts.update({_key(line) for line in page.text.split("\n")})
    floor = max(3, (len(pages) + 1) // 2)
    return {key for key, count in counts.items() if key and count >= floor}


def _write_page(sink: TextSink, number: int, page: _Page, marks: list[tuple[int, str]],
                levels: dict[float, int], running: set[str]) -> None:
    lines = _lines_around_tables(page) if page.tables else _lines(page.text)
    keys = {_key(line) for line in lines if isinstance(line, str)}
    # An outline entry whose title is a line of the page becomes that line; the others start the page.
    placed = {_key(title): (level, title) for level, title in marks if _key(title) in keys}
    out: list[tuple[int, str]] = [(level, title) for level, title in marks if _key(title) not in placed]
    for line in lines:
        if isinstance(line, _Table):
            out.append((_TABLE, line.markdown))
            continue
        key = _key(line)
        if not key:
            out.append((0, ""))
        elif key in placed:
            out.append(placed.pop(key))
        else:
            level = _font_level(line, key, page, levels) if key not in running else 0
            if level and out and out[-1][0] == level and out[-1][1] and not marks:
                out[-1] = (level, f"{out[-1][1]} {line.strip()}")  # a heading wrapped onto two lines
            else:
                out.append((level, line))
    sink.page(number)
    text = "\n".join(_render(level, line) for level, line in out)
    sink.add(_BLANK_RUNS.sub("\n\n", text).strip("\n"))


def _render(level: int, line: str) -> str:
    if level == _TABLE:
        return f"\n{line}\n"
    return _heading(level, line) if level else plain(line)


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _lines_around_tables(page: _Page) -> list[str | _Table]:
    """The page's lines with the runs inside a table's box left out and the table in their
    place: at its first line that pypdf read, else before the first line below its top."""
    lines: list[str | _Table] = []
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


def _table_at(tables: list[_Table], x: float, top: float) -> int | None:
    """The index of the table whose box holds the point (a point of slack around it), if any."""
    for index, table in enumerate(tables):
        x0, y0, x1, y1 = table.box
        if x0 - 1 <= x <= x1 + 1 and y0 - 1 <= top <= y1 + 1:
            return index
    return None


def _font_level(line: str, key: str, page: _Page, levels: dict[float, int]) -> int:
    """The heading level of a line set in a heading-sized font, else 0."""
    if levels and len(line) <= HEADING_MAX_CHARS and any(ch.isalpha() for ch in line):
        size = page.sizes.get(key)
        return levels.get(size, 0) if size is not None else 0
    return 0


def _heading(level: int, title: str) -> str:
    return f"\n{'#' * level} {one_line(title)}\n"


def _outline_by_page(reader: PdfReader, sink: TextSink) -> dict[int, list[tuple[int, str]]]:
    """Outline entries by page index: (level, title), level 1 for top-level entries."""
    found: dict[int, list[tuple[int, str]]] = {}
    try:
        outline = reader.outline
    except Exception:  # noqa: BLE001 - a damaged outline is not worth failing the document
        return found

    def walk(items: list[Any], depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                if depth < 6:
                    walk(item, depth + 1)
                continue
            title = one_line(str(getattr(item, "title", "") or ""))
            try:
                index = reader.get_destination_page_number(item)
            except Exception:  # noqa: BLE001 - an entry pointing nowhere is skipped
                continue
            if title and index is not None and index >= 0:
                found.setdefault(index, []).append((min(depth, 6), title))

    try:
        walk(list(outline or []), 1)
    except RecursionError:
        sink.warnings.append("the PDF outline was too deep to read")
    return found
